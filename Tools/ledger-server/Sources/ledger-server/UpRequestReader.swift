import InboxLedger
import InboxLedgerSync
import NIOCore

/// The body of `POST /v1/up` read straight from its bytes: the server's hot path. Foundation's
/// `JSONDecoder` took about a quarter of the server's CPU in the ingest benchmark (docs/sync.md,
/// "Performance"); this reads the shape `SyncWire.UpRequest` has and nothing else.
///
/// It is a **fast path, never a second opinion**: it answers a request only when the body is
/// exactly what it expects — the fields of `UpRequest` and `UpEvent` once each, strings valid
/// UTF-8 (escapes and surrogate pairs included), integers as plain digits within their type,
/// `null` only for the optional fields, nothing after the object — and nil for anything else:
/// an unknown or repeated field, an exponent or a fraction, a leading zero, a lone surrogate,
/// malformed JSON. The caller then decodes with `JSONDecoder` as before, which answers the
/// same value or the precise 400. So what it accepts, `JSONDecoder` accepts with the same value
/// (`UpRequestReaderTests` checks it on generated and mutated bodies).
struct UpRequestReader {
    /// `buffer`'s request, or nil: decode it with `JSONDecoder`.
    static func read(_ buffer: ByteBuffer) -> SyncWire.UpRequest? {
        buffer.withUnsafeReadableBytes { bytes in
            var reader = UpRequestReader(bytes: bytes)
            return reader.request()
        }
    }

    private let bytes: UnsafeRawBufferPointer
    private var at = 0

    private init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    // MARK: - The shapes

    private mutating func request() -> SyncWire.UpRequest? {
        var ledger: String?, after: UInt64?, through: UInt64?, events: [SyncWire.UpEvent]?
        var lostThrough: UInt64??, refused: [UInt64]??
        let complete = object { reader, key in
            switch key {
            case "ledger" where ledger == nil:
                ledger = reader.string()
                return ledger != nil
            case "after" where after == nil:
                after = reader.unsigned()
                return after != nil
            case "through" where through == nil:
                through = reader.unsigned()
                return through != nil
            case "events" where events == nil:
                events = reader.array { $0.event() }
                return events != nil
            case "lostThrough" where lostThrough == nil:
                lostThrough = reader.optional { $0.unsigned() }
                return lostThrough != nil
            case "refused" where refused == nil:
                refused = reader.optional { $0.array { $0.unsigned() } }
                return refused != nil
            default:
                return false
            }
        }
        guard complete, let ledger, let after, let through, let events else { return nil }
        skipWhitespace()
        guard at == bytes.count else { return nil }
        return SyncWire.UpRequest(ledger: ledger, after: after, through: through, events: events,
                                  lostThrough: lostThrough ?? nil, refused: refused ?? nil)
    }

    private mutating func event() -> SyncWire.UpEvent? {
        var seq: UInt64?, type: String?, time: Int64?
        var key: String??, payload: String??, payloadBase64: String??, role: String??
        let complete = object { reader, name in
            switch name {
            case "seq" where seq == nil:
                seq = reader.unsigned()
                return seq != nil
            case "type" where type == nil:
                type = reader.string()
                return type != nil
            case "time" where time == nil:
                time = reader.signed()
                return time != nil
            case "key" where key == nil:
                key = reader.optional { $0.string() }
                return key != nil
            case "payload" where payload == nil:
                payload = reader.optional { $0.string() }
                return payload != nil
            case "payloadBase64" where payloadBase64 == nil:
                payloadBase64 = reader.optional { $0.string() }
                return payloadBase64 != nil
            case "role" where role == nil:
                role = reader.optional { $0.string() }
                return role != nil
            default:
                return false
            }
        }
        guard complete, let seq, let type, let time else { return nil }
        return SyncWire.UpEvent(seq: seq, type: type, key: key ?? nil, time: time, payload: payload ?? nil,
                                payloadBase64: payloadBase64 ?? nil, role: role ?? nil)
    }

    // MARK: - JSON

