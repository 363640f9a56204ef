#if canImport(FoundationEssentials)
import FoundationEssentials
#elseif canImport(Foundation)
import Foundation
#endif

/// Decodes `Decodable` values from JSON bytes: the ledger's replacement for Foundation's
/// `JSONDecoder` on its hot paths (an app's events, its projections' rows and documents), with
/// `JSONDecoder`'s default strategies and results.
///
/// The document is parsed once into a ``JSONTape`` by the ledger's strict tokenizer; values are
/// converted when a type asks for them. What it does as `JSONDecoder` does: integers of every
/// width with range checks (`1.0` and `1e2` are the integer they denote; `1.5` or `300` for an
/// `Int8` are not representable), `Double`/`Float` correctly rounded (overflow refused), `Date`
/// as seconds since 2001 (`deferredToDate`), `Data` from base64, `URL` from a string, `Decimal`
/// from a number; a missing key or `null` is nil for an optional; the first of repeated keys is
/// the one read. Errors are `DecodingError`s with the coding path of the value.
///
/// Where it differs, on input that is not valid or not what `JSONEncoder` writes: malformed
/// JSON is `dataCorrupted` wherever it is, including what `JSONDecoder` tolerates (a trailing
/// comma) or finds only when it reads the value (a malformed number, `01`: `JSONDecoder` may
/// report another error first, or none when the value is never read); a number a type cannot
/// hold is `dataCorrupted` at the value's own path (`JSONDecoder` says "not valid JSON" at the
/// root); `0e5` is zero (`JSONDecoder` refuses a zero with a short exponent); JSON in UTF-16 or
/// UTF-32 is not read (the ledger stores UTF-8; a UTF-8 byte order mark is skipped).
enum LedgerJSONDecoder {
    /// Decodes a `T` from the JSON document `bytes`.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try decode(type, from: bytes[...])
    }

    /// Decodes a `T` from the JSON document `bytes`.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: ArraySlice<UInt8>) throws -> T {
        let tape: JSONTape
        // A byte order mark is read past, as JSONDecoder does.
        let hasMark = bytes.count >= 3 && bytes[bytes.startIndex] == 0xEF && bytes[bytes.startIndex + 1] == 0xBB && bytes[bytes.startIndex + 2] == 0xBF
        do { tape = try JSONTape.parse(hasMark ? bytes.dropFirst(3) : bytes) } catch {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: [], debugDescription: "The given data was not valid JSON: \(error.message).", underlyingError: error))
        }
        return try JSONTapeDecoder(tape: tape).unwrap(T.self, node: 0, parent: nil, key: .none)
    }
}

// MARK: - Coding paths

/// The last component of a coding path: a key, an array index, or none (the root).
enum PathKey {
    case none
    case key(any CodingKey)
    case index(Int)

    var codingKey: (any CodingKey)? {
        switch self {
        case .none: nil
        case .key(let key): key
        case .index(let index): IndexKey(index)
        }
    }
}

/// An array element's key, as `JSONDecoder`'s (`Index 2`, int value 2).
struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

/// A key given by its text (`super`, or a stored key read back).
struct NamedKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// A coding path as a list from the value up to the root, shared by everything below it: a
/// container makes one node, a value decoded through it none unless it makes a container of
/// its own.
final class CodingPathNode {
    let parent: CodingPathNode?
    let key: PathKey

    private init(parent: CodingPathNode?, key: PathKey) {
        self.parent = parent
        self.key = key
    }

    /// The path `parent` then `key` (`parent` itself when there is no key).
    static func make(_ parent: CodingPathNode?, _ key: PathKey) -> CodingPathNode? {
        if case .none = key { return parent }
        return CodingPathNode(parent: parent, key: key)
    }

    /// The keys of `node` then `key`, from the root.
    static func path(_ node: CodingPathNode?, _ key: PathKey) -> [any CodingKey] {
        var keys: [any CodingKey] = []
        if let last = key.codingKey { keys.append(last) }
        var node = node
        while let current = node {
            if let key = current.key.codingKey { keys.append(key) }
            node = current.parent
        }
        return keys.reversed()
    }
}

// MARK: - The decoder

