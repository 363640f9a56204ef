// The nine workloads. Each repetition runs every system once, interleaved, on the same data.
import Foundation
@_spi(LedgerSync) import InboxLedger
import LedgerBenchSupport

/// Sizes of a run: the full run, or `--quick` (every workload briefly, for CI).
struct Sizes {
    var repetitions = 3
    var batches = 10              // W1: batches of 1,000 per repetition
    var singleAppends = 400       // W2: appends per repetition, 1 thread
    var threadAppends = 50        // W2: appends per thread per repetition, 8 threads
    var processBatches = 5        // W3: batches of 1,000 per process
    var widgetReads = 20_000      // W4: reads per repetition (at most 1 s of them)
    var coldStarts = 10           // W5: processes per repetition
    var catchUpEvents = 1_000_000 // W6 and W7: events in the log
    var notifications = 200       // W8: round trips
    var idleSeconds = 10.0        // W8: idle window
    var taskLogEvents = 100_000   // W9-R and W9-C: task events in the log
    var buildEvents = 200_000     // W9-U and W9-O: task events a build of the projection reads
    var behindEvents = 40_000     // W9-L: task events a read is behind

    static let quick = Sizes(repetitions: 1, batches: 2, singleAppends: 20, threadAppends: 4, processBatches: 1,
                             widgetReads: 500, coldStarts: 2, catchUpEvents: 20_000, notifications: 20, idleSeconds: 1,
                             taskLogEvents: 2_000, buildEvents: 5_000, behindEvents: 4_000)
}

/// What one repetition of a workload observed for one system.
struct Observation {
    var opsPerSecond: Double?
    var latencies: [Double] = []
    var peakRSSBytes: Int?
    var cpuPercent: Double?
    var seconds: Double?
    /// W2-1: bytes the process handed to write(2)/pwrite(2) per operation (`wchar` of
    /// /proc/self/io): the pages a single-event commit writes, log and meta page included.
    var writtenBytesPerOp: Double?
}

/// Bytes this process has passed to write-like system calls (`wchar` in /proc/self/io), or nil
/// where there is no such file.
func processWrittenBytes() -> Double? {
    guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix("wchar:") {
        return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
    }
    return nil
}

struct Workload {
    var id: String
    var title: String
    var systems: [SystemKind]
    /// The row the "vs" column compares with (the ledger unless said).
    var baseline: SystemKind = .ledger
    /// Fewer repetitions than the run's, for workloads that must rebuild a large store each time.
    var maxRepetitions: Int? = nil
    /// Runs once per system before the repetitions, outside timing (loading data).
    var prepare: ((SystemKind, Bench) throws -> Void)? = nil
    var run: (SystemKind, Int, Bench) throws -> Observation
}

/// State shared by the workloads of one run: the scratch directory and the sizes.
final class Bench {
    let root: String
    let sizes: Sizes

    private var loaded: Set<String> = []
    /// W9-C: the keys the first cold reader found (every reader must find the same).
    var coldTaskKeys: String?

    init(root: String, sizes: Sizes) {
        self.root = root
        self.sizes = sizes
    }

    /// The store of `system` in `directory`, loaded once per run with `count` deltas.
    func loadedStore(_ system: SystemKind, _ directory: String, count: Int) throws -> Store {
        let store = try openStore(system, directory: directory)
        if loaded.insert(directory).inserted { try load(store, count: count) }
        return store
    }

    func directory(_ workload: String, _ system: SystemKind) -> String { "\(root)/\(workload)-\(system.rawValue)" }

    /// Loads `count` deltas (starting at delta `offset`) in batches of 1,000.
    func load(_ store: Store, count: Int, offset: Int = 0) throws {
        var done = 0
        while done < count {
            let n = min(1000, count - done)
            try store.appendBatch(Inbox.deltas(offset + done..<offset + done + n)[...])
            done += n
        }
    }

    static let allWriters: [SystemKind] = [.ledger, .ledgerJSON, .lmdbSameJob, .lmdb, .sqliteFull, .sqliteNormal, .rewrite]
    static let logs: [SystemKind] = [.ledger, .lmdb, .sqliteFull]

    lazy var workloads: [Workload] = [w1, w2Single, w2Threads, w2Callers, w3, w4, w5, w6, w7, w8, w9Single, w9Batch, w9Read, w9Cold, w9Opening, w9Build, w9Behind, w10Settled, w10Pending]

