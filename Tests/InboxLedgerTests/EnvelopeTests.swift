import Testing
import TestSupport
@testable import InboxLedger

@Suite struct EnvelopeTests {
    @Test func crc32cKnownVector() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
        // The slicing-by-8 path and the byte-at-a-time tail agree across every split.
        let data = (0..<100).map { UInt8($0 * 7 % 256) }
        for n in 0...data.count {
            #expect(CRC32C.checksum(Array(data.prefix(n))) == bitwiseCRC(Array(data.prefix(n))))
        }
    }

    /// An independent bit-by-bit CRC-32C.
    func bitwiseCRC(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = ~0
        for b in bytes {
            crc ^= UInt32(b)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    func randomString(_ rng: inout SeededGenerator, maxBytes: Int) -> String {
        let alphabet = Array("abcXYZ09._-:/é✓😀 ")
        var s = ""
        for _ in 0..<Int.random(in: 0...maxBytes, using: &rng) {
            let c = alphabet[Int.random(in: 0..<alphabet.count, using: &rng)]
            if s.utf8.count + String(c).utf8.count > maxBytes { break }
            s.append(c)
        }
        return s
    }

    func randomEvent(_ rng: inout SeededGenerator) -> Event {
        Event(
            sequence: UInt64.random(in: 1...UInt64.max, using: &rng),
            timestampMicros: Int64.random(in: Int64.min...Int64.max, using: &rng),
            origin: Origin(role: randomString(&rng, maxBytes: 64), pid: Int32.random(in: Int32.min...Int32.max, using: &rng)),
            type: randomString(&rng, maxBytes: 128),
            key: Bool.random(using: &rng) ? randomString(&rng, maxBytes: 256) : nil,
            payload: (0..<Int.random(in: 0...3000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) },
            source: randomSource(&rng))
    }

    /// Every kind of source, the feed's with and without an origin ledger and key.
    func randomSource(_ rng: inout SeededGenerator) -> EventSource {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: .local
        case 1: .shared
        default:
            .feed(FeedOrigin(ledger: Bool.random(using: &rng) ? randomString(&rng, maxBytes: 128) : nil,
                             sequence: UInt64.random(in: 0...UInt64.max, using: &rng),
                             key: Bool.random(using: &rng) ? randomString(&rng, maxBytes: 256) : nil,
                             position: UInt64.random(in: 0...UInt64.max, using: &rng)))
        }
    }

    /// The feed part's layout (docs/format.md): pinned, so that a change of the format is seen.
    @Test func aFeedEventsRecordIsLaidOutAsDocumented() {
        let event = Event(sequence: 9, timestampMicros: 5, origin: Origin(role: "w", pid: 0), type: "c.t", key: "k", payload: [0x7B, 0x7D],
                          source: .feed(FeedOrigin(ledger: "L1", sequence: 47, key: "n", position: 6)))
        let bytes = EventRecord.encode(event)
        #expect(bytes[1] == 0x05)  // has key, from the feed
        let feed = Array(bytes[(32 + 3 + 1 + 1)...].prefix(21 + 3))
        #expect(feed == [6, 0, 0, 0, 0, 0, 0, 0, 47, 0, 0, 0, 0, 0, 0, 0, 3, 2, 0, 1, 0, 0x4C, 0x31, 0x6E])
        #expect(Array(bytes[(32 + 5 + 24)...].prefix(2)) == [0x7B, 0x7D])
        var shared = event
        shared.source = .shared
        #expect(EventRecord.encode(shared)[1] == 0x03)
        // Both "shared" and "from the feed" is no record this library writes.
        var both = bytes
        both[1] = 0x07
        let body = both.count - 4
        let crc = CRC32C.checksum(Array(both[0..<body]))
        both.replaceSubrange(body..., with: withUnsafeBytes(of: crc.littleEndian, Array.init))
        #expect(EventRecord.decode(both, sequence: 9) == .failure(.invalidFlags(0x07)))
    }

    @Test func roundTripOfRandomEvents() {
        var rng = SeededGenerator(seed: 0xE7E7)
        for _ in 0..<2000 {
            let original = randomEvent(&rng)
            let bytes = EventRecord.encode(original)
            #expect(EventRecord.decode(bytes, sequence: original.sequence) == .success(original))
        }
    }

    @Test func everySingleByteFlipIsDetected() {
        var rng = SeededGenerator(seed: 42)
        let original = randomEvent(&rng)
        let bytes = EventRecord.encode(original)
        for i in bytes.indices {
            var damaged = bytes
            damaged[i] ^= UInt8(1 << (i % 8))
            guard case .failure = EventRecord.decode(damaged, sequence: original.sequence) else {
                Issue.record("flip at byte \(i) went unnoticed")
                return
            }
        }
    }

    @Test func recordUnderTheWrongKeyIsRejected() {
        var rng = SeededGenerator(seed: 7)
        var original = randomEvent(&rng)
        original.sequence = 10
        let bytes = EventRecord.encode(original)
        #expect(EventRecord.decode(bytes, sequence: 11) == .failure(.sequenceMismatch(stored: 10)))
    }

    @Test func truncatedAndRandomBytesNeverCrash() {
        var rng = SeededGenerator(seed: 99)
        let bytes = EventRecord.encode(randomEvent(&rng))
        for n in 0..<bytes.count {
            guard case .failure = EventRecord.decode(Array(bytes.prefix(n)), sequence: 1) else {
                Issue.record("a \(n)-byte prefix decoded")
                return
            }
        }
        for _ in 0..<20000 {
            let count = Int.random(in: 0...200, using: &rng)
            var random = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if count > 0, Bool.random(using: &rng) { random[0] = EventRecord.version }
            _ = EventRecord.decode(random, sequence: 1)
        }
    }
}

