// Compaction of a large log, and the append latency a concurrent writer sees meanwhile.
//
//   swift run -c release ledger-compaction-bench [--events N] [--chunk N] [--json]
//
// Loads N events (default 1,000,000: inbox syncs, reads, actions, badge deltas and custom
// events of realistic size), then measures a writer appending one durable event at a time:
// first alone (baseline), then while `Compactor.runOnce` trims all but the last 1,000 events.
import Foundation
import InboxLedger

struct Options {
    var events = 1_000_000
    var chunk = 1_000
    var json = false

    init(_ args: [String]) {
        var i = 1
        while i < args.count {
            switch args[i] {
            case "--events": i += 1; events = Int(args[i]) ?? events
            case "--chunk": i += 1; chunk = Int(args[i]) ?? chunk
            case "--json": json = true
            default: print("unknown argument \(args[i])"); exit(2)
            }
            i += 1
        }
    }
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// Appends single durable events until `stop` is set, recording each call's latency in µs.
final class Writer: @unchecked Sendable {
    // @unchecked: `latencies` is read only after the thread finished (DispatchGroup).
    var latencies: [Double] = []
    private let stopFlag = NSLock()
    private var stopped = false
    let done = DispatchGroup()

    func start(_ ledger: Ledger) {
        done.enter()
        Thread.detachNewThread { [self] in
            var i = 0
            while !isStopped {
                let t0 = DispatchTime.now().uptimeNanoseconds
                _ = try? ledger.append(.badgeAdjusted(.delta(1)), key: "writer-\(UUID().uuidString)-\(i)")
                latencies.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
                i += 1
            }
            done.leave()
        }
    }

    var isStopped: Bool { stopFlag.lock(); defer { stopFlag.unlock() }; return stopped }
    func stop() { stopFlag.lock(); stopped = true; stopFlag.unlock(); done.wait() }
}

let options = Options(CommandLine.arguments)
let directory = NSTemporaryDirectory() + "ledger-compaction-bench-\(UUID().uuidString)"
defer { try? FileManager.default.removeItem(atPath: directory) }

do {
    var loadOptions = LedgerOptions(role: "loader")
    loadOptions.durability = .none
    let loader = try Ledger(path: directory, options: loadOptions)
    let loadStart = Date()
    var loaded = 0
    while loaded < options.events {
        let n = min(1000, options.events - loaded)
        let batch: [NewEvent] = try (0..<n).map { k in
            let i = loaded + k
            switch i % 10 {
            case 0:
                return try DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: [InboxMessage(
                    id: "m\(i % 500)", title: "Your order #\(i) has shipped", subheading: "Arriving Tuesday between 9 and 12",
                    iconURL: "https://cdn.example.com/icons/\(i % 17).png", sentAt: Timestamp(micros: 1_790_000_000_000_000 + Int64(i) * 1_000_000))])).newEvent()
            case 1: return try DomainEvent.messageRead(ReadChange(ids: ["m\(i % 500)"], read: true)).newEvent()
            case 2: return try DomainEvent.badgeAdjusted(.delta(1)).newEvent(key: "push-\(i)")
            default:
                return NewEvent(type: "app.activity", payload: Array(#"{"screen":"inbox","session":\#(i / 100),"step":\#(i % 100),"note":"user scrolled the message list"}"#.utf8))
            }
        }
        try loader.append(contentsOf: batch)
        loaded += n
    }
    let loadSeconds = Date().timeIntervalSince(loadStart)
    let sizeBefore = try loader.statistics().fileBytes

    let writerLedger = try Ledger(path: directory, options: LedgerOptions(role: "writer"))
    // Baseline: the writer alone for 2 seconds.
    let baseline = Writer()
    baseline.start(writerLedger)
    Thread.sleep(forTimeInterval: 2)
    baseline.stop()

    // The same writer while compaction trims all but the last 1,000 events.
    var policy = CompactionPolicy()
    policy.retainedTail = 1_000
    policy.chunkSize = options.chunk
    let during = Writer()
    during.start(writerLedger)
    Thread.sleep(forTimeInterval: 0.2)
    let report = try Compactor(ledger: loader, policy: policy).runOnce()
    during.stop()

    let base = baseline.latencies.sorted(), busy = during.latencies.sorted()
    let sizeAfter = try loader.statistics().fileBytes
    let result: [String: Any] = [
        "events": options.events, "loadSeconds": loadSeconds, "chunkSize": options.chunk,
        "compactionSeconds": report.seconds, "eventsTrimmed": report.eventsTrimmed, "chunks": report.chunks,
        "baselineAppends": base.count, "baselineP50Micros": percentile(base, 0.5), "baselineP99Micros": percentile(base, 0.99),
        "duringAppends": busy.count, "duringP50Micros": percentile(busy, 0.5), "duringP99Micros": percentile(busy, 0.99),
        "duringMaxMicros": busy.last ?? 0, "fileBytesBefore": sizeBefore, "fileBytesAfter": sizeAfter,
    ]
    if options.json {
        let data = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    } else {
        print("loaded \(options.events) events in \(String(format: "%.1f", loadSeconds)) s; data.mdb \(sizeBefore / 1_048_576) MiB")
        print("compaction: trimmed \(report.eventsTrimmed) events in \(report.chunks) chunks of \(options.chunk), \(String(format: "%.2f", report.seconds)) s")
        print("writer alone:          \(base.count) durable appends, p50 \(Int(percentile(base, 0.5))) µs, p99 \(Int(percentile(base, 0.99))) µs")
        print("writer during compact: \(busy.count) durable appends, p50 \(Int(percentile(busy, 0.5))) µs, p99 \(Int(percentile(busy, 0.99))) µs, max \(Int(busy.last ?? 0)) µs")
        print("data.mdb after: \(sizeAfter / 1_048_576) MiB (LMDB files do not shrink; the free pages are reused)")
    }
} catch {
    FileHandle.standardError.write(Data("ledger-compaction-bench: \(error)\n".utf8))
    exit(1)
}