    // W1: batches of 1,000 inbox-sync deltas, projections included.
    var w1: Workload {
        Workload(id: "W1", title: "batched append: 1,000 inbox-sync deltas a transaction", systems: Bench.allWriters) { system, rep, bench in
            let store = try openStore(system, directory: bench.directory("w1", system))
            let base = rep * (bench.sizes.batches + 1) * 1000
            try store.appendBatch(Inbox.deltas(base..<base + 1000)[...])  // warm-up, untimed
            let batches = (1...bench.sizes.batches).map { b in Inbox.deltas(base + b * 1000..<base + (b + 1) * 1000) }
            var latencies: [Double] = []
            for batch in batches { latencies.append(try timeMicros { try store.appendBatch(batch[...]) }) }
            let total = latencies.reduce(0, +)
            return Observation(opsPerSecond: Double(batches.count * 1000) / (total / 1e6), latencies: latencies)
        }
    }

    // W2: one delta per durable transaction, one thread.
    var w2Single: Workload {
        Workload(id: "W2-1", title: "single-event durable append, 1 thread",
                 systems: [.ledger, .ledgerJSON, .ledgerSingleSync, .lmdbSameJob, .lmdb, .sqliteFull, .sqliteNormal, .rewrite]) { system, rep, bench in
            let store = try openStore(system, directory: bench.directory("w2", system))
            let n = bench.sizes.singleAppends
            let deltas = Inbox.deltas(rep * n..<(rep + 1) * n)
            try store.appendOne(deltas[0])  // warm-up
            var latencies: [Double] = []
            let writtenBefore = processWrittenBytes()
            for delta in deltas.dropFirst() { latencies.append(try timeMicros { try store.appendOne(delta) }) }
            var written: Double?
            if let before = writtenBefore, let after = processWrittenBytes() { written = (after - before) / Double(latencies.count) }
            return Observation(opsPerSecond: Double(latencies.count) / (latencies.reduce(0, +) / 1e6), latencies: latencies,
                               writtenBytesPerOp: written)
        }
    }

    // W2: one delta per durable transaction, 8 threads of one process (the ledger's group commit).
    var w2Threads: Workload {
        Workload(id: "W2-8", title: "single-event durable append, 8 threads in one process",
                 systems: [.ledger, .ledgerJSON, .ledgerSingleSync, .lmdbSameJob, .lmdb, .sqliteFull, .sqliteNormal, .rewrite]) { system, rep, bench in
            let store = try openStore(system, directory: bench.directory("w2x8", system))
            let perThread = bench.sizes.threadAppends
            let handles = try (0..<8).map { _ in try store.handleForAnotherThread() }
            let shared = Handles(handles)
            let samples = Samples()
            let t0 = monotonicNanos()
            try onThreads(8) { t in
                let base = (rep * 8 + t) * perThread
                var mine: [Double] = []
                for delta in Inbox.deltas(base..<base + perThread) {
                    mine.append(try timeMicros { try shared.stores[t].appendOne(delta) })
                }
                samples.add(mine)
            }
            let seconds = Double(monotonicNanos() - t0) / 1e9
            return Observation(opsPerSecond: Double(8 * perThread) / seconds, latencies: samples.all)
        }
    }

    // W2-64: 64 concurrent callers of one process, one event a call: threads on the blocking
    // API against tasks on the async one (which must not cost throughput for not blocking).
    var w2Callers: Workload {
        Workload(id: "W2-64", title: "single-event durable append, 64 concurrent callers: threads (blocking API) vs tasks (async API)",
                 systems: [.ledger, .ledgerAsync]) { system, rep, bench in
            let store = try openStore(system, directory: bench.directory("w2x64", system))
            let perCaller = max(1, bench.sizes.threadAppends / 4)
            let batches = (0..<64).map { c in Inbox.deltas(((rep * 64 + c) * perCaller)..<((rep * 64 + c + 1) * perCaller)) }
            let t0 = monotonicNanos()
            var latencies: [Double]
            if system == .ledgerAsync {
                latencies = try appendFromTasks(store, perCaller: batches.map { Array($0) })
            } else {
                let handles = Handles(try (0..<64).map { _ in try store.handleForAnotherThread() })
                let samples = Samples()
                try onThreads(64) { t in
                    var mine: [Double] = []
                    for delta in batches[t] { mine.append(try timeMicros { try handles.stores[t].appendOne(delta) }) }
                    samples.add(mine)
                }
                latencies = samples.all
            }
            let seconds = Double(monotonicNanos() - t0) / 1e9
            return Observation(opsPerSecond: Double(64 * perCaller) / seconds, latencies: latencies)
        }
    }

