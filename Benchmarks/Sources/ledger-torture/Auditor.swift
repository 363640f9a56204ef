// The end-of-round audit: reads every event appended since the last audit through a consumer
// (so compaction never trims what was not audited yet), and checks them against the writers'
// acknowledgements and an independent model of the projections.
import Foundation
import InboxLedger
import TestSupport

struct RoundResult {
    var acknowledged = 0
    var audited = 0
    var lost = 0
    var duplicated = 0
    var partial = 0
    var trimmed = 0
    var first: UInt64 = 0
    var head: UInt64 = 0
    var problems: [String] = []
}

final class Auditor {
    let generation: Int
    private let ledger: Ledger
    private let audit: Consumer
    private let logs: String
    private var model = InboxModel()
    /// Tag → how often it was seen and the sequence it was first seen at.
    private var seen: [String: (count: Int, sequence: UInt64)] = [:]
    /// "writer:batch" → the batch's size and the indices seen.
    private var batches: [String: (size: Int, indices: Set<Int>)] = [:]
    /// Log file → bytes already accounted.
    private var logOffsets: [String: Int] = [:]
    private var firstBefore: UInt64 = 1

    init(directory: String, logs: String, generation: Int) throws {
        self.generation = generation
        self.logs = logs
        ledger = try openLedger(directory, role: "auditor")
        // Registered before any writer starts: compaction keeps everything it has not read.
        audit = try ledger.consumers.consumer(named: "torture-audit", startingAt: .beginning)
    }

    func check() throws -> RoundResult {
        var r = RoundResult()
        // Checksums, density, head, snapshots, and the projections against a rebuild.
        let report = try ledger.maintenance.verify()
        r.problems += report.findings.prefix(5).map { "verify: \($0)" }

        // Every event since the last audit, in order.
        var touched: Set<String> = []
        while true {
            let batch = try audit.next(limit: 5_000)
            if batch.events.isEmpty { break }
            for event in batch.events {
                model.apply(event)
                r.audited += 1
                guard let tag = tag(of: event) else {
                    r.problems.append("event \(event.sequence) (\(event.type)) carries no tag")
                    continue
                }
                let count = (seen[tag]?.count ?? 0) + 1
                seen[tag] = (count, seen[tag]?.sequence ?? event.sequence)
                if count == 2 {
                    r.duplicated += 1
                    r.problems.append("\(tag) appears twice (sequences \(seen[tag]?.sequence ?? 0) and \(event.sequence))")
                }
                let parts = tag.split(separator: ":")
                if parts.count == 4, let index = Int(parts[2]), let size = Int(parts[3]) {
                    let key = "\(parts[0]):\(parts[1])"
                    batches[key, default: (size, [])].indices.insert(index)
                    touched.insert(key)
                }
            }
            _ = try audit.commit(batch)
        }
        for key in touched {
            guard let b = batches[key], b.indices.count != b.size else { continue }
            r.partial += 1
            r.problems.append("batch \(key) is partly visible: \(b.indices.count) of \(b.size) events")
        }

        // The projections against the model folded from the same events.
        let list = try ledger.read({ try $0.widgetList(limit: 100_000) })
        let order = model.order
        if list.items.map(\.id) != order { r.problems.append("widget order \(list.items.map(\.id).prefix(8)) ≠ model \(order.prefix(8))") }
        if list.items.map(\.read) != order.map({ model.messages[$0]?.read ?? false }) { r.problems.append("read flags differ from the model") }
        if list.unreadCount != model.unread || list.badge != model.badge {
            r.problems.append("unread \(list.unreadCount) / badge \(list.badge) ≠ model \(model.unread) / \(model.badge)")
        }
        let pending = try ledger.read({ try $0.pendingActions(limit: 1_000_000) }).map(\.actionID)
        if pending != model.pending { r.problems.append("\(pending.count) pending actions ≠ model's \(model.pending.count)") }

        // Every acknowledged event: present once, at its acknowledged sequence.
        let files = (try? FileManager.default.contentsOfDirectory(atPath: logs))?.filter { $0.hasSuffix(".log") }.sorted() ?? []
        for file in files {
            let writer = String(file.dropLast(4))
            guard let data = FileManager.default.contents(atPath: "\(logs)/\(file)") else { continue }
            let bytes = [UInt8](data)
            let start = logOffsets[file] ?? 0
            // Only whole lines: a writer killed inside its write leaves a torn last line.
            guard let end = bytes.lastIndex(of: 10).map({ $0 + 1 }), end > start else { continue }
            logOffsets[file] = end
            for line in String(decoding: bytes[start..<end], as: UTF8.self).split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 3, parts[0] == "ack", let b = Int(parts[1]) else { continue }
                let sequences = parts[2].split(separator: ",").compactMap { UInt64($0) }
                for (i, sequence) in sequences.enumerated() {
                    r.acknowledged += 1
                    let tag = "\(writer):\(b):\(i):\(sequences.count)"
                    guard let found = seen[tag] else {
                        r.lost += 1
                        r.problems.append("acknowledged \(tag) (sequence \(sequence)) is not in the log")
                        continue
                    }
                    if found.sequence != sequence {
                        r.problems.append("acknowledged \(tag) at sequence \(sequence) but found at \(found.sequence)")
                    }
                }
            }
        }
        r.head = try ledger.read({ try $0.head() })
        r.first = try ledger.read({ try $0.firstSequence() })
        r.trimmed = Int(r.first - min(r.first, firstBefore))
        firstBefore = r.first
        return r
    }

    private func tag(of event: Event) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(event.payload)) as? [String: Any] else { return nil }
        return object["tag"] as? String
    }
}
