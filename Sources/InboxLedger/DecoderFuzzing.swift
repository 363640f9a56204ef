/// Every decoder of untrusted bytes behind one entry point, for the fuzzer (`ledger-fuzz`, Benchmarks)
/// and the corpus regression test. It never traps: each run returns what the decoders concluded.
///
/// ```swift
/// @_spi(Testing) import InboxLedger
/// let verdict = DecoderFuzzing.run([0] + recordBytes)   // "record: checksum mismatch …"
/// ```
@_spi(Testing) public enum DecoderFuzzing {
    /// Which decoder an input is for: its first byte modulo 3.
    public enum Target: UInt8, CaseIterable, Sendable {
        /// The event envelope (`EventRecord.decode`), as read from the log.
        case record = 0
        /// The JSON parser: event lines (`EventJSON`), every built-in type's payload
        /// validation, and canonicalisation.
        case json = 1
        /// What a snapshot holds: its header and the projection rows it copies.
        case snapshot = 2
    }

    /// Runs the decoder chosen by the first byte on the rest.
    public static func run(_ input: [UInt8]) -> String {
        guard let first = input.first, let target = Target(rawValue: first % 3) else { return "empty" }
        return run(target, Array(input.dropFirst()))
    }

    /// Feeds `bytes` to `target` and returns what happened, one word per check (the fuzzer and the corpus tests compare it).
    public static func run(_ target: Target, _ bytes: [UInt8]) -> String {
        switch target {
        case .record:
            // The sequence the key would give: taken from where the record keeps its own (offset 24).
            var reader = ByteReader(bytes, offset: 24)
            let sequence = reader.u64le() ?? 0
            func outcome(_ bytes: [UInt8]) -> String {
                switch EventRecord.decode(bytes, sequence: sequence) {
                case .success(let event): "\(event.type) \(event.payload.count) bytes"
                case .failure(let error): "\(error)"
                }
            }
            // Random bytes almost never carry a valid checksum, which guards everything after it:
            // decode them as they are, and again with the checksum made right.
            var sealed = bytes
            if sealed.count >= 4 {
                let crc = CRC32C.checksum(sealed[..<(sealed.count - 4)])
                withUnsafeBytes(of: crc.littleEndian) { sealed.replaceSubrange((sealed.count - 4)..., with: $0) }
            }
            return "record: \(outcome(bytes)); sealed: \(outcome(sealed))"
        case .json:
            var outcomes: [String] = []
            do { _ = try EventJSON.parse(bytes: bytes, index: 0); outcomes.append("line ok") } catch { outcomes.append("line: \(error)") }
            for type in DomainEvent.builtInTypes.sorted() {
                do { _ = try DomainEvent.decode(type: type, payload: bytes) } catch { outcomes.append("\(type): \(error)") }
            }
            // Input the canonicaliser refuses has nothing to check here (the decoders ran above).
            if let canonical = try? EventJSON.canonicalize(bytes) {
                // Canonical output parses, and canonicalising it again changes nothing.
                let again = try? EventJSON.canonicalize(canonical)
                outcomes.append(again == canonical ? "canonical stable" : "CANONICAL UNSTABLE")
            }
            return "json: " + outcomes.joined(separator: "; ")
        case .snapshot:
            var outcomes: [String] = []
            outcomes.append(SnapshotCodec.Header.decode(bytes) == nil ? "header no" : "header ok")
            outcomes.append(MessageRecord.decode(bytes) == nil ? "message no" : "message ok")
            outcomes.append(ActionRecord.decode(bytes) == nil ? "action no" : "action ok")
            outcomes.append(ActionStatus.decode(bytes) == nil ? "status no" : "status ok")
            outcomes.append(ProjectionState.decode(bytes) == nil ? "state no" : "state ok")
            return "snapshot: " + outcomes.joined(separator: ", ")
        }
    }
}