/// The `Decoder` of a ``JSONTape``: one object for a whole decode, pointed at each value in turn
/// (as `JSONDecoder`'s is); containers remember their own value and path.
final class JSONTapeDecoder: Decoder, SingleValueDecodingContainer {
    let tape: JSONTape
    /// The decoder whose tape this is (a `superDecoder`'s root), nil when it is this one's own.
    private let owner: JSONTapeDecoder?
    /// The value being decoded, its parent's path and its own key. (Unchecked exclusivity: one
    /// decode runs on one thread, and nothing holds these across a call.)
    @exclusivity(unchecked) private(set) var node = 0
    @exclusivity(unchecked) private var parent: CodingPathNode?
    @exclusivity(unchecked) private var key: PathKey = .none

    /// The decoder of a tape it owns (and frees).
    init(tape: JSONTape) {
        self.tape = tape
        owner = nil
    }

    /// A decoder of `root`'s tape, pointed at `node` for as long as it is kept (a `superDecoder`).
    init(sharing root: JSONTapeDecoder, node: Int, parent: CodingPathNode?, key: PathKey) {
        tape = root.tape
        owner = root.owner ?? root
        self.node = node
        self.parent = parent
        self.key = key
    }

    deinit { if owner == nil { tape.deallocate() } }

    var codingPath: [any CodingKey] { CodingPathNode.path(parent, key) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// A `DecodingError` for `problem` with the value at `parent` then `key`.
    static func error(_ problem: JSONTape.Problem, _ type: Any.Type, _ parent: CodingPathNode?, _ key: PathKey) -> DecodingError {
        let path = CodingPathNode.path(parent, key)
        switch problem {
        case .mismatch(let found):
            return .typeMismatch(type, .init(codingPath: path, debugDescription: "Expected to decode \(type) but found \(found.found) instead."))
        case .null:
            return .valueNotFound(type, .init(codingPath: path, debugDescription: "Cannot get value of type \(type) -- found null value instead"))
        case .notRepresentable(let text):
            return .dataCorrupted(.init(codingPath: path, debugDescription: "Parsed JSON number <\(text)> does not fit in \(type)."))
        case .corrupted(let reason):
            return .dataCorrupted(.init(codingPath: path, debugDescription: reason))
        }
    }

    /// Decodes the value at `node` (path: `parent` then `key`) as a `T`: the types `JSONDecoder`
    /// treats apart as it does, any other by its `init(from:)` with this decoder pointed at it.
    func unwrap<T: Decodable>(_ type: T.Type, node: Int, parent: CodingPathNode?, key: PathKey) throws -> T {
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self,
           let value = try special(type, node: node, parent: parent, key: key) as? T {
            return value
        }
        let saved = (self.node, self.parent, self.key)
        self.node = node
        self.parent = parent
        self.key = key
        defer { (self.node, self.parent, self.key) = saved }
        return try T(from: self)
    }

    /// A `Date`, `Data`, `URL` or `Decimal` (`JSONDecoder`'s default strategies).
    private func special<T>(_ type: T.Type, node: Int, parent: CodingPathNode?, key: PathKey) throws -> Any {
        if tape.kind(node) == .null { throw Self.error(.null, type, parent, key) }
        if T.self == Date.self {
            do throws(JSONTape.Problem) {
                return Date(timeIntervalSinceReferenceDate: try tape.floatingPoint(node, as: Double.self))
            } catch {
                throw Self.error(error, Double.self, parent, key)  // what Date(from:) asks for
            }
        }
        if T.self == Decimal.self {
            let number = tape.nodes[node]
            guard number.kind == .number else { throw Self.error(.mismatch(number.kind), type, parent, key) }
            let text = tape.text(number)
            guard let decimal = Decimal(string: text) else { throw Self.error(.notRepresentable(text), type, parent, key) }
            return decimal
        }
        let string: String
        do throws(JSONTape.Problem) { string = try tape.string(node) } catch { throw Self.error(error, String.self, parent, key) }
        if T.self == URL.self {
            guard let url = URL(string: string) else { throw Self.error(.corrupted("Invalid URL string."), type, parent, key) }
            return url
        }
        guard let data = Data(base64Encoded: string) else { throw Self.error(.corrupted("Encountered Data is not valid Base64."), type, parent, key) }
        return data
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try KeyedDecodingContainer(JSONKeyedDecodingContainer<Key>(decoder: self, object: node, path: CodingPathNode.make(parent, key)))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try JSONUnkeyedDecodingContainer(decoder: self, array: node, path: CodingPathNode.make(parent, key))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: SingleValueDecodingContainer

    private func value<T>(_ type: T.Type, _ read: (JSONTape, Int) throws(JSONTape.Problem) -> T) throws -> T {
        do throws(JSONTape.Problem) { return try read(tape, node) } catch { throw Self.error(error, type, parent, key) }
    }

    func decodeNil() -> Bool { tape.kind(node) == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try value(type) { (t, n) throws(JSONTape.Problem) in try t.bool(n) } }
    func decode(_ type: String.Type) throws -> String { try value(type) { (t, n) throws(JSONTape.Problem) in try t.string(n) } }
    func decode(_ type: Double.Type) throws -> Double { try value(type) { (t, n) throws(JSONTape.Problem) in try t.floatingPoint(n, as: type) } }
    func decode(_ type: Float.Type) throws -> Float { try value(type) { (t, n) throws(JSONTape.Problem) in try t.floatingPoint(n, as: type) } }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: Int128.Type) throws -> Int128 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
    func decode(_ type: UInt128.Type) throws -> UInt128 { try integer(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try unwrap(type, node: node, parent: parent, key: key) }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try value(type) { (t, n) throws(JSONTape.Problem) in try t.integer(n, as: type) }
    }
}

// MARK: - Keyed

/// An object's members by key, found as `JSONDecoder` finds them: by Swift string equality (a
/// key written `e\u0301` is the key `é`), the first of keys given twice. An object of up to 16
/// members with ASCII keys (almost every one) is searched in place, comparing key bytes; any
/// other is indexed once, by its keys as strings.
struct JSONKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: JSONTapeDecoder
    let object: Int
    let path: CodingPathNode?
    /// The value node of each key (the first of equal ones), for the objects not searched in place.
    let index: [String: Int]?