    // W3: four processes appending batches at once.
    var w3: Workload {
        Workload(id: "W3", title: "4 processes appending batches of 1,000 at once (aggregate; p99 of each process's batches)",
                 systems: Bench.allWriters) { system, rep, bench in
            let directory = bench.directory("w3", system)
            _ = try openStore(system, directory: directory)  // create before the children race
            let perProcess = bench.sizes.processBatches * 1000
            let children = try (0..<4).map { p in
                try Child(["_child", "w3", system.rawValue, directory, String((rep * 4 + p) * perProcess), String(perProcess)])
            }
            for child in children where child.readLine() != "ready" { throw BenchFailure("a W3 child did not start") }
            let t0 = monotonicNanos()
            for child in children { child.send("go") }
            var p99s: [Double] = []
            for child in children {
                guard let line = child.readLine(), let p99 = Double(line) else { throw BenchFailure("a W3 child failed") }
                p99s.append(p99)
            }
            let seconds = Double(monotonicNanos() - t0) / 1e9
            for child in children where try child.wait() != 0 { throw BenchFailure("a W3 child exited with an error") }
            // Latency column: the worst of the four processes' p99 batch latencies.
            return Observation(opsPerSecond: Double(4 * perProcess) / seconds, latencies: p99s)
        }
    }

    // W4: the widget's read, warm: top 10 rows and the badge.
    var w4: Workload {
        Workload(id: "W4", title: "widget read, warm: top 10 rows + badge (p50/p99 per read)",
                 systems: [.ledger, .lmdb, .sqliteFull, .rewrite],
                 prepare: { system, bench in _ = try bench.loadedStore(system, bench.directory("widget", system), count: 5_000) }
        ) { system, _, bench in
            let store = try openStore(system, directory: bench.directory("widget", system))
            _ = try store.readWidget()
            var latencies: [Double] = []
            latencies.reserveCapacity(bench.sizes.widgetReads)
            let deadline = monotonicNanos() + 1_000_000_000
            while latencies.count < bench.sizes.widgetReads, monotonicNanos() < deadline {
                let t0 = monotonicNanos()
                let rows = try store.readWidget()
                latencies.append(Double(monotonicNanos() - t0) / 1000)
                if rows != 10 { throw BenchFailure("\(system.rawValue) read \(rows) widget rows, expected 10") }
            }
            return Observation(opsPerSecond: Double(latencies.count) / (latencies.reduce(0, +) / 1e6), latencies: latencies)
        }
    }

    // W5: a new process opens the store, reads the widget list and badge, exits.
    var w5: Workload {
        Workload(id: "W5", title: "cold widget read: a new process opens, reads top 10 + badge, exits",
                 systems: [.ledger, .lmdb, .sqliteFull, .rewrite],
                 prepare: { system, bench in _ = try bench.loadedStore(system, bench.directory("widget", system), count: 5_000) }
        ) { system, _, bench in
            var latencies: [Double] = []
            var peak = 0
            for _ in 0..<bench.sizes.coldStarts {
                let t0 = monotonicNanos()
                let child = try Child([system.rawValue, bench.directory("widget", system)], executable: coldReaderPath())
                let rss = child.readLine().flatMap { Int($0) }
                let status = try child.wait()
                latencies.append(Double(monotonicNanos() - t0) / 1000)
                guard status == 0, let rss else { throw BenchFailure("a W5 child exited with \(status)") }
                peak = max(peak, rss)
            }
            return Observation(latencies: latencies, peakRSSBytes: peak)
        }
    }

    // W6: a consumer catching up on the whole log from its cursor.
    var w6: Workload {
        Workload(id: "W6", title: "catch-up: a consumer reads the log from its cursor (pages of 10,000, cursor saved per page)",
                 systems: Bench.logs,
                 prepare: { system, bench in _ = try bench.loadedStore(system, bench.directory("log", system), count: bench.sizes.catchUpEvents) }
        ) { system, rep, bench in
            let store = try openStore(system, directory: bench.directory("log", system))
            var read = 0
            let micros = try timeMicros { read = try store.catchUp(consumer: "catch-up-\(rep)", pageSize: 10_000) }
            guard read == bench.sizes.catchUpEvents else {
                throw BenchFailure("\(system.rawValue) caught up on \(read) events, expected \(bench.sizes.catchUpEvents)")
            }
            return Observation(opsPerSecond: Double(read) / (micros / 1e6))
        }
    }

