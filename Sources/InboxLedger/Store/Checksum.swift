import CChecksum

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the record checksum: the CPU's
/// instruction where there is one (CChecksum: SSE 4.2, ARMv8 CRC), else slicing-by-8 tables
/// computed once. Both give the same values (`ChecksumTests`).
enum CRC32C {
    /// Whether this CPU's CRC-32C instruction is used.
    static let usesHardware = ledger_crc32c_hardware_available() == 1
    /// Eight 256-entry tables, flattened: table `t` starts at `t * 256`.
    private static let table: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 8 * 256)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            table[i] = c
        }
        for t in 1..<8 {
            for i in 0..<256 {
                let prev = table[(t - 1) * 256 + i]
                table[t * 256 + i] = (prev >> 8) ^ table[Int(prev & 0xFF)]
            }
        }
        return table
    }()

    /// The checksum of `bytes`.
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        checksum(bytes[...])
    }

    /// The checksum of `bytes`.
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        update(0, bytes)
    }

    /// Continues a checksum: `update(checksum(a), b) == checksum(a + b)`.
    static func update(_ checksum: UInt32, _ bytes: ArraySlice<UInt8>) -> UInt32 {
        guard usesHardware else { return softwareUpdate(checksum, bytes) }
        return bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return checksum }
            return ledger_crc32c_hardware(checksum, base, buffer.count)
        }
    }

    /// The checksum of bytes borrowed from LMDB's memory (the read path).
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return 0 }
        guard usesHardware else { return softwareUpdate(0, ArraySlice(bytes)) }
        return ledger_crc32c_hardware(0, base.assumingMemoryBound(to: UInt8.self), bytes.count)
    }

    /// The table-driven update: the fallback, and the reference the instruction is tested against.
    static func softwareUpdate(_ checksum: UInt32, _ bytes: ArraySlice<UInt8>) -> UInt32 {
        table.withUnsafeBufferPointer { t in
            bytes.withUnsafeBufferPointer { buffer in
                var crc: UInt32 = ~checksum
                var i = 0
                let n = buffer.count
                while n - i >= 8 {
                    let lo = crc ^ (UInt32(buffer[i]) | UInt32(buffer[i + 1]) << 8
                        | UInt32(buffer[i + 2]) << 16 | UInt32(buffer[i + 3]) << 24)
                    let a = t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
                    let b = t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                    let c = t[3 * 256 + Int(buffer[i + 4])] ^ t[2 * 256 + Int(buffer[i + 5])]
                    let d = t[1 * 256 + Int(buffer[i + 6])] ^ t[Int(buffer[i + 7])]
                    crc = a ^ b ^ c ^ d
                    i += 8
                }
                while i < n {
                    crc = t[Int((crc ^ UInt32(buffer[i])) & 0xFF)] ^ (crc >> 8)
                    i += 1
                }
                return ~crc
            }
        }
    }
}

/// 64-bit FNV-1a, the content digest stored with an idempotency key so that a retry can be
/// told apart from a conflicting reuse of the key, even after the event itself is trimmed.
enum ContentDigest {
    static func of(type: String, payload: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        @inline(__always) func mix(_ b: UInt8) {
            hash ^= UInt64(b)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        for b in type.utf8 { mix(b) }
        mix(0)
        payload.withUnsafeBufferPointer { for b in $0 { mix(b) } }
        return hash
    }
}
