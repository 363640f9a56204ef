#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Array where Element == UInt8 {
    /// Whether `other` holds the same bytes, in one `memcmp` (`==` on `[UInt8]` compares a byte
    /// at a time: ~150 ns for a 200-byte record against ~13 ns, and the caches compare records
    /// and rows at every warm read).
    func sameBytes(as other: [UInt8]) -> Bool {
        count == other.count && withUnsafeBytes { a in other.withUnsafeBytes { b in Self.compare(a, b, count) == 0 } }
    }

    /// Whether these bytes sort before `other`'s (memcmp order; a prefix first).
    func bytesPrecede(_ other: [UInt8]) -> Bool {
        let common = Swift.min(count, other.count)
        let order = withUnsafeBytes { a in other.withUnsafeBytes { b in Self.compare(a, b, common) } }
        return order != 0 ? order < 0 : count < other.count
    }

    private static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ count: Int) -> Int32 {
        guard count > 0, let x = a.baseAddress, let y = b.baseAddress else { return 0 }
        return memcmp(x, y, count)
    }
}

/// Appends fixed-width integers and byte strings to a buffer.
struct ByteWriter {
    var bytes: [UInt8]

    init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    mutating func u8(_ v: UInt8) { bytes.append(v) }

    mutating func u16le(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }

    mutating func u32le(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }

    mutating func u64le(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }

    mutating func u64be(_ v: UInt64) { withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) } }

    mutating func append(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }
}

/// Records made only of big-endian 64-bit fields (the consumer and idempotency-key records):
/// one encoder and one decoder for all of them.
enum U64Fields {
    static func encode(_ fields: UInt64...) -> [UInt8] {
        var w = ByteWriter(capacity: 8 * fields.count)
        for field in fields { w.u64be(field) }
        return w.bytes
    }

    /// Exactly `count` fields, or nil.
    static func decode(_ bytes: [UInt8], count: Int) -> [UInt64]? {
        guard bytes.count == 8 * count else { return nil }
        var r = ByteReader(bytes)
        return (0..<count).compactMap { _ in r.u64be() }
    }
}

/// Reads fixed-width integers and byte strings, never past the end: every read returns
/// `nil` instead of trapping on short or hostile input.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset: Int

    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }

    mutating func u8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16le() -> UInt16? { integer() }
    mutating func u32le() -> UInt32? { integer() }
    mutating func u64le() -> UInt64? { integer() }
    mutating func u64be() -> UInt64? { integer(bigEndian: true) }

    /// The next `MemoryLayout<T>.size` bytes as an integer of either byte order.
    private mutating func integer<T: FixedWidthInteger & UnsignedInteger>(bigEndian: Bool = false) -> T? {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { return nil }
        var v: T = 0
        for i in 0..<size {
            v |= T(bytes[offset + i]) << (8 * (bigEndian ? size - 1 - i : i))
        }
        offset += size
        return v
    }

    mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }
}

/// Sequence numbers as LMDB keys: 8 bytes, big-endian, so memcmp order is numeric order
/// (docs/lmdb.md rule 13).
enum SequenceKey {
    static func encode(_ sequence: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 8)
        w.u64be(sequence)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> UInt64? {
        guard bytes.count == 8 else { return nil }
        var r = ByteReader(bytes)
        return r.u64be()
    }
}

extension String {
    /// `bytes` as a string if they are valid UTF-8, otherwise nil.
    ///
    /// The hot-path replacement for `String(validating:as:)`, which is generic and looks up type
    /// metadata on every call (a quarter of the instructions of decoding an event, callgrind).
    init?(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        guard isValidUTF8(bytes) else { return nil }
        self = String(decoding: bytes, as: UTF8.self)
    }

    /// As ``init(utf8:)-(UnsafeBufferPointer<UInt8>)``, for bytes in an array.
    init?(utf8 bytes: ArraySlice<UInt8>) {
        guard let s = bytes.withUnsafeBufferPointer({ String(utf8: $0) }) else { return nil }
        self = s
    }

    /// As ``init(utf8:)-(UnsafeBufferPointer<UInt8>)``, for bytes in an array.
    init?(utf8 bytes: [UInt8]) {
        guard let s = bytes.withUnsafeBufferPointer({ String(utf8: $0) }) else { return nil }
        self = s
    }
}

/// Whether `bytes` are well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
/// above U+10FFFF). One pass; ASCII runs cost a compare per byte.
func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    var i = 0
    let n = bytes.count
    while i < n {
        let b0 = bytes[i]
        if b0 < 0x80 { i += 1; continue }
        // The allowed range of the second byte depends on the first (Unicode Table 3-7).
        let length: Int, low: UInt8, high: UInt8
        switch b0 {
        case 0xC2...0xDF: (length, low, high) = (2, 0x80, 0xBF)
        case 0xE0: (length, low, high) = (3, 0xA0, 0xBF)
        case 0xE1...0xEC, 0xEE...0xEF: (length, low, high) = (3, 0x80, 0xBF)
        case 0xED: (length, low, high) = (3, 0x80, 0x9F)
        case 0xF0: (length, low, high) = (4, 0x90, 0xBF)
        case 0xF1...0xF3: (length, low, high) = (4, 0x80, 0xBF)
        case 0xF4: (length, low, high) = (4, 0x80, 0x8F)
        default: return false
        }
        guard n - i >= length, (low...high).contains(bytes[i + 1]) else { return false }
        for k in 2..<length where !(0x80...0xBF).contains(bytes[i + k]) { return false }
        i += length
    }
    return true
}