    // W7: compaction of the W6 log (all but the last 1,000 events) with a durable writer meanwhile
    // (one append, then 0.5 ms of rest, repeatedly).
    // One repetition: it consumes the log (re-loading a million events per repetition would
    // dominate the run).
    var w7: Workload {
        Workload(id: "W7", title: "compaction of the log to its last 1,000 events; a concurrent durable writer's latency",
                 systems: Bench.logs, maxRepetitions: 1) { system, _, bench in
            let directory = bench.directory("log", system)
            let store = try bench.loadedStore(system, directory, count: bench.sizes.catchUpEvents)
            let writer = try store.handleForAnotherThread()
            let stop = StopFlag()
            let samples = Samples()
            let done = DispatchGroup()
            done.enter()
            let writerBox = Handles([writer])
            Thread.detachNewThread {
                var mine: [Double] = []
                var i = 10_000_000
                while !stop.isSet {
                    let delta = Inbox.delta(i)
                    if let micros = try? timeMicros({ try writerBox.stores[0].appendOne(delta) }) { mine.append(micros) }
                    i += 1
                    usleep(500)  // a busy app, not a saturating loop (which starves anyone behind an unfair lock)
                }
                samples.add(mine)
                done.leave()
            }
            usleep(100_000)
            var trimmed = 0
            let micros = try timeMicros { trimmed = try store.trim(keepingLast: 1_000, chunk: 1_000) }
            stop.set()
            done.wait()
            return Observation(opsPerSecond: Double(trimmed) / (micros / 1e6), latencies: samples.all, seconds: micros / 1e6)
        }
    }

    // W8: commit in this process, wake-up in another; then the waiter's CPU while nothing happens.
    var w8: Workload {
        Workload(id: "W8", title: "change notification: append here → wake-up in another process; idle waiter's CPU",
                 systems: [.ledger]) { system, _, bench in
            let directory = bench.directory("w8", system)
            let store = try openStore(system, directory: directory)
            try store.appendOne(Inbox.delta(0))
            let waiter = try Child(["_child", "w8", directory, String(bench.sizes.notifications), String(bench.sizes.idleSeconds)])
            guard waiter.readLine() == "ready" else { throw BenchFailure("the W8 waiter did not start") }
            var latencies: [Double] = []
            for i in 1...bench.sizes.notifications {
                let t0 = monotonicNanos()
                try store.appendOne(Inbox.delta(i))
                guard let line = waiter.readLine(), let woke = UInt64(line) else { throw BenchFailure("the W8 waiter stopped") }
                latencies.append(Double(Int64(bitPattern: woke &- t0)) / 1000)
            }
            guard let line = waiter.readLine(), let cpuMicros = Double(line) else { throw BenchFailure("no idle CPU from the W8 waiter") }
            guard try waiter.wait() == 0 else { throw BenchFailure("the W8 waiter failed") }
            return Observation(latencies: latencies, cpuPercent: cpuMicros / (bench.sizes.idleSeconds * 1e6) * 100)
        }
    }
}

// MARK: - W9: an app's own projection (issue 28)

extension Bench {
    /// The W9 task ledger: `ledger` without an app projection, `ledger+projection` with the
    /// task list registered (`TaskList`, one row per task).
    func taskLedger(_ system: SystemKind, _ workload: String) throws -> Ledger {
        try openTaskLedger(directory(workload, system), projection: system == .ledgerProjection)
    }

    /// Appends events `range` of ``TaskLog`` to `ledger` in batches of 1,000.
    func appendTaskLog(_ ledger: Ledger, _ range: Range<Int>) throws {
        var done = range.lowerBound
        while done < range.upperBound {
            let n = min(1000, range.upperBound - done)
            _ = try ledger.append(contentsOf: try (done..<done + n).map(TaskLog.event))
            done += n
        }
    }

    /// The log of W9-R and W9-C: `taskLogEvents` task events appended with the projection
    /// registered (batches of 1,000), loaded once per run.
    func loadedTaskLog() throws -> String {
        let path = directory("w9-log", .ledgerProjection)
        let ledger = try openTaskLedger(path, projection: true)
        if try ledger.read({ try $0.head() }) == 0 { try appendTaskLog(ledger, 0..<sizes.taskLogEvents) }
        return path
    }

