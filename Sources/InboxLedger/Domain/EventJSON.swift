#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JSON form of an event, one per line: `{"type": "<name>", "data": <any JSON>, "key": "<optional>"}`.
///
/// `data` is stored as canonical JSON (object keys sorted by their UTF-8 bytes, no insignificant
/// whitespace, integers without a fraction), so the same content always gives the same payload
/// bytes and idempotent retries are recognised.
///
/// ```swift
/// let event = try EventJSON.parse(#"{"type":"badge.adjusted","data":{"delta":1},"key":"push-7"}"#)
/// ```
public enum EventJSON {
    /// Parses one JSON line into an event. `index` names the event in errors.
    public static func parse(_ line: some StringProtocol, index: Int = 0) throws(LedgerError) -> NewEvent {
        try parse(bytes: Array(line.utf8), index: index)
    }

    /// Parses one JSON document (UTF-8 bytes) into an event.
    public static func parse(_ data: Data, index: Int = 0) throws(LedgerError) -> NewEvent {
        try parse(bytes: Array(data), index: index)
    }

    static func parse(bytes: [UInt8], index: Int) throws(LedgerError) -> NewEvent {
        let document: JSONValue
        do { document = try JSONParser.parse(bytes) } catch {
            throw .invalidEvent(index: index, field: "json", reason: error.message)
        }
        guard case .object(let fields) = document else {
            throw .invalidEvent(index: index, field: "json", reason: "expected an object like {\"type\": …, \"data\": …}")
        }
        for name in fields.keys.sorted() where !["type", "data", "key"].contains(name) {
            throw .invalidEvent(index: index, field: name, reason: "unknown field (expected type, data, key)")
        }
        guard let typeValue = fields["type"] else { throw .invalidEvent(index: index, field: "type", reason: "missing") }
        guard case .string(let type) = typeValue else { throw .invalidEvent(index: index, field: "type", reason: "must be a string") }
        guard let data = fields["data"] else { throw .invalidEvent(index: index, field: "data", reason: "missing") }
        var key: String?
        switch fields["key"] {
        case nil, .null?: break
        case .string(let k)?: key = k
        default: throw .invalidEvent(index: index, field: "key", reason: "must be a string")
        }
        return NewEvent(type: type, payload: canonicalBytes(data), key: key)
    }

    /// The canonical form of a JSON document.
    static func canonicalize(_ bytes: [UInt8]) throws(LedgerError) -> [UInt8] {
        do { return canonicalBytes(try JSONParser.parse(bytes)) } catch {
            throw .invalidEvent(index: 0, field: "data", reason: error.message)
        }
    }

    /// Canonical JSON bytes of a ``JSONValue`` an app built (an upcaster's result): refused if a
    /// number anywhere in it has no JSON form, instead of being written as `null`.
    static func encodeCanonical(_ value: JSONValue) throws(LedgerError) -> [UInt8] {
        do { try checkEncodable(value, field: "data") } catch {
            throw .invalidEvent(index: 0, field: error.field, reason: error.reason)
        }
        return canonicalBytes(value)
    }

    /// Fails if `value` holds a number JSON cannot carry (NaN, ±infinity), which the parser
    /// never produces but a typed value can hold.
    static func checkEncodable(_ value: JSONValue, field: @autoclosure () -> String) throws(FieldError) {
        switch value {
        case .number(let d) where !d.isFinite: throw FieldError(field: field(), reason: "\(d) cannot be encoded as JSON")
        case .array(let items): for (i, item) in items.enumerated() { try checkEncodable(item, field: field() + "[\(i)]") }
        case .object(let fields): for (k, item) in fields { try checkEncodable(item, field: field() + "." + k) }
        case .null, .bool, .integer, .number, .string: break
        }
    }

    /// Writes `value` canonically. Non-finite numbers (which the parser never produces) are
    /// written as `null`.
    static func canonicalBytes(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(value, to: &out)
        return out
    }

    static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .integer(let i): out.append(contentsOf: String(i).utf8)
        case .number(let d): out.append(contentsOf: canonicalText(of: d).utf8)
        case .string(let s): writeString(s, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            out.append(UInt8(ascii: "{"))
            // Keys in UTF-8 byte order (not String's `<`, which compares canonically equivalent
            // spellings as equal).
            for (i, (key, item)) in fields.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                write(item, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// How a double is written: integral values below 2^53 as integers (2.0 and 2 are one
    /// number), others in Swift's shortest round-trip form; non-finite ones (which the parser
    /// never produces) as `null`.
    static func canonicalText(of d: Double) -> String {
        if !d.isFinite { return "null" }
        if d.rounded() == d, abs(d) < 9_007_199_254_740_992 { return String(Int64(d)) }
        return String(d)
    }

    /// A JSON string: `"` and `\` escaped, control characters as short escapes or `\u00XX`,
    /// everything else (including `/` and non-ASCII) as it is.
    static func writeString(_ s: String, to out: inout [UInt8]) {
        var s = s  // `withUTF8` needs a variable; a native string is not copied
        s.withUTF8 { writeString(utf8: $0, to: &out) }
    }

    /// As ``writeString(_:to:)``, for a string's UTF-8 bytes.
    static func writeString(utf8 bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: copy them whole (a scan of the contiguous bytes).
        if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
            return
        }
        let hex = Array("0123456789abcdef".utf8)
        for b in bytes {
            switch b {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x08: out += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x0C: out += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case ..<0x20: out += Array("\\u00".utf8) + [hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
