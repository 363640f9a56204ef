// ledger-crash-states: power-cut exploration (docs/reliability.md, "Power loss").
//
//   ledger-crash-states [--quick] [--cuts N] [--subsets N] [--seed N] [--scenarios a,b] [--directory PATH]
//
// Runs each scenario's processes with the LD_PRELOAD recorder (CIORecorder), which
// logs, in order, every write, sync and truncation they make to data.mdb and every
// acknowledgement they write. Then, for cut points along that log, builds the files a power
// cut could leave — everything up to the last completed sync, every O_DSYNC write, and a
// subset or prefix of the writes since (page by page) — and checks each in a child process:
// it opens (or gets a typed error, never a signal or a hang), verify passes, every event a
// durable writer had acknowledged before the cut is present exactly once at its sequence
// (and so is everything committed before it: LMDB's history is linear), no batch is partial,
// and the counters by type and origin equal the log's.
// Exit status 0 when every state passed.
import ArgumentParser
import Foundation
import InboxLedger
import Synchronization
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Scenarios

/// How a writer appends. `plain` appends new events; the others append the shared keyed events
/// (`Writer.keyed`) through a call that answers from what is already stored when another
/// process wrote them first — what a durable acknowledgement must still hold for (docs/lmdb.md
/// rule 30).
enum AppendPath: String {
    /// `append(contentsOf:)` (synchronous).
    case plain
    /// `append(contentsOf:expectingHead:)` at the current head: a conditional append that finds its events.
    case conditional
    /// `await append(contentsOf:)`: the async API, the sync client's downlink call.
    case async
    /// A consumer reads the batch and commits its cursor over it (`Consumer.commit`).
    case consumer
}

/// A process of a scenario: `threads` handles appending `batches` batches each with `mode`.
struct Writer {
    var role: String
    var mode: LedgerDurability
    var batches: Int
    var threads = 1
    var pad = 0
    /// Appends the scenario's keyed events (`keyed-BATCH-INDEX`, the same content in every
    /// writer that has it), acknowledged under the role "keyed".
    var keyed = false
    var path: AppendPath = .plain
    /// Starts once the writer of this role has exited (and so has committed everything).
    var after: String? = nil
}

struct Scenario {
    var name: String
    var writers: [Writer]
    var initialMap: Int? = nil
    /// Run a compaction (tail 10, chunks of 20) while the writers write.
    var compacts = false
    /// What `data.mdb` holds before the scenario starts (nil: no file): a creation a power cut
    /// interrupted earlier, which the first writer finishes (empties, then creates).
    var initialData: [UInt8]? = nil
    /// Start from a format-1 ledger (`initialData` is then ignored): the first writable opening
    /// upgrades it to format 3 while the writers append (docs/format.md, "Format versions").
    var fromFormatOne = false
    /// The durability floor the ledger is created with (nil: the default, `singleSync`).
    var floor: LedgerDurability? = nil
    /// Not part of the promise (run only when named): a ledger created with floor `none`,
    /// where a `none` writer's unsynced meta page can point at pages that never reached the
    /// disk. It shows what the floor prevents, and that the checker catches lost events.
    var unsafe = false
}