    // W9-1: one new task a durable transaction, without and with the projection (one new row per event).
    var w9Single: Workload {
        Workload(id: "W9-1", title: "app projection: single-event durable append of a new task, without / with the task projection",
                 systems: [.ledger, .ledgerProjection]) { system, rep, bench in
            let ledger = try bench.taskLedger(system, "w9-1")
            let n = bench.sizes.singleAppends
            let tasks = (rep * n..<(rep + 1) * n).map(TaskLog.added)
            try ledger.append(tasks[0])  // warm-up
            var latencies: [Double] = []
            for task in tasks.dropFirst() { latencies.append(try timeMicros { try ledger.append(task) }) }
            return Observation(opsPerSecond: Double(latencies.count) / (latencies.reduce(0, +) / 1e6), latencies: latencies)
        }
    }

    // W9-B: batches of 1,000 new tasks, without and with the projection.
    var w9Batch: Workload {
        Workload(id: "W9-B", title: "app projection: batched append, 1,000 new tasks a transaction, without / with the task projection",
                 systems: [.ledger, .ledgerProjection]) { system, rep, bench in
            let ledger = try bench.taskLedger(system, "w9-b")
            let base = rep * (bench.sizes.batches + 1) * 1000
            let batches = (0...bench.sizes.batches).map { b in (base + b * 1000..<base + (b + 1) * 1000).map(TaskLog.added) }
            _ = try ledger.append(contentsOf: try batches[0].map { try NewEvent($0) })  // warm-up, untimed
            var latencies: [Double] = []
            for batch in batches.dropFirst() {
                // What an app calls: its typed events encoded and appended in one transaction.
                latencies.append(try timeMicros { _ = try ledger.append(contentsOf: try batch.map { try NewEvent($0) }) })
            }
            return Observation(opsPerSecond: Double((batches.count - 1) * 1000) / (latencies.reduce(0, +) / 1e6), latencies: latencies)
        }
    }

    // W9-R: warm reads of the task projection at `taskLogEvents` events: one row by key, the
    // document and first 10 rows; beside the built-in widget read (W4's) for reference.
    var w9Read: Workload {
        Workload(id: "W9-R", title: "app projection, warm reads: one row (projectionRow), top 10 (projectionContents); ledger = W4's widget read",
                 systems: [.ledger, .projectionRow, .projectionTop10],
                 prepare: { system, bench in
                     if system == .ledger {
                         _ = try bench.loadedStore(.ledger, bench.directory("widget", .ledger), count: 5_000)
                     } else {
                         _ = try bench.loadedTaskLog()
                     }
                 }
        ) { system, _, bench in
            var read: () throws -> Void
            switch system {
            case .ledger:
                let store = try openStore(.ledger, directory: bench.directory("widget", .ledger))
                read = { if try store.readWidget() != 10 { throw BenchFailure("ledger read a short widget list") } }
            case .projectionRow:
                let ledger = try openTaskLedger(try bench.loadedTaskLog(), projection: true)
                let keys = TaskLog.liveKeys(count: bench.sizes.taskLogEvents, limit: 1000)
                var next = 0
                read = {
                    next = (next + 1) % keys.count
                    if try ledger.read({ try $0.projection(TaskList.self).row(keys[next]) }) == nil { throw BenchFailure("task \(keys[next]) has no row") }
                }
            default:
                let ledger = try openTaskLedger(try bench.loadedTaskLog(), projection: true)
                read = { if try ledger.read({ try $0.projection(TaskList.self).contents(limit: 10) }).rows.count != 10 { throw BenchFailure("short task list") } }
            }
            try read()
            var latencies: [Double] = []
            latencies.reserveCapacity(bench.sizes.widgetReads)
            let deadline = monotonicNanos() + 1_000_000_000
            while latencies.count < bench.sizes.widgetReads, monotonicNanos() < deadline {
                let t0 = monotonicNanos()
                try read()
                latencies.append(Double(monotonicNanos() - t0) / 1000)
            }
            return Observation(opsPerSecond: Double(latencies.count) / (latencies.reduce(0, +) / 1e6), latencies: latencies)
        }
    }

