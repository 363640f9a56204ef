/// A small, strict JSON parser (RFC 8259) for validating event payloads without Foundation's
/// `JSONDecoder` (which costs ~16 µs per event on Linux). Bounded depth, never traps.
///
/// Stricter than RFC 8259 where silence would change data (I-JSON, RFC 7493): an object with
/// a duplicate key is rejected (which one would win is undefined), and so is a number that
/// the stored canonical form could not keep exactly — an integer outside the 64-bit signed
/// range, or a decimal that a double does not represent to the digit (`0.1` is kept,
/// `0.10000000000000000001` is not) — so that two payloads differing only in such digits
/// never canonicalise to the same bytes.
enum JSONParser {
    /// Why a document was rejected; `reason` is nil for plain syntax errors ("malformed JSON
    /// at byte 17": `offset` is where the parser stopped, from 0).
    struct Failure: Error {
        var reason: String?
        /// The byte of the document at which a syntax error was found (set by the entry points).
        var offset: Int?
        init(_ reason: String? = nil) { self.reason = reason }
        /// What to tell the sender.
        var message: String { reason ?? "malformed JSON" + (offset.map { " at byte \($0)" } ?? "") }

        /// This failure, located at `offset` unless it already was.
        func at(_ offset: Int) -> Failure {
            var located = self
            if located.offset == nil { located.offset = offset }
            return located
        }
    }

    static let maxDepth = 64

    static func parse(_ bytes: [UInt8]) throws(Failure) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer: UnsafeBufferPointer<UInt8>) throws(Failure) -> JSONValue in
            var parser = Cursor(bytes: buffer)
            do throws(Failure) {
                parser.skipWhitespace()
                let value = try parser.value(depth: 0)
                parser.skipWhitespace()
                guard parser.index == buffer.count else { throw Failure() }
                return value
            } catch {
                throw error.at(min(parser.index, buffer.count))
            }
        }
    }

    /// The tokenizer both the tree parser (`value(depth:)`) and the streaming
    /// ``PayloadReader`` read with: one set of syntax rules and messages.
    struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func skipWhitespace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        mutating func expect(_ literal: StaticString) throws(Failure) {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw Failure() }
            let start = literal.utf8Start
            for k in 0..<count where bytes[index + k] != start[k] { throw Failure() }
            index += count
        }

        /// Checks that a value may start here (depth limit, not at the end) and returns its
        /// first byte.
        func begin(depth: Int) throws(Failure) -> UInt8 {
            guard depth < JSONParser.maxDepth, index < bytes.count else { throw Failure() }
            return bytes[index]
        }

        mutating func value(depth: Int) throws(Failure) -> JSONValue {
            switch try begin(depth: depth) {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "n"): try expect("null"); return .null
            default: return try number()
            }
        }

        mutating func object(depth: Int) throws(Failure) -> JSONValue {
            index += 1
            var fields = [String: JSONValue](minimumCapacity: 8)  // an event's objects are small: no regrowth
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(fields) }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw Failure() }
                let key = try string()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw Failure() }
                index += 1
                skipWhitespace()
                guard fields.updateValue(try value(depth: depth + 1), forKey: key) == nil else {
                    throw Failure("duplicate key \"\(key)\" in an object")
                }
                skipWhitespace()
                guard index < bytes.count else { throw Failure() }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(fields) }
                throw Failure()
            }
        }

        mutating func array(depth: Int) throws(Failure) -> JSONValue {
            index += 1
            var items: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            while true {
                skipWhitespace()
                items.append(try value(depth: depth + 1))
                skipWhitespace()
                guard index < bytes.count else { throw Failure() }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                throw Failure()
            }
        }

        mutating func hex4() throws(Failure) -> UInt32 {
            guard index + 4 <= bytes.count else { throw Failure() }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[index]
                let d: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw Failure()
                }
                v = v << 4 | d
                index += 1
            }
            return v
        }

        /// At a string's opening quote: its bytes as they lie, when it has no escape and no
        /// control character (the index then stands after the closing quote); otherwise nil,
        /// and the index is unchanged (read it with ``string()``). The bytes are not yet checked
        /// to be UTF-8.
        mutating func plainString() -> UnsafeBufferPointer<UInt8>? {
            var end = index + 1
            while end < bytes.count {
                let c = bytes[end]
                if c == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: bytes[(index + 1)..<end])
                    index = end + 1
                    return slice
                }
                if c == UInt8(ascii: "\\") || c < 0x20 { return nil }
                end += 1
            }
            return nil
        }

        mutating func string() throws(Failure) -> String {
            if let plain = plainString() {  // no escapes: the bytes as they lie
                guard let s = String(utf8: plain) else { throw Failure() }
                return s
            }
            index += 1
            var out: [UInt8] = []
            out.reserveCapacity(64)
            while index < bytes.count {
                // The bytes up to the next quote, escape or control character, copied at once.
                let run = index
                while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                    index += 1
                }
                if index > run { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index])) }
                guard index < bytes.count else { break }
                let c = bytes[index]
                index += 1
                switch c {
                case UInt8(ascii: "\""):
                    guard let s = String(utf8: out) else { throw Failure() }
                    return s
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw Failure() }
                    let e = bytes[index]
                    index += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            try expect("\\u")
                            let low = try hex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw Failure() }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let u = Unicode.Scalar(scalar) else { throw Failure() }
                        out.append(contentsOf: Array(String(Character(u)).utf8))
                    default: throw Failure()
                    }
                default:
                    throw Failure()  // a control character: the run above stops at nothing else
                }
            }
            throw Failure()
        }

        mutating func number() throws(Failure) -> JSONValue {
            let start = index
            let isInteger = try numberSyntax()
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if isInteger {
                guard let i = Int64(text) else {
                    throw Failure("the integer \(text) does not fit in 64 bits and would not be stored exactly; send it as a string")
                }
                return .integer(i)
            }
            guard let d = Double(text), d.isFinite else {
                throw Failure("the number \(text) is out of range for a double; send it as a string")
            }
            guard ExactDecimal(text) == ExactDecimal(EventJSON.canonicalText(of: d)) else {
                throw Failure("the number \(text) would not be stored exactly (a double keeps about 17 significant digits); send it as a string")
            }
            return .number(d)
        }

        /// Reads the syntax of a number (RFC 8259: `-`, digits without a leading zero, an
        /// optional fraction and exponent) and returns whether it is an integer — no fraction,
        /// no exponent. The index then stands after it; its value is the caller's to convert.
        mutating func numberSyntax() throws(Failure) -> Bool {
            var isInteger = true
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { throw Failure() }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                isInteger = false
                index += 1
                let digits = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                guard index > digits else { throw Failure() }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                isInteger = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                let digits = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                guard index > digits else { throw Failure() }
            }
            return isInteger
        }
    }
}

