/// What one field of a payload held, decided as its value was read.
///
/// The streaming decoder reads members in the document's order but reports like a reader that
/// first parsed the whole document and then checked the fields one by one: a syntax error
/// anywhere wins (it is thrown at once), and otherwise the first error in the order the payload
/// checks its fields. So a field's error waits in `.invalid` until the document has been read
/// to its end, and the reported error never depends on the order of keys.
enum Found<Value> {
    case absent
    case null
    case value(Value)
    case invalid(FieldError)

    /// The value of a field that must be there; `kind` ("a string") words the null error.
    func required(_ field: @autoclosure () -> String, _ kind: String) throws(FieldError) -> Value {
        switch self {
        case .absent: throw FieldError(field: field(), reason: "missing")
        case .null: throw FieldError(field: field(), reason: "must be \(kind), not null")
        case .value(let value): return value
        case .invalid(let error): throw error
        }
    }

    /// The value of an optional field: nil when absent or null.
    func optional() throws(FieldError) -> Value? {
        switch self {
        case .absent, .null: return nil
        case .value(let value): return value
        case .invalid(let error): throw error
        }
    }
}

/// The names of the fields a payload decodes, matched against a key's bytes where it lies.
struct KnownKeys<Key: CaseIterable & RawRepresentable<String>>: Sendable where Key: Sendable {
    let cases: [Key]
    let names: [[UInt8]]

    init() {
        cases = Array(Key.allCases)
        names = cases.map { Array($0.rawValue.utf8) }
        precondition(cases.count <= 64, "a payload decodes at most 64 fields")
    }

    func index(of key: UnsafeBufferPointer<UInt8>) -> Int? {
        for (i, name) in names.enumerated() where name.count == key.count {
            let equal = name.withUnsafeBufferPointer { name in
                for j in 0..<name.count where name[j] != key[j] { return false }
                return true
            }
            if equal { return i }
        }
        return nil
    }
}

/// A member of an object: one of the payload's fields, or another key (by its decoded text).
enum Member<Key> {
    case known(Key)
    case other(String)
}

/// Decodes a built-in payload from its JSON bytes straight into typed fields: no `JSONValue`
/// tree, no dictionary, dates parsed where they lie. It reads with the tree parser's own
/// tokenizer (``JSONParser/Cursor``), so what is malformed — syntax, invalid UTF-8, a duplicate
/// key, a number that would not be kept exactly, nesting deeper than 64 — is refused with the
/// same message; values it does not decode (unknown keys, an action's `payload`) are parsed by
/// that parser as they always were. Field errors are the payload's own, with their paths
/// (``Found``).
///
/// ```swift
/// let event = try DomainEvent.decode(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8))
/// ```
struct PayloadReader {
    typealias Failure = JSONParser.Failure
    private var cursor: JSONParser.Cursor

    /// Runs `body` on a reader of `bytes`, which must hold exactly one value (whitespace aside).
    static func read<T>(_ bytes: [UInt8], _ body: (inout PayloadReader) throws(Failure) -> T) throws(Failure) -> T {
        try bytes.withUnsafeBufferPointer { (buffer: UnsafeBufferPointer<UInt8>) throws(Failure) -> T in
            var reader = PayloadReader(cursor: JSONParser.Cursor(bytes: buffer))
            do throws(Failure) {
                reader.cursor.skipWhitespace()
                let result = try body(&reader)
                reader.cursor.skipWhitespace()
                guard reader.cursor.index == buffer.count else { throw Failure() }
                return result
            } catch {
                throw error.at(min(reader.cursor.index, buffer.count))   // a syntax error names its byte
            }
        }
    }

    private var next: UInt8? { cursor.index < cursor.bytes.count ? cursor.bytes[cursor.index] : nil }

    private mutating func separator(_ close: UInt8) throws(Failure) -> Bool {
        cursor.skipWhitespace()
        switch next {
        case UInt8(ascii: ",")?: cursor.index += 1; return false
        case close?: cursor.index += 1; return true
        default: throw Failure()
        }
    }

    /// Parses whatever value stands here and drops it.
    mutating func skip(depth: Int) throws(Failure) { _ = try cursor.value(depth: depth) }