    // W9-C: a new process opens the ledger and reads the first 10 rows of the task list: from
    // the app projection, or by folding the whole log at launch. Both must find the same rows.
    var w9Cold: Workload {
        Workload(id: "W9-C", title: "app projection, cold widget process: open, first 10 tasks, exit; vs folding the log at launch",
                 systems: [.ledgerProjection, .ledgerFoldLog], baseline: .ledgerProjection,
                 prepare: { _, bench in _ = try bench.loadedTaskLog() }
        ) { system, _, bench in
            try bench.coldChildren(system, path: try bench.loadedTaskLog(), workload: "W9-C") { keys in
                if let expected = bench.coldTaskKeys, expected != keys {
                    throw BenchFailure("W9-C: \(system.rawValue) read [\(keys)], another system read [\(expected)]")
                }
                bench.coldTaskKeys = keys
            }
        }
    }
}

// MARK: - W9 upgrades and catch-up (issue 38)

extension Bench {
    /// `coldStarts` `ledger-bench-cold SYSTEM PATH` processes, one after the other: wall time
    /// spawn → exit, peak RSS (its first line), its second line checked by `check`.
    func coldChildren(_ system: SystemKind, path: String, workload: String, check: (String) throws -> Void) throws -> Observation {
        var latencies: [Double] = []
        var peak = 0
        for _ in 0..<sizes.coldStarts {
            let t0 = monotonicNanos()
            let child = try Child([system.rawValue, path], executable: coldReaderPath())
            let rss = child.readLine().flatMap { Int($0) }
            let line = child.readLine()
            let status = try child.wait()
            latencies.append(Double(monotonicNanos() - t0) / 1000)
            guard status == 0, let rss, let line else { throw BenchFailure("a \(workload) child exited with \(status)") }
            try check(line)
            peak = max(peak, rss)
        }
        return Observation(latencies: latencies, peakRSSBytes: peak)
    }

    /// The log of W9-O and W9-U: `buildEvents` task events appended without the projection,
    /// loaded once per run; the projection's stored state dropped, so that its build is due.
    func taskLogToBuild() throws -> String {
        let path = directory("w9-build", .ledgerProjection)
        let plain = try openTaskLedger(path, projection: false)
        if try plain.read({ try $0.head() }) == 0 { try appendTaskLog(plain, 0..<sizes.buildEvents) }
        try plain.projections.drop(named: TaskList.name)
        return path
    }

    // W9-O: a cold widget process opens writable while a 200,000-event build is due (vs W5).
    var w9Opening: Workload {
        Workload(id: "W9-O", title: "app projection, cold widget process opening writable while a 200,000-event build is due (vs W5's cold launch)",
                 systems: [.ledgerBuildDue], baseline: .ledgerBuildDue,
                 prepare: { _, bench in _ = try bench.taskLogToBuild() }
        ) { system, _, bench in
            try bench.coldChildren(system, path: try bench.taskLogToBuild(), workload: "W9-O") { state in
                guard state == "building" || state == "ready" else { throw BenchFailure("W9-O: a child read '\(state)'") }
            }
        }
    }

    // W9-U: the build of the task projection over `buildEvents` events, wall time, no other writer.
    var w9Build: Workload {
        Workload(id: "W9-U", title: "app projection: build of a new version over 200,000 events (ledger.projections.build(), wall time)",
                 systems: [.ledgerProjection], maxRepetitions: 2,
                 prepare: { _, bench in _ = try bench.taskLogToBuild() }
        ) { _, _, bench in
            let path = try bench.taskLogToBuild()  // dropped again: the whole build is due
            let ledger = try openTaskLedger(path, projection: true, builds: .whenAsked)
            let micros = try timeMicros { try ledger.projections.build() }
            guard try ledger.read({ try $0.projection(TaskList.self).contents(limit: 1) }).head == UInt64(bench.sizes.buildEvents) else {
                throw BenchFailure("W9-U: the build did not reach the head")
            }
            return Observation(opsPerSecond: Double(bench.sizes.buildEvents) / (micros / 1e6), latencies: [micros], seconds: micros / 1e6)
        }
    }

    // W10-0: a page of 1,000 feed entries, nothing pending (the rebase's baseline).
    var w10Settled: Workload {
        Workload(id: "W10-0", title: "custom events from the feed: a page of 1,000 entries, nothing pending (append latency)",
                 systems: [.ledgerProjection], baseline: .ledgerProjection) { _, repetition, bench in
            try bench.feedPage(pending: 0, repetition: repetition)
        }
    }