    init(decoder: JSONTapeDecoder, object: Int, path: CodingPathNode?) throws {
        let tape = decoder.tape
        let node = tape.nodes[object]
        guard node.kind == .object else {
            if node.kind == .null {
                throw DecodingError.valueNotFound([String: Any].self, .init(codingPath: CodingPathNode.path(path, .none),
                                                                            debugDescription: "Cannot get keyed decoding container -- found null value instead"))
            }
            throw DecodingError.typeMismatch([String: Any].self, .init(codingPath: CodingPathNode.path(path, .none),
                                                                       debugDescription: "Expected to decode \([String: Any].self) but found \(node.kind.found) instead."))
        }
        self.decoder = decoder
        self.object = object
        self.path = path
        var asciiKeys = node.length <= 16
        var member = object + 1
        for _ in 0..<node.length where asciiKeys {
            asciiKeys = tape.isASCII(member)
            member = Int(tape.nodes[member + 1].next)
        }
        if !asciiKeys {
            var index: [String: Int] = [:]
            index.reserveCapacity(Int(node.length))
            var member = object + 1
            for _ in 0..<node.length {
                do throws(JSONTape.Problem) {
                    let name = try tape.string(member)
                    if index[name] == nil { index[name] = member + 1 }
                } catch {
                    throw JSONTapeDecoder.error(error, String.self, path, .none)
                }
                member = Int(tape.nodes[member + 1].next)
            }
            self.index = index
        } else {
            self.index = nil
        }
    }

    var codingPath: [any CodingKey] { CodingPathNode.path(path, .none) }

    var allKeys: [Key] {
        let tape = decoder.tape
        var keys: [Key] = []
        var seen: [String] = []
        var member = object + 1
        for _ in 0..<tape.nodes[object].length {
            // A key that is not UTF-8 names no member a Key can name.
            if let name = try? tape.string(member), let key = Key(stringValue: name) {
                if index.map({ $0[name] == member + 1 }) ?? !seen.contains(name) {
                    keys.append(key)
                    if index == nil { seen.append(name) }
                }
            }
            member = Int(tape.nodes[member + 1].next)
        }
        return keys
    }

    /// The value node of `key`, nil when the object has no such member.
    func find(_ key: Key) -> Int? { find(name: key.stringValue) }

    /// The value node of the key `name`.
    private func find(name: String) -> Int? {
        if let index { return index[name] }
        let tape = decoder.tape
        var name = name
        let (found, ascii) = name.withUTF8 { name -> (Int?, Bool) in
            var member = object + 1
            for _ in 0..<tape.nodes[object].length {
                if tape.string(member, equals: name) { return (member + 1, true) }
                member = Int(tape.nodes[member + 1].next)
            }
            return (nil, !name.contains(where: { $0 >= 0x80 }))
        }
        guard found == nil, !ascii else { return found }
        // A name beyond ASCII may equal an ASCII key as a string (the Kelvin sign is K).
        var member = object + 1
        for _ in 0..<tape.nodes[object].length {
            // A key that is not UTF-8 equals no name.
            if let text = try? tape.string(member), text == name { return member + 1 }
            member = Int(tape.nodes[member + 1].next)
        }
        return nil
    }