/// The small stored records each have one encoder and one decoder.
@Suite struct StoredRecordTests {
    @Test func keyRecordsRoundTripAndRejectOtherLengths() {
        var rng = SeededGenerator(seed: 3)
        for _ in 0..<500 {
            let record = KeyRecord(sequence: rng.next(), digest: rng.next(), time: Int64(bitPattern: rng.next()))
            #expect(KeyRecord.decode(record.encode()) == record)
        }
        #expect(KeyRecord.decode(Array(KeyRecord(sequence: 7, digest: 9, time: 5).encode().prefix(16)))?.time == 0)
        for length in [0, 8, 15, 17, 23, 25, 32] {
            #expect(KeyRecord.decode([UInt8](repeating: 1, count: length)) == nil, "\(length) bytes")
        }
    }

    @Test func leaseRecordsRoundTripAndRejectOtherLengths() {
        var rng = SeededGenerator(seed: 4)
        for _ in 0..<500 {
            let lease = LeaseRecord(pid: Int32(truncatingIfNeeded: rng.next()), owner: rng.next(), expires: Int64(bitPattern: rng.next()))
            #expect(LeaseRecord.decode(lease.encode()) == lease)
        }
        for length in [0, 4, 19, 21] { #expect(LeaseRecord.decode([UInt8](repeating: 2, count: length)) == nil) }
    }
}

/// The CPU's CRC-32C instruction and the table agree, whatever the length, offset and split.
@Suite struct ChecksumTests {
    @Test func hardwareAndSoftwareAgreeOnRandomInputs() {
        #expect(CRC32C.softwareUpdate(0, Array("123456789".utf8)[...]) == 0xE306_9283)
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        var rng = SeededGenerator(seed: 32)
        for _ in 0..<3000 {
            let bytes = (0..<Int.random(in: 0...600, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let start = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)  // unaligned slices
            let slice = bytes[start...]
            let reference = CRC32C.softwareUpdate(0, slice)
            #expect(CRC32C.update(0, slice) == reference)
            let cut = slice.startIndex + (slice.isEmpty ? 0 : Int.random(in: 0...slice.count, using: &rng))
            #expect(CRC32C.update(CRC32C.update(0, slice[..<cut]), slice[cut...]) == reference)
        }
    }

    @Test func thisMachineUsesTheInstruction() {
        // x86-64 CI machines have had SSE 4.2 since 2008: the fast path is what runs here.
        #if arch(x86_64)
        #expect(CRC32C.usesHardware)
        #endif
    }
}