    // W10-P: the same page on a device with 100 pending shared events of its own (the rebase).
    var w10Pending: Workload {
        Workload(id: "W10-P", title: "custom events from the feed: a page of 1,000 entries over 100 pending own events (append latency, rebase included)",
                 systems: [.ledgerProjection], baseline: .ledgerProjection) { _, repetition, bench in
            try bench.feedPage(pending: 100, repetition: repetition)
        }
    }

    // W9-L: a read-only widget's read of the task list `behindEvents` events behind (appended by
    // a process without the projection; no registered writer since): bounded at 1,000 replays.
    var w9Behind: Workload {
        Workload(id: "W9-L", title: "app projection, read-only widget read 40,000 events behind (projectionContents(limit: 5))",
                 systems: [.projectionBehind], baseline: .projectionBehind,
                 prepare: { _, bench in
                     let path = bench.directory("w9-behind", .projectionBehind)
                     let app = try openTaskLedger(path, projection: true, builds: .whenAsked)
                     guard try app.read({ try $0.head() }) == 0 else { return }
                     _ = try app.append(contentsOf: try (0..<1000).map(TaskLog.event))
                     let plain = try openTaskLedger(path, projection: false)
                     try bench.appendTaskLog(plain, 1000..<1000 + bench.sizes.behindEvents)
                 }
        ) { system, _, bench in
            let widget = try openTaskLedger(bench.directory("w9-behind", system), projection: true, role: "widget", readOnly: true)
            let read = { try widget.read({ try $0.projection(TaskList.self).contents(limit: 5) }) }
            guard try read().behind > 0 else { throw BenchFailure("W9-L: the read is not behind") }
            var latencies: [Double] = []
            for _ in 0..<50 { latencies.append(try timeMicros { _ = try read() }) }
            return Observation(opsPerSecond: Double(latencies.count) / (latencies.reduce(0, +) / 1e6), latencies: latencies)
        }
    }
}

extension Bench {
    /// W10: one page of 1,000 feed entries (other devices' tasks, `NewEvent.fromFeed`, what the
    /// sync client appends) on a device whose task list has `pending` shared events of its own
    /// not placed yet: the append's latency, which includes the rebase (docs/semantics.md,
    /// "Custom events on every device"). A fresh ledger per page; 20 pages a repetition.
    func feedPage(pending: Int, repetition: Int) throws -> Observation {
        let pages = 20, entries = 1_000
        var latencies: [Double] = []
        for page in 0..<pages {
            let path = directory("w10-\(pending)-\(repetition)-\(page)", .ledgerProjection)
            try? FileManager.default.removeItem(atPath: path)
            let ledger = try openTaskLedger(path, projection: true)
            try ledger.shareEventTypes([TaskAdded.eventType, TaskDone.eventType, TaskRemoved.eventType])
            // This device's own pending events: tasks added, some of them ticked (their rows
            // are among those the feed's entries change).
            _ = try ledger.append(contentsOf: try (0..<pending).map { i in
                i % 4 == 3 ? try NewEvent(TaskDone(id: "task-\(i - 3)")) : try NewEvent(TaskLog.added(i))
            })
            let feed = try (0..<entries).map { i -> NewEvent in
                let event = try TaskLog.event(i)
                return NewEvent.fromFeed(type: event.type, payload: event.payload, key: "sync-down-bench-\(i + 1)", time: 1_795_000_000_000_000 + Int64(i),
                                         role: "tablet", origin: FeedOrigin(ledger: "other-device", sequence: UInt64(i + 1), key: nil, position: UInt64(i + 1)))
            }
            latencies.append(try timeMicros { _ = try ledger.append(AppendRequest(feed)) })
            let rows = try ledger.read { try $0.projection(TaskList.self).contents(limit: 1) }
            guard rows.head == UInt64(pending + entries) else { throw BenchFailure("W10: the projection did not apply the page") }
        }
        return Observation(opsPerSecond: Double(pages * entries) / (latencies.reduce(0, +) / 1e6), latencies: latencies)
    }
}

/// Stores handed to other threads. @unchecked Sendable: each thread uses its own element (or a
/// store that is safe to share: the ledger, raw LMDB with MDB_NOTLS, the rewrite's file lock).
final class Handles: @unchecked Sendable {
    let stores: [Store]
    init(_ stores: [Store]) { self.stores = stores }
}

final class StopFlag: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var value = false
    func set() { lock.lock(); value = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}