let scenarios: [Scenario] = [
    Scenario(name: "creation", writers: [Writer(role: "app", mode: .durable, batches: 2)]),
    Scenario(name: "interrupted-creation", writers: [
        Writer(role: "app", mode: .durable, batches: 3), Writer(role: "widget", mode: .durable, batches: 3),
    ], initialData: [UInt8](repeating: 0, count: 8192)),
    Scenario(name: "durable", writers: [Writer(role: "app", mode: .durable, batches: 24)]),
    Scenario(name: "single-sync", writers: [Writer(role: "app", mode: .singleSync, batches: 24)]),
    Scenario(name: "mixed", writers: [
        Writer(role: "app", mode: .durable, batches: 12),
        Writer(role: "widget", mode: .singleSync, batches: 12),
        Writer(role: "ext", mode: .none, batches: 12),
    ]),
    Scenario(name: "format-upgrade", writers: [
        Writer(role: "app", mode: .durable, batches: 6), Writer(role: "widget", mode: .singleSync, batches: 6),
    ], fromFormatOne: true),
    Scenario(name: "group-commit", writers: [Writer(role: "app", mode: .durable, batches: 8, threads: 4)]),
    Scenario(name: "map-growth", writers: [Writer(role: "app", mode: .durable, batches: 30, pad: 900)], initialMap: 64 << 10),
    Scenario(name: "compaction", writers: [Writer(role: "app", mode: .durable, batches: 30, pad: 200)], compacts: true),
    // A notification extension appends keyed events with `singleSync` and the host app appends
    // the same ones with `durable`: the host's answers are replays, which write nothing — they
    // must still be on disk when the host acknowledges them (one scenario per call).
    Scenario(name: "replay-keyed", writers: [
        Writer(role: "ext", mode: .singleSync, batches: 8, keyed: true),
        Writer(role: "app", mode: .durable, batches: 8, keyed: true, after: "ext"),
    ]),
    Scenario(name: "replay-conditional", writers: [
        Writer(role: "ext", mode: .singleSync, batches: 8, keyed: true),
        Writer(role: "app", mode: .durable, batches: 8, keyed: true, path: .conditional, after: "ext"),
    ]),
    Scenario(name: "replay-async", writers: [
        Writer(role: "ext", mode: .singleSync, batches: 8, keyed: true),
        Writer(role: "app", mode: .durable, batches: 8, keyed: true, path: .async, after: "ext"),
    ]),
    Scenario(name: "replay-consumer", writers: [
        Writer(role: "ext", mode: .singleSync, batches: 8, keyed: true),
        Writer(role: "app", mode: .durable, batches: 8, keyed: true, path: .consumer, after: "ext"),
    ]),
    Scenario(name: "unsafe-none", writers: [
        Writer(role: "app", mode: .durable, batches: 12),
        Writer(role: "ext", mode: .none, batches: 24),
    ], floor: LedgerDurability.none, unsafe: true),
]

