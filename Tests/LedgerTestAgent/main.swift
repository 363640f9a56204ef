// A helper process for the test suite: real writers, readers and crash victims.
// Usage: LedgerTestAgent <mode> <arguments…>; see each mode below.
import Foundation
@_spi(Testing) import InboxLedger
import LMDB
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

func die(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(1)
}

func say(_ message: String) {
    print(message)
    fflush(nil)
}

/// Appends lines to a file with O_APPEND, unbuffered: what a process wrote before being
/// killed is in the file.
final class AckLog {
    let fd: Int32
    init(_ path: String) {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if fd < 0 { die("cannot open ack file \(path)") }
    }
    func write(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }
}

func openLedger(_ dir: String, role: String, durability: String = "durable") -> Ledger {
    var options = LedgerOptions(role: role)
    options.durability = LedgerDurability(rawValue: durability) ?? .durable
    // LEDGER_INITIAL_MAP: a small initial map, so that the map grows while processes write.
    if let bytes = ProcessInfo.processInfo.environment["LEDGER_INITIAL_MAP"].flatMap(Int.init) { options.initialMapSize = bytes }
    do { return try Ledger(path: dir, options: options) } catch { die("open: \(error)") }
}

/// Writes batches of 1–maxBatch events; `count` < 0 means until killed. After each commit,
/// records "batch <b> <n> <seq,seq,…>" in the ack file.
func writer(dir: String, role: String, count: Int, seed: UInt64, ackPath: String, maxBatch: Int, durability: String) {
    let ledger = openLedger(dir, role: role, durability: durability)
    let ack = AckLog(ackPath)
    var rng = SeededGenerator(seed: seed)
    var written = 0
    var batchNo = 0
    while count < 0 || written < count {
        batchNo += 1
        let size = count < 0 ? Int.random(in: 1...maxBatch, using: &rng) : min(Int.random(in: 1...maxBatch, using: &rng), count - written)
        let events = (0..<size).map { k in
            NewEvent(type: "test.event", payload: Array(#"{"w":"\#(role)","b":\#(batchNo),"n":\#(size),"i":\#(written + k)}"#.utf8))
        }
        do {
            let seqs = try ledger.append(contentsOf: events)
            ack.write("batch \(batchNo) \(size) " + seqs.map(String.init).joined(separator: ","))
        } catch {
            die("append: \(error)")
        }
        written += size
    }
    say("wrote \(written)")
}

/// Tails the log until `count` events were seen, checking density and order; exits 1 on a gap.
func reader(dir: String, count: Int, timeout: Double) {
    var options = LedgerOptions(role: "reader")
    options.readOnly = false
    let ledger: Ledger
    do { ledger = try Ledger(path: dir, options: options) } catch { die("open: \(error)") }
    var last: UInt64 = 0
    let deadline = Date().addingTimeInterval(timeout)
    while last < UInt64(count) {
        if Date() > deadline { die("reader timed out at \(last) of \(count)") }
        do {
            let events = try ledger.read({ try $0.events(after: last, limit: 500) })
            for e in events {
                if e.sequence != last + 1 { die("gap: expected \(last + 1), got \(e.sequence)") }
                last = e.sequence
            }
            if events.isEmpty { usleep(1000) }
        } catch {
            die("read: \(error)")
        }
    }
    say("read \(last)")
}

/// Fills an environment with `count` values of `size` bytes, 50 per transaction, from a small
/// initial map, so the map must grow.
func lmdbFill(dir: String, start: Int, count: Int, size: Int, initialMap: Int) {
    var config = EnvironmentConfiguration()
    config.databases = ["data": []]
    config.initialMapSize = initialMap
    do {
        let env = try Environment.open(directory: dir, configuration: config)
        let db = try env.database("data")
        var i = start
        while i < start + count {
            let end = min(i + 50, start + count)
            try env.write { txn in
                for k in i..<end {
                    var key = [UInt8](repeating: 0, count: 8)
                    for b in 0..<8 { key[b] = UInt8(truncatingIfNeeded: UInt64(k) >> UInt64(56 - 8 * b)) }
                    try txn.put(db, key: key, value: [UInt8](repeating: UInt8(k % 251), count: size))
                }
            }
            i = end
        }
        say("map \(try env.info().mapSize)")
    } catch {
        die("lmdb-fill: \(error)")
    }
}

/// Opens a read transaction and holds it until killed.
func holdReader(dir: String) {
    do {
        let env = try Environment.open(directory: dir, configuration: EnvironmentConfiguration())
        try env.read { _ in
            say("holding")
            while true { sleep(1000) }
        }
    } catch {
        die("hold-reader: \(error)")
    }
}

/// Takes reader slots of the ledger's lock file — nested read transactions of a read-only
/// environment with the ledger's configuration (126 slots) — until it holds `limit` or no slot
/// is free; prints "holding N" and keeps them until killed.
func holdReaders(dir: String, limit: Int) {
    var config = EnvironmentConfiguration()
    config.readOnly = true
    func nest(_ env: Environment, _ held: Int) throws {
        if held == limit { park(held) }
        do {
            try env.read { _ in try nest(env, held + 1) }
        } catch LMDBError.readersFull {
            park(held)
        }
    }
    func park(_ held: Int) -> Never {
        say("holding \(held)")
        while true { sleep(1000) }
    }
    do {
        try nest(try Environment.open(directory: dir, configuration: config), 0)
    } catch {
        die("hold-readers: \(error)")
    }
}

/// Appends one event with an idempotency key; prints its sequence or the error.
func appendKey(dir: String, key: String, data: String) {
    let ledger = openLedger(dir, role: "agent")
    do {
        say(String(try ledger.append(NewEvent(type: "test.keyed", payload: Array(data.utf8), key: key))))
    } catch {
        print("error: \(error)")
        exit(2)
    }
}

/// Reads keys from stdin, one a line, and appends one keyed event for each; prints
/// "ack <seq>" or "refused <error>" per line, then "bye" at the end of input.
func appendLines(dir: String) {
    let ledger = openLedger(dir, role: "lines")
    say("open")
    while let line = readLine() {
        do {
            say("ack \(try ledger.append(NewEvent(type: "test.keyed", payload: Array(#"{"k":"\#(line)"}"#.utf8), key: line)))")
        } catch {
            say("refused \(error)")
        }
    }
    say("bye")
}

/// Appends COUNT badge deltas of +1, each in its own commit (a burst of small commits).
func badgeBurst(dir: String, count: Int) {
    let ledger = openLedger(dir, role: "burst", durability: "none")
    do {
        for _ in 0..<count { try ledger.append(.badgeAdjusted(.delta(1))) }
        say("done \(try ledger.read({ try $0.head() }))")
    } catch {
        die("badge-burst: \(error)")
    }
}

/// Syncs one message ID titled TITLE (an inbox.synced delta) and prints its sequence.
func syncMessage(dir: String, id: String, title: String) {
    let ledger = openLedger(dir, role: "notification-service")
    do {
        let sync = InboxSync(mode: .delta, messages: [InboxMessage(id: id, title: title, sentAt: Timestamp(micros: 1_795_334_400_000_000))])
        say(String(try ledger.append(.inboxSynced(sync))))
    } catch {
        die("sync-message: \(error)")
    }
}

/// Waits for the head to pass AFTER; prints "woke HEAD LATENCY_MICROS".
func waitChange(dir: String, after: UInt64) async {
    var options = LedgerOptions(role: "watcher")
    options.readOnly = true
    do {
        let ledger = try Ledger(path: dir, options: options)
        say("waiting")
        let head = try await ledger.waitForChange(after: after)
        let woke = Timestamp.now.micros
        let committed = try await ledger.read({ try $0.event(at: head) })?.timestampMicros ?? woke
        say("woke \(head) \(woke - committed)")
    } catch {
        die("wait-change: \(error)")
    }
}

/// Opens a ledger (read-only with "ro"), prints its event count, or the error and exits 2.
func openAndCount(dir: String, readOnly: Bool) {
    var options = LedgerOptions(role: "agent")
    options.readOnly = readOnly
    do {
        let ledger = try Ledger(path: dir, options: options)
        say("count \(try ledger.read({ try $0.count() }))")
    } catch {
        print("error: \(error)")
        exit(2)
    }
}

/// Runs the format upgrade on a format-1 ledger and SIGKILLs itself inside its transaction,
/// just before the commit (a crash in the middle of the upgrade).
func upgradeThenDie(dir: String) {
    do {
        try Ledger.upgradeFormat(path: dir) {
            say("upgrading")
            kill(getpid(), SIGKILL)
        }
        die("the upgrade committed")
    } catch {
        die("upgrade: \(error)")
    }
}

// MARK: - Suspension and stopped writers

/// Waits until `path` exists (a step of the test driving this process).
func awaitFile(_ path: String) {
    while !FileManager.default.fileExists(atPath: path) { usleep(5_000) }
}

/// Opens, appends and reads (so the process holds LMDB's locks and a reader slot), parks a
/// waiter, then follows the test's steps: `CTL/suspend` → Ledger.suspend() and a call timed
/// while suspended; `CTL/resume` → resume, the widget list compared, an append; `CTL/exit`.
func suspendCycle(dir: String, control: String) {
    do {
        let ledger = try Ledger(path: dir, options: LedgerOptions(role: "app"))
        try ledger.append(.badgeAdjusted(.delta(1)))
        let before = try ledger.read({ try $0.widgetList(limit: 5) })
        let head = try ledger.read({ try $0.head() })
        let waiter = Task {
            let woke = try await ledger.waitForChange(after: head + 1)
            say("woke \(woke)")
        }
        say("ready \(head)")
        awaitFile(control + "/suspend")
        try Ledger.suspend()
        // The median of 21 calls: one call can be preempted on a loaded machine.
        var outcome = "appended"
        var times: [UInt64] = []
        for _ in 0..<21 {
            let started = DispatchTime.now().uptimeNanoseconds
            do { try ledger.append(.badgeAdjusted(.delta(1))) } catch { outcome = error == .suspended ? "suspended" : "\(error)" }
            times.append((DispatchTime.now().uptimeNanoseconds - started) / 1000)
        }
        let micros = times.sorted()[times.count / 2]
        var readOutcome = "read"
        do { _ = try ledger.read({ try $0.widgetList(limit: 5) }) } catch { readOutcome = error == .suspended ? "suspended" : "\(error)" }
        say("suspended-call \(micros) \(outcome) \(readOutcome)")
        awaitFile(control + "/resume")
        Ledger.resume()
        let after = try ledger.read({ try $0.widgetList(limit: 5) })
        say("widget-same \(after == before)")
        say("resumed \(try ledger.append(.badgeAdjusted(.delta(1))))")
        awaitFile(control + "/exit")
        waiter.cancel()
    } catch {
        die("suspend-cycle: \(error)")
    }
}

/// Begins a write transaction on the directory, says "in-txn", stays inside it for `seconds`
/// (the test SIGSTOPs it there), then commits and says "committed".
func stallInWrite(dir: String, seconds: Int) {
    do {
        let env = try Environment.open(directory: dir, configuration: EnvironmentConfiguration())
        try env.write { _ in
            say("in-txn")
            usleep(UInt32(seconds) * 1_000_000)
        }
        say("committed")
    } catch {
        die("stall-in-write: \(error)")
    }
}

/// Like `stall-in-write`, but running: spins on the CPU inside its write transaction for
/// SECONDS (a writer that is slow, not stopped), then commits.
func spinInWrite(dir: String, seconds: Int) {
    do {
        let env = try Environment.open(directory: dir, configuration: EnvironmentConfiguration())
        try env.write { _ in
            say("in-txn")
            let end = monotonicSeconds() + Double(seconds)
            var x: UInt64 = 1
            while monotonicSeconds() < end { for _ in 0..<10_000 { x = x &* 6364136223846793005 &+ 1 } }
            if x == 0 { say("unlikely") }
        }
        say("committed")
    } catch {
        die("spin-in-write: \(error)")
    }
}

/// Takes the exclusive lock LMDB's first opener holds on byte 0 of `lock.mdb` while it
/// initialises the file, says "holding", and keeps it (an opener stopped mid-open).
func holdOpenLock(dir: String) {
    let fd = open(dir + "/lock.mdb", O_RDWR | O_CREAT, 0o644)
    var lock = flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = 0
    lock.l_len = 1
    guard fd >= 0, fcntl(fd, F_SETLK, &lock) == 0 else { die("cannot lock byte 0: errno \(errno)") }
    say("holding")
    while true { sleep(60) }
}

// MARK: - Compaction

func compactionPolicy(tail: Int, chunk: Int) -> CompactionPolicy {
    var policy = CompactionPolicy()
    policy.retainedTail = tail
    policy.chunkSize = chunk
    policy.triggerEvents = 0
    return policy
}

/// Compacts once; with FAULT_PHASE set, SIGKILLs itself at the FAULT_COUNT-th time it reaches
/// that phase (a crash at a precise point).
func compactOnce(dir: String, tail: Int, chunk: Int) {
    let ledger = openLedger(dir, role: "compactor", durability: "none")
    let environment = ProcessInfo.processInfo.environment
    let faultPhase = environment["FAULT_PHASE"]
    let faultCount = Int(environment["FAULT_COUNT"] ?? "1") ?? 1
    final class Counter: @unchecked Sendable { var n = 0 }
    let counter = Counter()
    let compactor = Compactor(ledger: ledger, policy: compactionPolicy(tail: tail, chunk: chunk)) { phase in
        guard phase.rawValue == faultPhase else { return }
        counter.n += 1
        if counter.n == faultCount { kill(getpid(), SIGKILL) }
    }
    do {
        let report = try compactor.runOnce()
        say("trimmed \(report.eventsTrimmed) first \(report.firstSequence) blockers \(report.blockers.count)")
    } catch {
        die("compact: \(error)")
    }
}

/// Compacts over and over for `seconds`.
func compactLoop(dir: String, seconds: Double, tail: Int) {
    let ledger = openLedger(dir, role: "compactor", durability: "none")
    let compactor = Compactor(ledger: ledger, policy: compactionPolicy(tail: tail, chunk: 200))
    let deadline = Date().addingTimeInterval(seconds)
    var runs = 0, trimmed = 0
    while Date() < deadline {
        do {
            let report = try compactor.runOnce()
            trimmed += report.eventsTrimmed
            runs += 1
        } catch {
            die("compact-loop: \(error)")
        }
        usleep(20_000)
    }
    say("runs \(runs) trimmed \(trimmed)")
}

/// A live consumer: reads until its cursor reaches `expected`, checking that it sees every
/// sequence once, in order.
func consumeCheck(dir: String, name: String, expected: UInt64, timeout: Double) {
    let ledger = openLedger(dir, role: "checker", durability: "none")
    let deadline = Date().addingTimeInterval(timeout)
    do {
        let consumer = try ledger.consumers.consumer(named: name)
        var last = try consumer.cursor()
        while last < expected {
            if Date() > deadline { die("consume-check: timed out at \(last) of \(expected)") }
            let batch = try consumer.next(limit: 300)
            for e in batch.events {
                if e.sequence != last + 1 { die("consume-check: expected \(last + 1), got \(e.sequence)") }
                last = e.sequence
            }
            try consumer.commit(batch)
            if batch.events.isEmpty { usleep(2000) }
        }
        say("consumed \(last)")
    } catch {
        die("consume-check: \(error)")
    }
}

/// Reads the widget list for `seconds`, checking it is internally consistent.
func widgetReader(dir: String, seconds: Double) {
    var options = LedgerOptions(role: "widget")
    options.readOnly = true
    let deadline = Date().addingTimeInterval(seconds)
    var reads = 0
    do {
        let ledger = try Ledger(path: dir, options: options)
        while Date() < deadline {
            let list = try ledger.read({ try $0.widgetList(limit: 1000) })
            if list.items.filter({ !$0.read }).count != list.unreadCount {
                die("widget-reader: \(list.unreadCount) unread but rows say otherwise")
            }
            reads += 1
            usleep(1000)
        }
    } catch {
        die("widget-reader: \(error)")
    }
    say("reads \(reads)")
}

/// The host app's action queue as docs/apps.md writes it (`Consumer.batches`), completing
/// each widget action, while another task suspends and resumes the process `cycles` times.
/// Exits once `expected` actions were completed and every cycle ran; prints "completed N".
func batchConsumer(dir: String, name: String, expected: Int, cycles: Int) async {
    let ledger = openLedger(dir, role: "app", durability: "none")
    let host: Consumer
    do { host = try await ledger.consumers.consumer(named: name) } catch { die("consumer: \(error)") }
    let toggler = Task.detached {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<cycles {
            try? await Task.sleep(for: .microseconds(Int.random(in: 0...3000, using: &rng)))
            // A transaction that does not end in time leaves the process suspended all the same.
            do { try Ledger.suspend() } catch { say("suspend: \(error)") }
            try? await Task.sleep(for: .microseconds(Int.random(in: 0...3000, using: &rng)))
            Ledger.resume()
        }
    }
    var completed = 0
    do {
        for try await batch in host.batches(limit: 7) {
            var completions: [NewEvent] = []
            for event in batch.events where event.type == BuiltInEventType.widgetAction.rawValue {
                guard case .widgetAction(let action) = try DomainEvent.decode(type: event.type, payload: event.payload) else { continue }
                completions.append(try DomainEvent.actionCompleted(ActionCompletion(actionID: action.actionID, outcome: .done)).newEvent())
            }
            let receipt = try await host.commit(batch, appending: completions)
            if !receipt.notes.isEmpty { die("completed twice: \(receipt.notes)") }
            completed += completions.count
            if completed >= expected { break }
        }
    } catch {
        die("queue: \(error)")
    }
    await toggler.value
    say("completed \(completed)")
}

/// One process of an app (host, widget or notification extension) in the flow model test: runs
/// the commands the test drops into `control` as files `cmd-N` (N from `start`, tab-separated
/// fields) in order, and prints "done N …" after each:
/// - `append KEY TYPE PAYLOAD` (KEY `-` for none): appends, retrying while the process is
///   suspended (what an app's own code does); prints the sequence.
/// - `complete LIMIT`: the host's action queue, one batch (`Consumer.batches`), completing every
///   widget action in it; the commit waits through a suspension by itself.
/// - `suspend MS`: suspends the process's ledgers and resumes them MS ms later.
/// - `exit`.
func flowActor(dir: String, role: String, control: String, start: Int) async {
    let ledger = openLedger(dir, role: role, durability: "none")
    func retrying<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await ledger.retryingTransient(body)
    }
    var n = start
    while true {
        let path = control + "/cmd-\(n)"
        guard let text = FileManager.default.contents(atPath: path).map({ String(decoding: $0, as: UTF8.self) }) else {
            usleep(300)
            continue
        }
        let fields = text.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        do {
            switch fields.first {
            case "append" where fields.count == 4:
                let event = NewEvent(type: fields[2], payload: Array(fields[3].utf8), key: fields[1] == "-" ? nil : fields[1])
                let seq = try await retrying { try ledger.append(event) }
                say("done \(n) \(seq)")
            case "complete" where fields.count == 2:
                let host = try await retrying { try ledger.consumers.consumer(named: "host-app") }
                let lag = try await retrying { try host.cursor() < ledger.read({ try $0.head() }) }
                var completed = 0
                if lag, let limit = Int(fields[1]) {
                    var batches = host.batches(limit: limit).makeAsyncIterator()
                    guard let batch = try await batches.next() else { die("complete: the batches ended") }
                    var completions: [NewEvent] = []
                    for event in batch.events where event.type == BuiltInEventType.widgetAction.rawValue {
                        guard case .widgetAction(let action) = try DomainEvent.decode(type: event.type, payload: event.payload) else { continue }
                        completions.append(try DomainEvent.actionCompleted(ActionCompletion(actionID: action.actionID, outcome: .done)).newEvent())
                    }
                    try await host.commit(batch, appending: completions)
                    completed = completions.count
                }
                say("done \(n) \(completed)")
            case "suspend" where fields.count == 2:
                let ms = Int(fields[1]) ?? 0
                do { try Ledger.suspend() } catch { say("suspend: \(error)") }
                Thread.detachNewThread {
                    usleep(useconds_t(ms * 1000))
                    Ledger.resume()
                }
                say("done \(n) suspended")
            case "exit":
                say("done \(n) exit")
                exit(0)
            default:
                die("flow-actor: bad command \(text)")
            }
        } catch {
            die("flow-actor \(role): \(fields.first ?? ""): \(error)")
        }
        n += 1
    }
}

// MARK: - App projections (AppProjectionProcessTests)

/// The task-list projection a process registers: 0 none, 1 TaskList, 2 TaskListV2.
func taskProjections(_ version: Int) -> [any LedgerProjection.Type] {
    switch version {
    case 1: [TaskList.self]
    case 2: [TaskListV2.self]
    default: []
    }
}

/// A counter shared by a process's threads.
final class SharedCounter: @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// Suspensions made, and calls refused because the process was suspended.
let suspensions = SharedCounter()
let refusedWhileSuspended = SharedCounter()

/// Runs `body`, again while this process is suspended (what an app's own code does).
func unsuspended<T>(_ body: () throws(LedgerError) -> T) throws(LedgerError) -> T {
    while true {
        do throws(LedgerError) {
            return try body()
        } catch {
            guard error == .suspended else { throw error }
            refusedWhileSuspended.add()
            usleep(200)
        }
    }
}

/// One process of the task-tracker app (ROLE host, widget or extension, see TaskWorkload)
/// registering task-list VERSION (0: none): appends batches of 1–3 task events until COUNT
/// batches (-1: until killed) or until STOPFILE exists; after each commit writes one line
/// "ack SEQ TYPE ID ." per event to ACKFILE. With SUSPEND 1, a thread suspends and resumes the
/// process at random instants. Every CHECKEVERY batches (0: never) it reads the projection and
/// compares it with TaskListModel folded from the log through the head the read reflects:
/// prints "checked HEAD", or "refused REASON" when the read is refused (projectionUnavailable),
/// and exits 1 on a mismatch. Prints "ready HEAD" once open, "appended N suspensions S
/// suspended-calls R" at the end.
final class TaskActor {
    let ledger: Ledger
    let role: String
    let version: Int
    var model: TaskListModel

    init(dir: String, role: String, version: Int) {
        var options = LedgerOptions(role: role)
        options.durability = .none
        options.projections = taskProjections(version)
        do { ledger = try Ledger(path: dir, options: options) } catch { die("open: \(error)") }
        self.role = role
        self.version = version
        model = TaskListModel(version == 2 ? .v2 : .v1)
    }

    func check() {
        do throws(LedgerError) {
            switch version {
            case 1: try compare(try unsuspended { () throws(LedgerError) in try ledger.read({ try $0.projection(TaskList.self).contents() }) })
            case 2: try compare(try unsuspended { () throws(LedgerError) in try ledger.read({ try $0.projection(TaskListV2.self).contents() }) })
            default: return
            }
        } catch {
            if case .projectionUnavailable(_, let reason) = error {
                say("refused \(reason)")
            } else if case .projectionBuilding(_, let through) = error {
                say("refused being built (through \(through))")  // or being dropped: its record says clearing
            } else {
                die("check \(role): \(error)")
            }
        }
    }

    private func compare<P: LedgerProjection>(_ contents: ProjectionContents<P>) throws(LedgerError) where P.Row == TaskList.Row, P.Document == TaskList.Document {
        while model.through < contents.head {
            let events = try unsuspended { () throws(LedgerError) in try ledger.read({ try $0.events(after: model.through, limit: 1000) }) }
            guard let first = events.first, first.sequence == model.through + 1 else { die("check \(role): the log has a gap after \(model.through)") }
            do { try model.fold(events, through: contents.head) } catch { die("check \(role): model: \(error)") }
        }
        if let mismatch = model.mismatch(contents) { die("mismatch \(role) v\(version): \(mismatch)") }
        say("checked \(contents.head)")
    }
}

/// The task ID of a task event's payload.
struct TaskID: Decodable { var id: String? }

func taskActor(dir: String, role: String, version: Int, seed: UInt64, ackPath: String, count: Int, suspend: Bool, checkEvery: Int, stopFile: String?) {
    let actor = TaskActor(dir: dir, role: role, version: version)
    let ack = AckLog(ackPath)
    var generator = SeededGenerator(seed: seed)
    if suspend {
        let toggleSeed = seed &+ 1
        Thread.detachNewThread {
            var rng = SeededGenerator(seed: toggleSeed)
            while true {
                usleep(UInt32.random(in: 0...4000, using: &rng))
                // A transaction that does not end in time leaves the process suspended all the same.
                do { try Ledger.suspend() } catch { say("suspend: \(error)") }
                suspensions.add()
                usleep(UInt32.random(in: 0...2000, using: &rng))
                Ledger.resume()
            }
        }
    }
    let head: UInt64
    do { head = try unsuspended { () throws(LedgerError) in try actor.ledger.read({ try $0.head() }) } } catch { die("head: \(error)") }
    say("ready \(head)")
    var batches = 0
    while count < 0 || batches < count {
        if let stopFile, FileManager.default.fileExists(atPath: stopFile) { break }
        do {
            let events = try TaskWorkload.batch(role: role, using: &generator)
            let sequences = try unsuspended { () throws(LedgerError) in try actor.ledger.append(contentsOf: events) }
            var lines = ""
            for (event, sequence) in zip(events, sequences) {
                let id = (try? JSONDecoder().decode(TaskID.self, from: Data(event.payload)))?.id ?? "-"
                lines += "ack \(sequence) \(event.type) \(id) .\n"
            }
            ack.write(String(lines.dropLast()))
        } catch {
            die("append \(role): \(error)")
        }
        batches += 1
        if checkEvery > 0, batches % checkEvery == 0 { actor.check() }
    }
    say("appended \(batches) suspensions \(suspensions.value) suspended-calls \(refusedWhileSuspended.value)")
}

/// Opens the ledger writable with task-list VERSION registered, runs its build
/// (`ledger.projections.build()`: what a host app calls), and prints "open STATUS APPLIEDTHROUGH"
/// of that version's record.
func taskOpen(dir: String, version: Int, durability: String) {
    var options = LedgerOptions(role: "app")
    options.durability = LedgerDurability(rawValue: durability) ?? .durable
    options.projections = taskProjections(version)
    options.projectionBuilds = .whenAsked
    do {
        let ledger = try Ledger(path: dir, options: options)
        try ledger.projections.build()
        guard let info = try ledger.projections.list().first(where: { $0.name == TaskList.name && $0.version == version }) else { die("no record after the build") }
        say("open \(info.status) \(info.appliedThrough)")
    } catch {
        die("task-open: \(error)")
    }
}

/// Opens with the task list registered while its build is due (the background builder runs
/// it), and once a step has committed, `Ledger.suspend()` in the middle of the build: says
/// "suspended THROUGH" (the record's progress then). `CTL/resume` → resumes and reads the
/// projection until it answers — a read refused with `projectionBuilding` starts the builder
/// again (the suspension stopped it) — and says "ready ROWS THROUGH"; `CTL/exit`.
func taskBuildSuspend(dir: String, control: String) {
    var options = LedgerOptions(role: "app")
    options.projections = [TaskList.self]
    options.durability = .none
    do {
        let ledger = try Ledger(path: dir, options: options)
        func record() throws -> ProjectionInfo? { try ledger.projections.list().first { $0.name == TaskList.name } }
        var info = try record()
        while !(info?.status == "building" && (info?.appliedThrough ?? 0) > (info?.builtFrom ?? 0)) {
            usleep(1_000)
            info = try record()
        }
        try Ledger.suspend(waitingUpTo: 5)
        say("suspended \(info?.appliedThrough ?? 0)")
        awaitFile(control + "/resume")
        Ledger.resume()
        // Until the record says ready through the head (a read answers already when at most the
        // catch-up bound is left, replaying it: the build is not finished then).
        while true {
            let read = Result { () throws(LedgerError) in try ledger.read { try $0.projection(TaskList.self).contents(limit: 1) } }
            if case .failure(let error) = read {
                guard case .projectionBuilding = error else { throw error }  // refused while building: the read started the builder
            }
            if let done = try record(), done.status == "ready", try done.appliedThrough == ledger.read({ try $0.head() }) { break }
            usleep(10_000)
        }
        let done = try record()
        say("ready \(done?.rows ?? -1) \(done?.appliedThrough ?? 0) \(done?.status ?? "none")")
        awaitFile(control + "/exit")
    } catch {
        die("task-build-suspend: \(error)")
    }
}

/// Compacts with retainedTail 0 over and over until STOPFILE exists; prints "runs N trimmed T".
func compactUntil(dir: String, stopFile: String) {
    let ledger = openLedger(dir, role: "compactor", durability: "none")
    let compactor = Compactor(ledger: ledger, policy: compactionPolicy(tail: 0, chunk: 200))
    var runs = 0, trimmed = 0
    say("compacting")
    while !FileManager.default.fileExists(atPath: stopFile) {
        do {
            trimmed += try compactor.runOnce().eventsTrimmed
            runs += 1
        } catch {
            die("compact-until: \(error)")
        }
        usleep(1000)
    }
    say("runs \(runs) trimmed \(trimmed)")
}

let args = CommandLine.arguments
guard args.count >= 3 else { die("usage: LedgerTestAgent <mode> <dir> …") }
func arg(_ i: Int) -> String {
    guard i < args.count else { die("missing argument \(i)") }
    return args[i]
}
func int(_ i: Int) -> Int {
    guard let value = Int(arg(i)) else { die("argument \(i) is not an integer") }
    return value
}

switch args[1] {
case "write":   // write DIR ROLE COUNT SEED ACKFILE [MAXBATCH] [DURABILITY]
    writer(dir: arg(2), role: arg(3), count: int(4), seed: UInt64(int(5)), ackPath: arg(6),
           maxBatch: args.count > 7 ? int(7) : 100, durability: args.count > 8 ? arg(8) : "durable")
case "read":    // read DIR COUNT TIMEOUT
    reader(dir: arg(2), count: int(3), timeout: Double(int(4)))
case "lmdb-fill":  // lmdb-fill DIR START COUNT SIZE INITIALMAP
    lmdbFill(dir: arg(2), start: int(3), count: int(4), size: int(5), initialMap: int(6))
case "hold-reader":  // hold-reader DIR
    holdReader(dir: arg(2))
case "hold-readers":  // hold-readers DIR LIMIT
    holdReaders(dir: arg(2), limit: int(3))
case "append-lines":  // append-lines DIR   (keys on stdin)
    appendLines(dir: arg(2))
case "append-key":   // append-key DIR KEY DATA
    appendKey(dir: arg(2), key: arg(3), data: arg(4))
case "open":  // open DIR [ro]
    openAndCount(dir: arg(2), readOnly: args.count > 3 && args[3] == "ro")
case "upgrade-then-die":  // upgrade-then-die DIR
    upgradeThenDie(dir: arg(2))
case "compact":  // compact DIR TAIL CHUNK   (env FAULT_PHASE, FAULT_COUNT)
    compactOnce(dir: arg(2), tail: int(3), chunk: int(4))
case "compact-loop":  // compact-loop DIR SECONDS TAIL
    compactLoop(dir: arg(2), seconds: Double(int(3)), tail: int(4))
case "consume-check":  // consume-check DIR NAME EXPECTED TIMEOUT
    consumeCheck(dir: arg(2), name: arg(3), expected: UInt64(int(4)), timeout: Double(int(5)))
case "widget-reader":  // widget-reader DIR SECONDS
    widgetReader(dir: arg(2), seconds: Double(int(3)))
case "suspend-cycle":  // suspend-cycle DIR CONTROLDIR
    suspendCycle(dir: arg(2), control: arg(3))
case "hold-open-lock":  // hold-open-lock DIR
    holdOpenLock(dir: arg(2))
case "stall-in-write":  // stall-in-write DIR SECONDS
    stallInWrite(dir: arg(2), seconds: int(3))
case "spin-in-write":  // spin-in-write DIR SECONDS
    spinInWrite(dir: arg(2), seconds: int(3))
case "badge-burst":  // badge-burst DIR COUNT
    badgeBurst(dir: arg(2), count: int(3))
case "sync-message":  // sync-message DIR ID TITLE
    syncMessage(dir: arg(2), id: arg(3), title: arg(4))
case "flow-actor":  // flow-actor DIR ROLE CONTROLDIR START
    await flowActor(dir: arg(2), role: arg(3), control: arg(4), start: int(5))
case "batch-consumer":  // batch-consumer DIR NAME EXPECTED CYCLES
    await batchConsumer(dir: arg(2), name: arg(3), expected: int(4), cycles: int(5))
case "wait-change":  // wait-change DIR AFTER
    await waitChange(dir: arg(2), after: UInt64(int(3)))
case "task-actor":  // task-actor DIR ROLE VERSION SEED ACKFILE COUNT SUSPEND CHECKEVERY [STOPFILE]
    taskActor(dir: arg(2), role: arg(3), version: int(4), seed: UInt64(int(5)), ackPath: arg(6), count: int(7),
              suspend: int(8) != 0, checkEvery: int(9), stopFile: args.count > 10 ? arg(10) : nil)
case "task-build-suspend":  // task-build-suspend DIR CONTROLDIR
    taskBuildSuspend(dir: arg(2), control: arg(3))
case "task-open":  // task-open DIR VERSION [DURABILITY]
    taskOpen(dir: arg(2), version: int(3), durability: args.count > 4 ? arg(4) : "durable")
case "compact-until":  // compact-until DIR STOPFILE
    compactUntil(dir: arg(2), stopFile: arg(3))
default:
    die("unknown mode \(args[1])")
}
