/// Appends fixed-width integers and byte strings to a buffer.
struct ByteWriter {
    var bytes: [UInt8]

    init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    mutating func u8(_ v: UInt8) { bytes.append(v) }

    mutating func u16le(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
    }

    mutating func u32le(_ v: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }

    mutating func u64le(_ v: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    mutating func u64be(_ v: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    mutating func append(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }
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

    mutating func u16le() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    mutating func u32le() -> UInt32? {
        guard remaining >= 4 else { return nil }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[offset + i]) << UInt32(8 * i) }
        offset += 4
        return v
    }

    mutating func u64le() -> UInt64? {
        guard remaining >= 8 else { return nil }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[offset + i]) << UInt64(8 * i) }
        offset += 8
        return v
    }

    mutating func u64be() -> UInt64? {
        guard remaining >= 8 else { return nil }
        var v: UInt64 = 0
        for i in 0..<8 { v = v << 8 | UInt64(bytes[offset + i]) }
        offset += 8
        return v
    }

    mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }
}

/// Sequence numbers as LMDB keys: 8 bytes, big-endian, so memcmp order is numeric order
/// (LMDB-NOTES rule 13).
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
