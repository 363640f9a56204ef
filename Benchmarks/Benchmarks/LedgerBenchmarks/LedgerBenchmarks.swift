// package-benchmark suite for the ledger's hot paths. Run: `make benchmark`
// (swift package --allow-writing-to-package-directory benchmark).
import Benchmark
import Foundation
import InboxLedger
import Synchronization

/// A ledger in a temporary directory, kept for the life of the benchmark process.
final class Fixture: Sendable {
    let directory: String
    let ledger: Ledger

    init(durability: LedgerDurability, preload: Int = 0) throws {
        directory = NSTemporaryDirectory() + "ledger-bench-\(UUID().uuidString)"
        var options = LedgerOptions(role: "bench")
        options.durability = durability
        options.durabilityFloor = .none  // the `none` fixtures measure unsynced commits
        ledger = try Ledger(path: directory, options: options)
        var loaded = 0
        while loaded < preload {
            let n = min(1000, preload - loaded)
            try ledger.append(contentsOf: (0..<n).map { inboxDelta(loaded + $0) })
            loaded += n
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }
}

let fixtures = Mutex<[String: Fixture]>([:])
let widgetReads = Atomic<Int>(0)

func fixture(_ name: String, durability: LedgerDurability, preload: Int = 0) throws -> Fixture {
    if let existing = fixtures.withLock({ $0[name] }) { return existing }
    let made = try Fixture(durability: durability, preload: preload)
    fixtures.withLock { $0[name] = made }
    return made
}

/// An inbox-sync delta of realistic size: one message with title, subheading, icon URL, dates.
func inboxDelta(_ i: Int) -> NewEvent {
    let json = """
        {"mode":"delta","messages":[{"id":"msg-\(i)","title":"Your order #\(100_000 + i) has shipped","subheading":"Track the parcel and see the estimated delivery window for Tuesday","iconURL":"https://cdn.example.com/icons/shipping-\(i % 17).png","sentAt":"2026-11-22T08:\(String(format: "%02d", i % 60)):00Z","read":false}]}
        """
    return NewEvent(type: "inbox.synced", payload: Array(json.utf8))
}

/// The same delta as a typed event.
func typedDelta(_ i: Int) -> DomainEvent {
    .inboxSynced(InboxSync(mode: .delta, messages: [InboxMessage(
        id: "msg-\(i)", title: "Your order #\(100_000 + i) has shipped",
        subheading: "Track the parcel and see the estimated delivery window for Tuesday",
        iconURL: "https://cdn.example.com/icons/shipping-\(i % 17).png",
        sentAt: Timestamp(micros: 1_795_334_400_000_000 + Int64(i % 60) * 60_000_000), read: false)]))
}

/// A typical app event and projection row (the task tracker of ledger-bench W9, Tasks.swift):
/// what the ledger's own JSON codec decodes and encodes on every event a projection applies.
struct CodecTaskAdded: LedgerEvent, Equatable {
    static let eventType = "com.example.task-added"
    var id: String
    var title: String
    var day: Int64
}

/// `TaskList.Row`'s shape, as a `LedgerEvent` so that `Event.decode(as:)` decodes it.
struct CodecTaskRow: LedgerEvent, Equatable {
    static let eventType = "com.example.task-row"
    var title: String
    var day: Int64
    var done: Bool
}

/// An event as read back, holding `value`'s canonical payload.
func codecEvent<E: LedgerEvent>(_ value: E) throws -> Event {
    Event(sequence: 1, timestampMicros: 0, origin: Origin(role: "bench", pid: 1), type: E.eventType, key: nil, payload: try CanonicalJSON.encode(value))
}

let benchmarks: @Sendable () -> Void = {
    // Tolerances for `make benchmark-check` against the committed p90 thresholds in
    // Benchmarks/Thresholds: allocations are nearly exact (15 % at p90: the warm widget read
    // varies between 18 and 20); wall time on a shared 2-core
    // VM (runs minutes apart differ by up to 2×) only for 100 %; peak memory (allocator state
    // varies between runs: +20 % seen) for 50 %.
    // Throughput is not recorded: it is wall time inverted, and its p90 did not compare
    // consistently with the thresholds file. Names have no spaces: package-benchmark 1.38 writes
    // threshold files with spaces replaced by "_" but looks them up with the name as it is.
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident],
        maxDuration: .seconds(3),
        maxIterations: 100_000,
        thresholds: [
            .mallocCountTotal: .init(relative: [.p50: 5.0, .p90: 15.0]),
            .wallClock: .init(relative: [.p50: 100.0, .p90: 100.0]),
            .peakMemoryResident: .init(relative: [.p90: 50.0]),
        ]
    )

    Benchmark("append-batch-1000-inbox-syncs-durability-none") { benchmark in
        let f = try fixture("batch", durability: .none)
        var i = 0
        let batches = (0..<4).map { b in (0..<1000).map { inboxDelta(b * 1000 + $0) } }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try f.ledger.append(AppendRequest(batches[i % 4])))
            i += 1
        }
    }

    // The typed path an app calls (validated on its fields, encoded once); mallocs ÷ 1,000 is
    // the allocations per event (docs/benchmarks.md).
    Benchmark("append-batch-1000-typed-inbox-syncs-durability-none") { benchmark in
        let f = try fixture("batch-typed", durability: .none)
        var i = 0
        let batches = (0..<4).map { b in (0..<1000).map { typedDelta(b * 1000 + $0) } }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try f.ledger.append(AppendRequest(batches[i % 4])))
            i += 1
        }
    }

    // A fixed number of batches: the peak resident memory grows with the file (pages touched),
    // so a faster machine (more iterations in the time limit) must not read as a regression.
    var bounded = Benchmark.defaultConfiguration
    bounded.maxIterations = 200
    bounded.maxDuration = .seconds(30)
    Benchmark("append-batch-1000-custom-events-envelope-only", configuration: bounded) { benchmark in
        let f = try fixture("batch-custom", durability: .none)
        let batch = (0..<1000).map { i in NewEvent(type: "app.custom", payload: inboxDelta(i).payload) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try f.ledger.append(contentsOf: batch))
        }
    }

    Benchmark("validate-inbox-synced-payload") { benchmark in
        let event = inboxDelta(7)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try DomainEvent.decode(type: event.type, payload: event.payload))
        }
    }

    // The ledger's own JSON codec against Foundation's, on a task event and a task row: each
    // iteration decodes (or encodes) both. Foundation's encode is what CanonicalJSON.encode did
    // before (JSONEncoder, then canonicalised); its row encode what rows were stored as
    // (JSONEncoder with sorted keys).
    let codecAdded = CodecTaskAdded(id: "t42", title: "Buy milk", day: 20250)
    let codecRow = CodecTaskRow(title: "Buy milk", day: 20250, done: false)
    Benchmark("json-decode-task-event-and-row-foundation") { benchmark in
        let event = Data(try CanonicalJSON.encode(codecAdded)), row = Data(try CanonicalJSON.encode(codecRow))
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try JSONDecoder().decode(CodecTaskAdded.self, from: event))
            blackHole(try JSONDecoder().decode(CodecTaskRow.self, from: row))
        }
    }

    Benchmark("json-decode-task-event-and-row") { benchmark in
        let event = try codecEvent(codecAdded), row = try codecEvent(codecRow)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try event.decode(as: CodecTaskAdded.self))
            blackHole(try row.decode(as: CodecTaskRow.self))
        }
    }

    Benchmark("json-encode-task-event-and-row-foundation") { benchmark in
        let sorted = JSONEncoder()
        sorted.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try CanonicalJSON.canonicalize(Array(try JSONEncoder().encode(codecAdded))))
            blackHole(Array(try sorted.encode(codecRow)))
        }
    }

    Benchmark("json-encode-task-event-and-row") { benchmark in
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try CanonicalJSON.encode(codecAdded))
            blackHole(try CanonicalJSON.encode(codecRow))
        }
    }

    Benchmark("append-batch-1000-inbox-syncs-durable") { benchmark in
        let f = try fixture("batch-durable", durability: .durable)
        let batch = (0..<1000).map { inboxDelta($0) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try f.ledger.append(contentsOf: batch))
        }
    }

    // fsync-bound: its wall time follows the virtual disk (2–3× between runs).
    Benchmark("append-single-durable-1-thread", configuration: .init(thresholds: [
        .mallocCountTotal: .init(relative: [.p50: 5.0, .p90: 15.0]),
        .wallClock: .init(relative: [.p50: 300.0, .p90: 300.0]),
        .peakMemoryResident: .init(relative: [.p90: 50.0]),
    ])) { benchmark in
        let f = try fixture("single", durability: .durable)
        let event = inboxDelta(1)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try f.ledger.append(event))
        }
    }

    Benchmark(
        "append-single-durable-8-threads-x25",
        // fsync-bound with eight threads: 3× between runs minutes apart on the CI VM.
        configuration: .init(metrics: [.wallClock], maxDuration: .seconds(3), thresholds: [.wallClock: .init(relative: [.p50: 400.0, .p90: 400.0])])
    ) { benchmark in
        let f = try fixture("single8", durability: .durable)
        let event = inboxDelta(2)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            let group = DispatchGroup()
            for _ in 0..<8 {
                group.enter()
                Thread.detachNewThread {
                    for _ in 0..<25 { _ = try? f.ledger.append(event) }
                    group.leave()
                }
            }
            group.wait()
        }
    }

    /// A realistic inbox: 200 messages, some read, a few pending actions and badge deltas.
    func widgetFixture() throws -> Fixture {
        let f = try fixture("widget", durability: .none)
        if try f.ledger.read({ try $0.head() }) == 0 {
            try f.ledger.append(contentsOf: (0..<200).map { inboxDelta($0) })
            for i in stride(from: 0, to: 200, by: 3) {
                try f.ledger.append(.messageRead(ReadChange(ids: ["msg-\(i)"], read: true)))
            }
            for i in 0..<5 {
                try f.ledger.append(.widgetAction(WidgetAction(actionID: "a\(i)", kind: .markTaskDone, target: "task-\(i)")))
            }
            try f.ledger.append(.badgeAdjusted(.delta(2)))
        }
        return f
    }

    // Nothing changed since the last read: the kept list, checked with one key read.
    Benchmark("widget-read-warm-kept-list") { benchmark in
        let f = try widgetFixture()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try f.ledger.read({ try $0.widgetList(limit: 10) }))
        }
    }

    // What an app pays to come back from the background: suspend (close every environment),
    // resume, and the first widget read, which reopens the files (docs/operations.md).
    Benchmark("suspend-resume-then-widget-read") { benchmark in
        let f = try widgetFixture()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try Ledger.suspend()
            Ledger.resume()
            blackHole(try f.ledger.read({ try $0.widgetList(limit: 10) }))
        }
    }

    // Every read decodes its rows (alternating limits never match the kept list): the cost
    // of the first read after a change. The alternation lives outside the closure, which runs
    // once per sample.
    Benchmark("widget-read-rows-decoded") { benchmark in
        let f = try widgetFixture()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            let limit = 10 + widgetReads.wrappingAdd(1, ordering: .relaxed).oldValue % 2
            blackHole(try f.ledger.read({ try $0.widgetList(limit: limit) }))
        }
    }

    Benchmark("hasChanged-since-check") { benchmark in
        let f = try fixture("version", durability: .none)
        try f.ledger.append(inboxDelta(1))
        let version = try f.ledger.read({ try $0.widgetVersion() })
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try f.ledger.read({ try $0.widgetVersion() }) != version)
        }
    }

    Benchmark("range-read-1000-events") { benchmark in
        let f = try fixture("read", durability: .none, preload: 100_000)
        var after: UInt64 = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try f.ledger.read({ try $0.events(after: after, limit: 1000) }))
            after = (after + 7919) % 99_000
        }
    }
}
