import LMDB

/// What ``Ledger/verify()`` found.
public struct VerificationReport: Sendable, Hashable {
    /// One problem, precise enough to act on.
    public enum Finding: Sendable, Hashable, CustomStringConvertible {
        /// A record fails its checksum or cannot be decoded.
        case corruptRecord(sequence: UInt64, reason: String)
        /// Sequences missing between the first retained event and the head.
        case missingSequences(from: UInt64, through: UInt64)
        /// The last record's sequence differs from the recorded head.
        case headMismatch(recorded: UInt64, lastRecord: UInt64)
        /// A projection differs from a rebuild.
        case projection(ProjectionMismatch)
        /// The projections could not be rebuilt.
        case rebuildFailed(reason: String)
        /// A consumer's cursor is past the head.
        case consumerAhead(name: String, cursor: UInt64, head: UInt64)
        /// A snapshot cannot be read back.
        case snapshot(sequence: UInt64, reason: String)

        public var description: String {
            switch self {
            case .corruptRecord(let s, let r): "record \(s): \(r)"
            case .missingSequences(let a, let b): a == b ? "sequence \(a) is missing" : "sequences \(a)–\(b) are missing"
            case .headMismatch(let h, let l): "the head is recorded as \(h) but the last record is \(l)"
            case .projection(let m): m.description
            case .rebuildFailed(let r): "projections cannot be rebuilt: \(r)"
            case .consumerAhead(let n, let c, let h): "consumer '\(n)' is at \(c), past the head \(h)"
            case .snapshot(let s, let r): "snapshot \(s): \(r)"
            }
        }
    }

    /// Something worth knowing that is not damage.
    public enum Warning: Sendable, Hashable, CustomStringConvertible {
        /// A consumer's cursor is below the first retained event: it will get a gap error.
        case consumerBehindLog(name: String, cursor: UInt64, firstRetained: UInt64)
        /// Reader slots held by processes that no longer exist.
        case staleReaders(pids: [Int32])
        /// Rows of a snapshot whose deletion was interrupted (the next compaction removes them).
        case incompleteSnapshot(sequence: UInt64)

        public var description: String {
            switch self {
            case .consumerBehindLog(let n, let c, let f): "consumer '\(n)' is at \(c) but the log starts at \(f): it will need to rebase"
            case .staleReaders(let pids): "reader slots held by dead processes: \(pids.map(String.init).joined(separator: ", "))"
            case .incompleteSnapshot(let s): "snapshot \(s) was partly deleted; the next compaction removes the rest"
            }
        }
    }

    public var eventsChecked: Int
    public var firstSequence: UInt64
    public var headSequence: UInt64
    public var snapshotsChecked: Int
    public var findings: [Finding]
    public var warnings: [Warning]

    /// No finding.
    public var isHealthy: Bool { findings.isEmpty }
}

extension Ledger {
    /// Checks everything that can be checked: every record's checksum and decodability, that
    /// sequences are dense up to the head, the projections against a rebuild, consumer cursors,
    /// every snapshot, and the reader table. Reads in short transactions; safe while others write
    /// (the projection comparison uses one consistent transaction).
    ///
    /// ```swift
    /// let report = try ledger.verify()
    /// if !report.isHealthy { report.findings.forEach { print($0) } }
    /// ```
    public func verify() throws(LedgerError) -> VerificationReport {
        var findings: [VerificationReport.Finding] = []
        var warnings: [VerificationReport.Warning] = []
        let (first, head) = try read("verify") { txn in (try firstSequence(in: txn), try headSequence(in: txn)) }

        // Records: checksums, decodability, density. Paged, one short transaction per page.
        var checked = 0
        var expected = first
        var last: UInt64 = first > 0 ? first - 1 : 0
        var position: UInt64 = 0
        while true {
            let page = try read("verify records") { txn in
                try txn.withCursor(schema.events) { cursor -> [Entry] in
                    var entries: [Entry] = []
                    var entry = position == 0 ? try cursor.first() : try cursor.seek(atLeast: SequenceKey.encode(position + 1))
                    while let e = entry, entries.count < 4096 {
                        entries.append(e)
                        entry = try cursor.next()
                    }
                    return entries
                }
            }
            if page.isEmpty { break }
            for e in page {
                guard let seq = SequenceKey.decode(e.key) else {
                    findings.append(.corruptRecord(sequence: 0, reason: "a key of \(e.key.count) bytes is not a sequence"))
                    continue
                }
                position = seq
                if seq > head {
                    findings.append(.headMismatch(recorded: head, lastRecord: seq))
                    continue
                }
                if seq > expected { findings.append(.missingSequences(from: expected, through: seq - 1)) }
                if case .failure(let error) = EventRecord.decode(e.value, sequence: seq) {
                    findings.append(.corruptRecord(sequence: seq, reason: error.description))
                }
                expected = seq + 1
                last = seq
                checked += 1
            }
            if page.count < 4096 { break }
        }
        if last != head && !(checked == 0 && first == head + 1) {
            findings.append(.headMismatch(recorded: head, lastRecord: last))
        }

        // Projections against a rebuild (skipped if records are damaged: it would fail on them).
        if !findings.contains(where: { if case .corruptRecord = $0 { true } else { false } }) {
            do {
                if let mismatch = try verifyProjections() { findings.append(.projection(mismatch)) }
            } catch {
                findings.append(.rebuildFailed(reason: error.description))
            }
        }

        // Consumers and snapshots.
        for consumer in try consumers() {
            if consumer.cursor > head { findings.append(.consumerAhead(name: consumer.name, cursor: consumer.cursor, head: head)) }
            if consumer.cursor + 1 < first { warnings.append(.consumerBehindLog(name: consumer.name, cursor: consumer.cursor, firstRetained: first)) }
        }
        let snapshots = try read("verify snapshots") { txn in try snapshotPrefixes(in: txn) }
        for snapshot in snapshots {
            guard snapshot.info != nil else {
                warnings.append(.incompleteSnapshot(sequence: snapshot.sequence))
                continue
            }
            do {
                try read("verify snapshot") { txn in try loadSnapshot(snapshot.sequence, into: MemoryStore(), in: txn) }
            } catch {
                findings.append(.snapshot(sequence: snapshot.sequence, reason: error.description))
            }
        }

        // Reader table.
        if let slots = try? environment.readers() {
            let dead = slots.map(\.pid).filter { !processIsAlive($0) }
            if !dead.isEmpty { warnings.append(.staleReaders(pids: Array(Set(dead)).sorted())) }
        }
        return VerificationReport(eventsChecked: checked, firstSequence: first, headSequence: head,
                                  snapshotsChecked: snapshots.count, findings: findings, warnings: warnings)
    }
}