    private func value(_ key: Key) throws -> Int {
        guard let node = find(key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."))
        }
        return node
    }

    private func failure(_ problem: JSONTape.Problem, _ type: Any.Type, _ key: Key) -> DecodingError {
        JSONTapeDecoder.error(problem, type, path, .key(key))
    }

    func contains(_ key: Key) -> Bool { find(key) != nil }
    func decodeNil(forKey key: Key) throws -> Bool { decoder.tape.kind(try value(key)) == .null }

    // Each type's own method: the tape's conversion is called with a concrete type (and so
    // specialized), not through a helper generic over `Key` as well (which would not be).
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.bool(node) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.bool(node) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.string(node) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.string(node) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.floatingPoint(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.floatingPoint(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.floatingPoint(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.floatingPoint(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: Int128.Type, forKey key: Key) throws -> Int128? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 {
        let node = try value(key)
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decodeIfPresent(_ type: UInt128.Type, forKey key: Key) throws -> UInt128? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        do throws(JSONTape.Problem) { return try decoder.tape.integer(node, as: type) } catch { throw failure(error, type, key) }
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.unwrap(type, node: try value(key), parent: path, key: .key(key))
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let node = find(key), decoder.tape.kind(node) != .null else { return nil }
        return try decoder.unwrap(type, node: node, parent: path, key: .key(key))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try KeyedDecodingContainer(JSONKeyedDecodingContainer<NestedKey>(decoder: decoder, object: try value(key), path: CodingPathNode.make(path, .key(key))))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try JSONUnkeyedDecodingContainer(decoder: decoder, array: try value(key), path: CodingPathNode.make(path, .key(key)))
    }

    func superDecoder() throws -> any Decoder { subDecoder(NamedKey("super"), find: { find(name: "super") }) }
    func superDecoder(forKey key: Key) throws -> any Decoder { subDecoder(key, find: { find(key) }) }

    /// A decoder of its own for the member `key` (a missing one reads as null, as in `JSONDecoder`).
    private func subDecoder(_ key: any CodingKey, find: () -> Int?) -> any Decoder {
        JSONTapeDecoder(sharing: decoder, node: find() ?? decoder.tape.nullNode, parent: path, key: .key(key))
    }
}

// MARK: - Unkeyed

/// An array's elements in turn.
struct JSONUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let decoder: JSONTapeDecoder
    let path: CodingPathNode?
    let count: Int?
    private let elements: Int
    var currentIndex = 0
    /// The node of element `currentIndex`.
    private var position: Int

    init(decoder: JSONTapeDecoder, array: Int, path: CodingPathNode?) throws {
        let node = decoder.tape.nodes[array]
        guard node.kind == .array else {
            if node.kind == .null {
                throw DecodingError.valueNotFound([Any].self, .init(codingPath: CodingPathNode.path(path, .none),
                                                                    debugDescription: "Cannot get unkeyed decoding container -- found null value instead"))
            }
            throw DecodingError.typeMismatch([Any].self, .init(codingPath: CodingPathNode.path(path, .none),
                                                               debugDescription: "Expected to decode \([Any].self) but found \(node.kind.found) instead."))
        }
        self.decoder = decoder
        self.path = path
        self.elements = Int(node.length)
        self.count = elements
        self.position = array + 1
    }

    var codingPath: [any CodingKey] { CodingPathNode.path(path, .none) }
    var isAtEnd: Bool { currentIndex >= elements }

    /// The current element's node; at the end, `valueNotFound` (`message` says what was asked).
    private func current<T>(_ type: T.Type, _ message: String = "Unkeyed container is at end.") throws -> Int {
        guard currentIndex < elements else {
            throw DecodingError.valueNotFound(type, .init(codingPath: CodingPathNode.path(path, .index(currentIndex)), debugDescription: message))
        }
        return position
    }

    private mutating func advance() {
        if currentIndex < elements { position = Int(decoder.tape.nodes[position].next) }
        currentIndex += 1
    }

    private mutating func read<T>(_ type: T.Type, _ read: (JSONTape, Int) throws(JSONTape.Problem) -> T) throws -> T {
        let node = try current(type)
        let value: T
        do throws(JSONTape.Problem) { value = try read(decoder.tape, node) } catch {
            throw JSONTapeDecoder.error(error, type, path, .index(currentIndex))
        }
        advance()
        return value
    }

    /// As `JSONDecoder`: nil at the end or for null, and the index moves on either way.
    private mutating func readIfPresent<T>(_ type: T.Type, _ read: (JSONTape, Int) throws(JSONTape.Problem) -> T) throws -> T? {
        guard currentIndex < elements, decoder.tape.kind(position) != .null else {
            advance()
            return nil
        }
        return try self.read(type, read)
    }

    private mutating func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try read(type) { (t, n) throws(JSONTape.Problem) in try t.integer(n, as: type) }
    }

    private mutating func integerIfPresent<T: FixedWidthInteger>(_ type: T.Type) throws -> T? {
        try readIfPresent(type) { (t, n) throws(JSONTape.Problem) in try t.integer(n, as: type) }
    }

    /// True, moving on, when the current element is null; false, staying, otherwise.
    mutating func decodeNil() throws -> Bool {
        guard decoder.tape.kind(try current(Never.self)) == .null else { return false }
        advance()
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try read(type) { (t, n) throws(JSONTape.Problem) in try t.bool(n) } }
    mutating func decode(_ type: String.Type) throws -> String { try read(type) { (t, n) throws(JSONTape.Problem) in try t.string(n) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try read(type) { (t, n) throws(JSONTape.Problem) in try t.floatingPoint(n, as: type) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try read(type) { (t, n) throws(JSONTape.Problem) in try t.floatingPoint(n, as: type) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    mutating func decode(_ type: Int128.Type) throws -> Int128 { try integer(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
    mutating func decode(_ type: UInt128.Type) throws -> UInt128 { try integer(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let value = try decoder.unwrap(type, node: try current(type), parent: path, key: .index(currentIndex))
        advance()
        return value
    }

    mutating func decodeIfPresent(_ type: Bool.Type) throws -> Bool? { try readIfPresent(type) { (t, n) throws(JSONTape.Problem) in try t.bool(n) } }
    mutating func decodeIfPresent(_ type: String.Type) throws -> String? { try readIfPresent(type) { (t, n) throws(JSONTape.Problem) in try t.string(n) } }
    mutating func decodeIfPresent(_ type: Double.Type) throws -> Double? { try readIfPresent(type) { (t, n) throws(JSONTape.Problem) in try t.floatingPoint(n, as: type) } }
    mutating func decodeIfPresent(_ type: Float.Type) throws -> Float? { try readIfPresent(type) { (t, n) throws(JSONTape.Problem) in try t.floatingPoint(n, as: type) } }
    mutating func decodeIfPresent(_ type: Int.Type) throws -> Int? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: Int8.Type) throws -> Int8? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: Int16.Type) throws -> Int16? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: Int32.Type) throws -> Int32? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: Int64.Type) throws -> Int64? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: Int128.Type) throws -> Int128? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: UInt.Type) throws -> UInt? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: UInt8.Type) throws -> UInt8? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: UInt16.Type) throws -> UInt16? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: UInt32.Type) throws -> UInt32? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: UInt64.Type) throws -> UInt64? { try integerIfPresent(type) }
    mutating func decodeIfPresent(_ type: UInt128.Type) throws -> UInt128? { try integerIfPresent(type) }
    mutating func decodeIfPresent<T: Decodable>(_ type: T.Type) throws -> T? {
        guard currentIndex < elements, decoder.tape.kind(position) != .null else {
            advance()
            return nil
        }
        return try decode(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let node = try current(KeyedDecodingContainer<NestedKey>.self, "Cannot get nested keyed container -- unkeyed container is at end.")
        let container = try JSONKeyedDecodingContainer<NestedKey>(decoder: decoder, object: node, path: CodingPathNode.make(path, .index(currentIndex)))
        advance()
        return KeyedDecodingContainer(container)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let node = try current((any UnkeyedDecodingContainer).self, "Cannot get nested unkeyed container -- unkeyed container is at end.")
        let container = try JSONUnkeyedDecodingContainer(decoder: decoder, array: node, path: CodingPathNode.make(path, .index(currentIndex)))
        advance()
        return container
    }

    mutating func superDecoder() throws -> any Decoder {
        let node = try current((any Decoder).self, "Cannot get superDecoder() -- unkeyed container is at end.")
        let sub = JSONTapeDecoder(sharing: decoder, node: node, parent: path, key: .index(currentIndex))
        advance()
        return sub
    }
}