/// A format-1 ledger in `path`: 40 events of two roles (type `crash.seed`) and an inbox listing
/// of three messages (projection rows to move), closed, then rewritten to format 1's layout
/// (`rewriteAsFormatOne`). Returns its data.mdb.
func formatOneLedger(_ path: String) throws -> [UInt8] {
    for role in ["app", "widget"] {
        let ledger = try Ledger(path: path, options: LedgerOptions(role: role))
        _ = try ledger.append(contentsOf: (0..<20).map { i in NewEvent(type: "crash.seed", payload: Array(#"{"i":\#(i)}"#.utf8)) })
        if role == "app" {
            let messages = (0..<3).map { i in InboxMessage(id: "m\(i)", title: "seed \(i)", sentAt: Timestamp(micros: 1_800_000_000_000_000 + Int64(i))) }
            try ledger.append(.inboxSynced(InboxSync(mode: .full, messages: messages)))
        }
    }
    let moved = try rewriteAsFormatOne(path)
    guard moved == 4 else { throw Failure("format-1 seed: expected 4 counters, found \(moved)") }
    return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb")))
}

// MARK: - The recorded log

enum Op {
    case write(offset: Int, bytes: [UInt8], durable: Bool)
    case sync
    case mark(String)
    case truncate(Int)

    var isPendingWrite: Bool {
        switch self {
        case .write(_, _, let durable): !durable
        case .truncate: true
        case .sync, .mark: false
        }
    }
}

func readLog(_ path: String) throws -> [Op] {
    let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var ops: [Op] = []
    var at = 0
    func u32(_ i: Int) -> Int { Int(data[i]) | Int(data[i + 1]) << 8 | Int(data[i + 2]) << 16 | Int(data[i + 3]) << 24 }
    func u64(_ i: Int) -> Int { u32(i) | u32(i + 4) << 32 }
    while at + 32 <= data.count {
        guard u32(at) == 0x524F_494C else { throw Failure("damaged record log at byte \(at)") }
        let op = data[at + 4], flags = data[at + 5], length = u32(at + 12), offset = u64(at + 16)
        guard at + 32 + length <= data.count else { throw Failure("truncated record log") }
        let bytes = Array(data[(at + 32)..<(at + 32 + length)])
        switch op {
        case 1: ops.append(.write(offset: offset, bytes: bytes, durable: flags & 1 != 0))
        case 2: ops.append(.sync)
        case 3: ops.append(.mark(String(decoding: bytes, as: UTF8.self)))
        case 4: ops.append(.truncate(offset))
        default: throw Failure("unknown record \(op)")
        }
        at += 32 + length
    }
    return ops
}

/// The file a power cut at `cut` leaves when `kept(i)` says which of the unsynced writes
/// (by op index) reached the disk, page by page (`keptPage`).
func materialise(_ ops: [Op], cut: Int, initial: [UInt8], keep: (Int, Int) -> Bool) -> [UInt8] {
    let lastSync = ops[..<cut].lastIndex { if case .sync = $0 { true } else { false } } ?? -1
    var file = initial
    for (i, op) in ops[..<cut].enumerated() {
        let pending = i > lastSync && op.isPendingWrite
        switch op {
        case .write(let offset, let bytes, _):
            var page = 0
            var at = 0
            while at < bytes.count {
                let end = min(bytes.count, at + 4096 - (offset + at) % 4096)
                if !pending || keep(i, page) {
                    if file.count < offset + end { file += [UInt8](repeating: 0, count: offset + end - file.count) }
                    file.replaceSubrange((offset + at)..<(offset + end), with: bytes[at..<end])
                }
                at = end
                page += 1
            }
        case .truncate(let size):
            if !pending || keep(i, 0) {
                if file.count > size { file.removeLast(file.count - size) } else { file += [UInt8](repeating: 0, count: size - file.count) }
            }
        case .sync, .mark: break
        }
    }
    return file
}

// MARK: - Roles run as child processes

/// Runs `body` on the cooperative pool and waits for it (the writer roles are synchronous).
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let outcome = Mutex<Result<T, any Error>?>(nil)
    Task {
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    guard let result = outcome.withLock({ $0 }) else { throw Failure("the async append did not finish") }
    return try result.get()
}

/// Appends one batch by `path`; returns the sequences the call acknowledged.
func appendBatch(_ events: [NewEvent], by path: AppendPath, to ledger: Ledger) throws -> [UInt64] {
    switch path {
    case .plain:
        return try ledger.append(contentsOf: events)
    case .conditional:
        return try ledger.append(AppendRequest(events, expectingHead: try ledger.read({ try $0.head() }))).sequences
    case .async:
        return try blocking { try await ledger.append(AppendRequest(events)).sequences }
    case .consumer:
        // The batch another process appended, read and committed over by this consumer.
        let consumer = try ledger.consumers.consumer(named: "crash-consumer")
        let batch = try consumer.next(limit: events.count)
        try consumer.commit(batch)
        return batch.events.map(\.sequence)
    }
}

/// `write DIR ROLE MODE BATCHES THREADS PAD ACKFILE PATH KEYED [INITIALMAP]`: appends batches of
/// 1–4 events by PATH and writes "ROLE MODE BATCH SEQ,SEQ…" to ACKFILE after each call returns
/// (KEYED "1": the shared keyed events, acknowledged as role "keyed").
func writerMain(_ a: [String]) throws {
    guard a.count >= 10, let mode = LedgerDurability(rawValue: a[3]), let batches = Int(a[4]), let threads = Int(a[5]), let pad = Int(a[6]),
          let path = AppendPath(rawValue: a[8]) else {
        throw Failure("bad write arguments")
    }
    let keyed = a[9] == "1"
    let ack = open(a[7], O_WRONLY | O_CREAT | O_APPEND, 0o644)
    guard ack >= 0 else { throw Failure("cannot open \(a[7])") }
    let padding = String(repeating: "x", count: pad)
    DispatchQueue.concurrentPerform(iterations: threads) { t in
        let role = threads == 1 ? a[2] : "\(a[2])\(t)"
        let writer = keyed ? "keyed" : role
        do {
            var options = LedgerOptions(role: role)
            options.durability = mode
            if let floor = ProcessInfo.processInfo.environment["LEDGER_CRASH_FLOOR"].flatMap(LedgerDurability.init(rawValue:)) {
                options.durabilityFloor = floor
            }
            if a.count > 10, let map = Int(a[10]) { options.initialMapSize = map }
            let ledger = try Ledger(path: a[1], options: options)
            var rng = SeededGenerator(seed: UInt64(t + 1) &* 7919)
            for b in 1...batches {
                let n = Int.random(in: 1...4, using: &rng)
                let events = (0..<n).map { k in
                    NewEvent(type: "crash.test", payload: Array(#"{"w":"\#(writer)","b":\#(b),"n":\#(n),"k":\#(k),"p":"\#(padding)"}"#.utf8),
                             key: keyed ? "keyed-\(b)-\(k)" : nil)
                }
                let seqs = try appendBatch(events, by: path, to: ledger)
                let line = Array("\(writer) \(mode.rawValue) \(b) \(seqs.map(String.init).joined(separator: ","))\n".utf8)
                _ = line.withUnsafeBytes { Glibc.write(ack, $0.baseAddress, $0.count) }
            }
        } catch {
            FileHandle.standardError.write(Data("writer \(role): \(error)\n".utf8))
            exit(1)
        }
    }
}

/// `compact DIR`: one compaction run keeping the last 10 events, in chunks of 20.
func compactMain(_ a: [String]) throws {
    var policy = CompactionPolicy()
    policy.retainedTail = 10
    policy.chunkSize = 20
    policy.triggerEvents = 0
    let ledger = try Ledger(path: a[1], options: LedgerOptions(role: "compactor"))
    _ = try Compactor(ledger: ledger, policy: policy).runOnce()
}

/// `check DIR EXPECTFILE`: judges one crash state; prints "ok", "typed: …" or "FAIL: …".
func checkMain(_ a: [String]) -> Int32 {
    let expected = ((try? String(contentsOfFile: a[2], encoding: .utf8)) ?? "").split(separator: "\n").map { $0.split(separator: " ") }
    let durableAcked = expected.contains { $0.count == 4 && $0[1] == "durable" }
    let ledger: Ledger
    do { ledger = try Ledger(path: a[1], options: LedgerOptions(role: "checker")) } catch {
        print(durableAcked ? "FAIL: does not open although durable events were acknowledged: \(error)" : "typed: \(error)")
        return durableAcked ? 1 : 0
    }
    do {
        let report = try ledger.maintenance.verify()
        guard report.isHealthy else { print("FAIL: verify: \(report.findings.map(\.description).joined(separator: "; "))"); return 1 }
        var present: [UInt64: (w: String, b: Int, n: Int, k: Int)] = [:]
        var groups: [String: Set<Int>] = [:]
        var seen = Set<String>()
        var byType: [String: UInt64] = [:]
        var byRole: [String: UInt64] = [:]
        for event in try ledger.read({ try $0.events(after: 0, limit: 1_000_000) }) {
            byType[event.type, default: 0] += 1
            byRole[event.origin.role, default: 0] += 1
            guard event.type == "crash.test" else { continue }
            guard case .object(let f)? = try? JSONValue(from: event.payload),
                  case .string(let w)? = f["w"], case .integer(let b)? = f["b"], case .integer(let n)? = f["n"], case .integer(let k)? = f["k"] else {
                print("FAIL: unreadable payload at \(event.sequence)")
                return 1
            }
            guard seen.insert("\(w)/\(b)/\(k)").inserted else { print("FAIL: duplicated \(w) batch \(b) event \(k)"); return 1 }
            present[event.sequence] = (w, Int(b), Int(n), Int(k))
            groups["\(w)/\(b)/\(n)", default: []].insert(Int(k))
        }
        let first = try ledger.read({ try $0.firstSequence() })
        for (group, ks) in groups {
            let n = Int(group.split(separator: "/")[2]) ?? 0
            // Compaction may trim the start of a batch (the events before the log's first).
            let whole = ks.count == n || (first > 1 && ks == Set((n - ks.count)..<n))
            if !whole { print("FAIL: partial batch \(group): \(ks.sorted())"); return 1 }
        }
        let horizon = expected.filter { $0.count == 4 && $0[1] == "durable" }
            .compactMap { $0[3].split(separator: ",").compactMap { UInt64($0) }.max() }.max() ?? 0
        for line in expected where line.count == 4 {
            let seqs = line[3].split(separator: ",").compactMap { UInt64($0) }
            guard let top = seqs.max(), top <= horizon else { continue }  // not yet synced by a durable commit: may be lost
            for (k, seq) in seqs.enumerated() where seq >= first {
                guard let got = present[seq], got.w == line[0], got.b == Int(line[2]) ?? -1, got.k == k else {
                    print("FAIL: lost: \(line[0]) batch \(line[2]) event \(k), acknowledged at \(seq)")
                    return 1
                }
            }
        }
        if try ledger.read({ try $0.head() }) < horizon { print("FAIL: head below the acknowledged \(horizon)"); return 1 }
        // The counters by type and origin are written in the transactions that append and trim.
        let statistics = try ledger.maintenance.statistics()
        guard statistics.countsByType == byType, statistics.countsByOrigin == byRole else {
            print("FAIL: counters \(statistics.countsByType) \(statistics.countsByOrigin) differ from the log's \(byType) \(byRole)")
            return 1
        }
        print("ok")
        return 0
    } catch {
        print("FAIL: \(error)")
        return 1
    }
}

extension JSONValue {
    init(from bytes: [UInt8]) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }
}

// MARK: - The exploration

struct Tally {
    var states = 0
    var ok = 0
    var typed = 0
    var failures: [String] = []
    /// States where acknowledged events were lost or the store was unusable.
    var lost = 0
}

func explore(_ scenario: Scenario, root: String, cuts: Int, subsets: Int, verbose: Bool, rng: inout SeededGenerator) throws -> Tally {
    let dir = root + "/" + scenario.name
    try? FileManager.default.removeItem(atPath: dir)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let ledgerPath = dir + "/ledger"
    try FileManager.default.createDirectory(atPath: ledgerPath, withIntermediateDirectories: true)
    let initialData = scenario.fromFormatOne ? try formatOneLedger(dir + "/format-1") : scenario.initialData
    if let initial = initialData {
        _ = FileManager.default.createFile(atPath: ledgerPath + "/data.mdb", contents: Data(initial))
    }
    let recorder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("libLedgerIORecorder.so").path
    guard FileManager.default.fileExists(atPath: recorder) else { throw Failure("no recorder at \(recorder): build with `swift build` in Benchmarks") }
    let logPath = dir + "/io.log"
    var environment = ["LD_PRELOAD": recorder, "LEDGER_IO_LOG": logPath, "LEDGER_IO_DATA": ledgerPath + "/data.mdb", "LEDGER_IO_MARKS": dir + "/acks-"]
    if let floor = scenario.floor { environment["LEDGER_CRASH_FLOOR"] = floor.rawValue }
    let me = Processes.product("ledger-crash-states")
    var children: [RunningProcess] = []
    var started: [String: RunningProcess] = [:]
    for w in scenario.writers {
        if let first = w.after.flatMap({ started[$0] }) {
            let out = try first.wait(timeout: 300)
            guard out.status == 0, !out.signalled else { throw Failure("\(scenario.name): a workload process failed: \(out.stderr)") }
        }
        var args = ["write", ledgerPath, w.role, w.mode.rawValue, "\(w.batches)", "\(w.threads)", "\(w.pad)", dir + "/acks-" + w.role,
                    w.path.rawValue, w.keyed ? "1" : "0"]
        if let map = scenario.initialMap { args.append("\(map)") }
        let child = try Processes.start(me, args, environment: environment)
        children.append(child)
        started[w.role] = child
    }
    if scenario.compacts {
        usleep(150_000)
        children.append(try Processes.start(me, ["compact", ledgerPath], environment: environment))
    }
    for child in children {
        let out = try child.wait(timeout: 300)
        guard out.status == 0, !out.signalled else { throw Failure("\(scenario.name): a workload process failed: \(out.stderr)") }
    }
    let ops = try readLog(logPath)
    guard ops.contains(where: { if case .mark = $0 { true } else { false } }) else { throw Failure("\(scenario.name): nothing was recorded (is LD_PRELOAD honoured?)") }

    // Cut points: before every sync and mark, after every sync, and evenly spaced ones.
    var points = Set<Int>([0, ops.count])
    for (i, op) in ops.enumerated() {
        switch op {
        case .sync, .mark: points.insert(i); points.insert(i + 1)
        case .write, .truncate: break
        }
    }
    var chosen = points.sorted()
    if chosen.count > cuts { chosen = (0..<cuts).map { chosen[$0 * chosen.count / cuts] } + [ops.count] }
    var tally = Tally()
    var judged = Set<Int>()
    for cut in Set(chosen).sorted() {
        let acks = ops[..<cut].compactMap { op -> String? in if case .mark(let text) = op { text } else { nil } }.joined()
        let lastSync = ops[..<cut].lastIndex { if case .sync = $0 { true } else { false } } ?? -1
        let pending = ops[..<cut].indices.filter { $0 > lastSync && ops[$0].isPendingWrite }
        var keeps: [(Int, Int) -> Bool] = [{ _, _ in true }, { _, _ in false }]
        if let middle = pending.dropFirst(pending.count / 2).first { keeps.append { i, _ in i < middle } }  // a prefix
        for _ in 0..<(pending.isEmpty ? 0 : subsets) {
            var local = SeededGenerator(seed: rng.next())
            var choice: [String: Bool] = [:]
            keeps.append { i, page in
                let key = "\(i)/\(page)"
                if let c = choice[key] { return c }
                let c = Bool.random(using: &local)
                choice[key] = c
                return c
            }
        }
        for keep in keeps {
            let file = materialise(ops, cut: cut, initial: initialData ?? [], keep: keep)
            var hasher = Hasher()
            hasher.combine(file)
            hasher.combine(acks)
            guard judged.insert(hasher.finalize()).inserted else { continue }
            tally.states += 1
            let stateDir = dir + "/state"
            try? FileManager.default.removeItem(atPath: stateDir)
            try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: stateDir + "/data.mdb", contents: Data(file))
            _ = FileManager.default.createFile(atPath: dir + "/expected", contents: Data(acks.utf8))
            let out = try Processes.run(me, ["check", stateDir, dir + "/expected"], timeout: 60)
            if out.signalled || out.status != 0 { tally.lost += 1 }
            let verdict = out.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            if out.signalled || out.status != 0 {
                let kept = "\(scenario.name)-cut\(cut)-state\(tally.states)"
                try? FileManager.default.copyItem(atPath: stateDir, toPath: dir + "/" + kept)
                tally.failures.append("\(scenario.name) cut \(cut)/\(ops.count) (\(pending.count) unsynced writes): \(out.signalled ? "died of signal \(out.status)" : verdict) — kept in \(dir)/\(kept)")
            } else if verdict.hasPrefix("typed") {
                tally.typed += 1
                if verbose { print("  \(scenario.name) cut \(cut): \(verdict)") }
            } else {
                tally.ok += 1
            }
        }
    }
    return tally
}

/// The explorer's options (the `write`, `compact` and `check` roles are its own child processes).
struct ExploreOptions: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-crash-states",
        abstract: "Power-cut exploration: record what the ledger's processes write and sync, then check every file state a power cut could leave.")

    @Flag(help: "A short exploration (what CI runs): 24 cut points per scenario, 2 random subsets per cut.")
    var quick = false
    @Option(help: "Cut points per scenario (at most).")
    var cuts = 400
    @Option(help: "Random page subsets of the unsynced writes per cut (besides all, none and a prefix).")
    var subsets = 6
    @Option(help: "Seed of the random subsets.")
    var seed: UInt64 = 1
    @Option(help: "Only these scenarios, comma-separated (unsafe-none runs only when named).")
    var scenarios: String?
    @Option(help: "Where to keep the recordings and any failing state.")
    var directory = NSTemporaryDirectory() + "ledger-crash-states"
    @Flag(help: "Print the typed error each such state opened with.")
    var verbose = false
}

func mainExplore(_ arguments: ArraySlice<String>) throws -> Int32 {
    let options: ExploreOptions
    do { options = try ExploreOptions.parse(Array(arguments)) } catch {
        ExploreOptions.exit(withError: error)  // usage and --help: ArgumentParser's message and exit code
    }
    let (cuts, subsets) = options.quick ? (24, 2) : (options.cuts, options.subsets)
    let only = options.scenarios.map { Set($0.split(separator: ",").map(String.init)) }
    let root = options.directory
    let seed = options.seed
    var rng = SeededGenerator(seed: seed)
    var total = Tally()
    let started = Date()
    for scenario in scenarios where only?.contains(scenario.name) ?? !scenario.unsafe {
        let t = try explore(scenario, root: root, cuts: cuts, subsets: subsets, verbose: options.verbose, rng: &rng)
        print("\(scenario.name.padding(toLength: 21, withPad: " ", startingAt: 0)) \(t.states) states: \(t.ok) ok, \(t.typed) typed errors, \(t.failures.count) failed")
        fflush(nil)
        total.states += t.states
        total.ok += t.ok
        total.typed += t.typed
        total.failures += t.failures
    }
    for f in total.failures { print("FAILED: \(f)") }
    print(String(format: "%d states explored in %.0f s: %d ok, %d typed errors, %d failed (acknowledged events lost or store unusable)",
                 total.states, Date().timeIntervalSince(started), total.ok, total.typed, total.failures.count))
    return total.failures.isEmpty ? 0 : 1
}

let arguments = CommandLine.arguments
do {
    switch arguments.dropFirst().first {
    case "write": try writerMain(Array(arguments.dropFirst()))
    case "compact": try compactMain(Array(arguments.dropFirst()))
    case "check": exit(checkMain(Array(arguments.dropFirst())))
    default: exit(try mainExplore(arguments.dropFirst()))
    }
} catch {
    FileHandle.standardError.write(Data("ledger-crash-states: \(error)\n".utf8))
    exit(2)
}