    /// `{ "name": value, … }`: `member` reads each value (its `name` a plain string) and says
    /// whether it could (false: a name not expected, or again, or a value not readable), which
    /// ends the read.
    private mutating func object(_ member: (inout UpRequestReader, String) -> Bool) -> Bool {
        guard take(UInt8(ascii: "{")) else { return false }
        if take(UInt8(ascii: "}")) { return true }
        repeat {
            skipWhitespace()
            guard let name = plainString(), take(UInt8(ascii: ":")) else { return false }
            skipWhitespace()
            guard member(&self, name) else { return false }
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "}"))
    }

    /// `[ value, … ]`, each read by `element`; nil if one cannot be read.
    private mutating func array<T>(_ element: (inout UpRequestReader) -> T?) -> [T]? {
        guard take(UInt8(ascii: "[")) else { return nil }
        var values: [T] = []
        if take(UInt8(ascii: "]")) { return values }
        repeat {
            skipWhitespace()
            guard let value = element(&self) else { return nil }
            values.append(value)
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "]")) ? values : nil
    }

    /// `null` (`.some(nil)`: present and null, as `decodeIfPresent` reads it), or a value
    /// `value` reads; nil when neither.
    private mutating func optional<T>(_ value: (inout UpRequestReader) -> T?) -> T?? {
        if bytes.count - at >= 4, bytes[at] == UInt8(ascii: "n"), bytes[at + 1] == UInt8(ascii: "u"),
           bytes[at + 2] == UInt8(ascii: "l"), bytes[at + 3] == UInt8(ascii: "l") {
            at += 4
            return .some(nil)
        }
        return value(&self).map { .some($0) }
    }

    /// A member name: printable ASCII without escapes (every name of the shapes is).
    private mutating func plainString() -> String? {
        guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { return nil }
        let start = at + 1
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
            guard bytes[end] >= 0x20, bytes[end] < 0x7f, bytes[end] != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        guard end < bytes.count else { return nil }
        at = end + 1
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }

    /// A string value: valid UTF-8, escapes decoded (a surrogate pair as its scalar); nil for a
    /// control character, an unknown escape, a lone surrogate or bytes that are not UTF-8.
    private mutating func string() -> String? {
        guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { return nil }
        let start = at + 1
        var end = start
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") {
                at = end + 1
                return String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { return nil }
            end += 1
        }
        // Escapes: decoded into a copy from the first one on.
        var decoded = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
        at = end
        while at < bytes.count {
            let byte = bytes[at]
            at += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: decoded, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard at < bytes.count else { return nil }
                let escape = bytes[at]
                at += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0c)
                case UInt8(ascii: "n"): decoded.append(0x0a)
                case UInt8(ascii: "r"): decoded.append(0x0d)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    guard let unit = hex4() else { return nil }
                    var value = UInt32(unit)
                    if (0xd800..<0xdc00).contains(unit) {
                        // A high surrogate: its low one must follow at once.
                        guard take(UInt8(ascii: "\\"), skippingWhitespace: false), take(UInt8(ascii: "u"), skippingWhitespace: false),
                              let low = hex4(), (0xdc00..<0xe000).contains(low) else { return nil }
                        value = 0x10000 + ((UInt32(unit) - 0xd800) << 10) + (UInt32(low) - 0xdc00)
                    } else if (0xdc00..<0xe000).contains(unit) {
                        return nil
                    }
                    guard let scalar = Unicode.Scalar(value) else { return nil }
                    decoded.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    return nil
                }
            case 0..<0x20:
                return nil
            default:
                decoded.append(byte)
            }
        }
        return nil
    }

    /// Four hex digits of a `\u` escape.
    private mutating func hex4() -> UInt16? {
        guard bytes.count - at >= 4 else { return nil }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[at]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt16(digit)
            at += 1
        }
        return value
    }

    /// Plain decimal digits, no sign, no leading zero, within `UInt64`, followed by a delimiter.
    private mutating func unsigned() -> UInt64? {
        let start = at
        var value: UInt64 = 0
        while at < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[at]) {
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(bytes[at] - UInt8(ascii: "0")))
            guard !o1, !o2 else { return nil }
            value = sum
            at += 1
        }
        let digits = at - start
        guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0"), endsNumber() else { return nil }
        return value
    }

    /// An `Int64`: `unsigned()` with an optional minus sign (not `-0`).
    private mutating func signed() -> Int64? {
        let negative = at < bytes.count && bytes[at] == UInt8(ascii: "-")
        if negative { at += 1 }
        guard let magnitude = unsigned() else { return nil }
        if negative {
            guard magnitude > 0, magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// Whether the number just read ends where a value may: a delimiter, white space or the end
    /// (not `.`, `e`, another digit …).
    private func endsNumber() -> Bool {
        guard at < bytes.count else { return true }
        switch bytes[at] {
        case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0a, 0x0d: return true
        default: return false
        }
    }

    /// Skips white space, then takes `byte` if it is next.
    private mutating func take(_ byte: UInt8, skippingWhitespace: Bool = true) -> Bool {
        if skippingWhitespace { skipWhitespace() }
        guard at < bytes.count, bytes[at] == byte else { return false }
        at += 1
        return true
    }

    private mutating func skipWhitespace() {
        while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0a || bytes[at] == 0x0d || bytes[at] == 0x09 { at += 1 }
    }
}

extension SyncWire.UpEvent {
    /// An event as the wire carries it, field by field (``UpRequestReader``).
    init(seq: UInt64, type: String, key: String?, time: Int64, payload: String?, payloadBase64: String?, role: String?) {
        self.init(Event(sequence: seq, timestampMicros: time, origin: Origin(role: role ?? "", pid: 0), type: type, key: key, payload: []))
        self.payload = payload
        self.payloadBase64 = payloadBase64
        self.role = role
    }
}