    /// Reads an object at `depth` member by member, in document order: `member` reads the
    /// value of each (at `depth + 1`; ``skip(depth:)`` for one it does not want). A key given
    /// twice is refused once its second value is read, as the tree parser does. Returns false,
    /// the value parsed, when it is not an object.
    mutating func members<Key>(depth: Int, keys: KnownKeys<Key>,
                               _ member: (inout PayloadReader, Member<Key>) throws(Failure) -> Void) throws(Failure) -> Bool {
        guard try cursor.begin(depth: depth) == UInt8(ascii: "{") else { try skip(depth: depth); return false }
        cursor.index += 1
        cursor.skipWhitespace()
        if next == UInt8(ascii: "}") { cursor.index += 1; return true }
        var seen: UInt64 = 0
        var others = Set<String>()  // hashed: a hostile payload may hold many thousands of keys
        repeat {
            cursor.skipWhitespace()
            guard next == UInt8(ascii: "\"") else { throw Failure() }
            let key: Member<Int>
            if let plain = cursor.plainString() {
                if let i = keys.index(of: plain) { key = .known(i) } else {
                    guard let name = String(utf8: plain) else { throw Failure() }
                    key = .other(name)
                }
            } else {
                let name = try cursor.string()
                key = Array(name.utf8).withUnsafeBufferPointer { keys.index(of: $0) }.map { .known($0) } ?? .other(name)
            }
            cursor.skipWhitespace()
            guard next == UInt8(ascii: ":") else { throw Failure() }
            cursor.index += 1
            cursor.skipWhitespace()
            switch key {
            case .known(let i):
                try member(&self, .known(keys.cases[i]))
                guard seen & (1 << i) == 0 else { throw Failure("duplicate key \"\(keys.cases[i].rawValue)\" in an object") }
                seen |= 1 << i
            case .other(let name):
                try member(&self, .other(name))
                guard others.insert(name).inserted else { throw Failure("duplicate key \"\(name)\" in an object") }
            }
        } while try !separator(UInt8(ascii: "}"))
        return true
    }

    /// Reads a payload object at `depth`: `member` reads its fields in document order, `build`
    /// makes the payload from them in the payload's own order of checks, and the payload's rules
    /// run on it. Anything wrong with a field — or a value that is not an object — is the
    /// returned field error; only malformed JSON is thrown.
    mutating func payload<Key, Payload: BuiltInPayload>(
        depth: Int, keys: KnownKeys<Key>, path: @autoclosure () -> String,
        _ member: (inout PayloadReader, Member<Key>) throws(Failure) -> Void,
        build: () throws(FieldError) -> Payload
    ) throws(Failure) -> Result<Payload, FieldError> {
        guard try members(depth: depth, keys: keys, member) else { return .failure(FieldError(field: path(), reason: "must be an object")) }
        do throws(FieldError) {
            let payload = try build()
            try payload.validate(at: path())
            return .success(payload)
        } catch {
            return .failure(error)
        }
    }

    /// Reads an array at `depth`, each element by `element` (at `depth + 1`, with its index);
    /// the first element's error is kept, the rest still parsed.
    mutating func array<Element>(depth: Int, field: @autoclosure () -> String,
                                 _ element: (inout PayloadReader, Int) throws(Failure) -> Result<Element, FieldError>) throws(Failure) -> Found<[Element]> {
        switch try cursor.begin(depth: depth) {
        case UInt8(ascii: "["):
            cursor.index += 1
            var items: [Element] = []
            var firstError: FieldError?
            var index = 0
            cursor.skipWhitespace()
            if next == UInt8(ascii: "]") { cursor.index += 1; return .value(items) }
            repeat {
                cursor.skipWhitespace()
                switch try element(&self, index) {
                case .success(let item) where firstError == nil: items.append(item)
                case .success: break
                case .failure(let error): if firstError == nil { firstError = error }
                }
                index += 1
            } while try !separator(UInt8(ascii: "]"))
            return firstError.map { .invalid($0) } ?? .value(items)
        case UInt8(ascii: "n"):
            try cursor.expect("null")
            return .null
        default:
            try skip(depth: depth)
            return .invalid(FieldError(field: field(), reason: "must be an array"))
        }
    }

    /// A string; anything else is parsed and refused with "must be a string".
    mutating func string(depth: Int, field: @autoclosure () -> String) throws(Failure) -> Found<String> {
        switch try cursor.begin(depth: depth) {
        case UInt8(ascii: "\""): return .value(try cursor.string())
        case UInt8(ascii: "n"): try cursor.expect("null"); return .null
        default:
            try skip(depth: depth)
            return .invalid(FieldError(field: field(), reason: "must be a string"))
        }
    }

    /// A string naming one of `T`'s cases.
    mutating func choice<T: RawRepresentable<String>>(_ type: T.Type, depth: Int, field: @autoclosure () -> String) throws(Failure) -> Found<T> {
        switch try string(depth: depth, field: field()) {
        case .absent: return .absent
        case .null: return .null
        case .invalid(let error): return .invalid(error)
        case .value(let text):
            guard let value = T(rawValue: text) else { return .invalid(FieldError(field: field(), reason: "not one of the allowed values")) }
            return .value(value)
        }
    }