/// The exact value of a JSON number literal as sign, significant digits and a power of ten,
/// so two spellings compare equal exactly when they denote the same number (`1.50` = `15e-1`).
struct ExactDecimal: Equatable {
    var negative = false
    var digits: [UInt8] = []  // no leading or trailing zeros; empty for zero
    var exponent = 0

    init(_ text: String) {
        var bytes = Array(text.utf8)[...]
        if bytes.first == UInt8(ascii: "-") { negative = true; bytes = bytes.dropFirst() }
        var fractionDigits = 0
        var seenPoint = false
        while let c = bytes.first, c != UInt8(ascii: "e"), c != UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if c == UInt8(ascii: ".") { seenPoint = true; continue }
            digits.append(c)
            if seenPoint { fractionDigits += 1 }
        }
        var written = 0
        if !bytes.isEmpty {
            bytes = bytes.dropFirst()
            var sign = 1
            if bytes.first == UInt8(ascii: "-") { sign = -1; bytes = bytes.dropFirst() }
            else if bytes.first == UInt8(ascii: "+") { bytes = bytes.dropFirst() }
            for c in bytes { written = min(written * 10 + Int(c - UInt8(ascii: "0")), 1 << 40) }
            written *= sign
        }
        while digits.first == UInt8(ascii: "0") { digits.removeFirst() }
        exponent = written - fractionDigits
        while digits.last == UInt8(ascii: "0") { digits.removeLast(); exponent += 1 }
        if digits.isEmpty { negative = false; exponent = 0 }
    }
}