    /// An ISO 8601 date in a string, parsed from the bytes where they lie.
    mutating func date(depth: Int, field: @autoclosure () -> String) throws(Failure) -> Found<Timestamp> {
        guard try cursor.begin(depth: depth) == UInt8(ascii: "\"") else {
            switch try string(depth: depth, field: field()) {
            case .null: return .null
            case .absent, .value, .invalid: return .invalid(FieldError(field: field(), reason: "must be a string"))
            }
        }
        let text: String
        if let plain = cursor.plainString() {
            if let date = Timestamp(iso8601UTF8: plain) { return .value(date) }
            guard let string = String(utf8: plain) else { throw Failure() }
            text = string
        } else {
            text = try cursor.string()
        }
        guard let date = Timestamp(iso8601: text) else { return .invalid(FieldError(field: field(), reason: "not an ISO 8601 date: \"\(text)\"")) }
        return .value(date)
    }

    /// `true` or `false`.
    mutating func bool(depth: Int, field: @autoclosure () -> String) throws(Failure) -> Found<Bool> {
        switch try cursor.begin(depth: depth) {
        case UInt8(ascii: "t"): try cursor.expect("true"); return .value(true)
        case UInt8(ascii: "f"): try cursor.expect("false"); return .value(false)
        case UInt8(ascii: "n"): try cursor.expect("null"); return .null
        default:
            try skip(depth: depth)
            return .invalid(FieldError(field: field(), reason: "must be true or false"))
        }
    }

    /// An integer; a number with no fractional part (up to 2^53) is accepted.
    mutating func integer(depth: Int, field: @autoclosure () -> String) throws(Failure) -> Found<Int64> {
        if try cursor.begin(depth: depth) == UInt8(ascii: "n") { try cursor.expect("null"); return .null }
        switch try cursor.value(depth: depth) {
        case .integer(let i): return .value(i)
        case .number(let d) where d.rounded() == d && abs(d) <= 9_007_199_254_740_992: return .value(Int64(d))
        default: return .invalid(FieldError(field: field(), reason: "must be an integer"))
        }
    }

    /// A nested payload object read by `read` (null: ``Found/null``).
    mutating func object<T>(depth: Int, _ read: (inout PayloadReader) throws(Failure) -> Result<T, FieldError>) throws(Failure) -> Found<T> {
        if try cursor.begin(depth: depth) == UInt8(ascii: "n") { try cursor.expect("null"); return .null }
        switch try read(&self) {
        case .success(let value): return .value(value)
        case .failure(let error): return .invalid(error)
        }
    }

    /// Any JSON value, as the tree parser builds it (null counts as absent).
    mutating func value(depth: Int) throws(Failure) -> Found<JSONValue> {
        switch try cursor.value(depth: depth) {
        case .null: .null
        case let value: .value(value)
        }
    }

    /// An array of strings.
    mutating func strings(depth: Int, field: @autoclosure () -> String) throws(Failure) -> Found<[String]> {
        try array(depth: depth, field: field()) { (r: inout PayloadReader, i: Int) throws(Failure) -> Result<String, FieldError> in
            switch try r.string(depth: depth + 1, field: "") {
            case .value(let s): .success(s)
            case .absent, .null, .invalid: .failure(FieldError(field: field() + "[\(i)]", reason: "must be a string"))
            }
        }
    }

    /// An object whose values are all strings.
    mutating func stringMap(depth: Int, field: @autoclosure () -> String) throws(Failure) -> Found<[String: String]> {
        if try cursor.begin(depth: depth) == UInt8(ascii: "n") { try cursor.expect("null"); return .null }
        var map: [String: String] = [:]
        var allStrings = true
        let isObject = try members(depth: depth, keys: KnownKeys<NoKeys>()) { (r: inout PayloadReader, member: Member<NoKeys>) throws(Failure) in
            guard case .other(let name) = member, case .value(let s) = try r.string(depth: depth + 1, field: "") else { allStrings = false; return }
            map[name] = s
        }
        guard isObject, allStrings else { return .invalid(FieldError(field: field(), reason: "must be an object of strings")) }
        return .value(map)
    }
}

/// The keys of a map: none known, every member is `.other`.
struct NoKeys: CaseIterable, RawRepresentable, Sendable {
    let rawValue: String
    init?(rawValue: String) { nil }
    static var allCases: [NoKeys] { [] }
}
