// The processes a round starts: writers, widget readers, the action consumer, the compactor.
// Each runs until its stop file appears (or it is SIGKILLed), and exits 0 when all was well.
import Foundation
import InboxLedger
import TestSupport

/// Options every child opens the ledger with: a small initial map, so that rounds grow it.
func openLedger(_ directory: String, role: String, durability: LedgerDurability = .durable, writeTimeout: Double = 5) throws -> Ledger {
    var options = LedgerOptions(role: role)
    options.durability = durability
    options.writeTimeout = writeTimeout
    options.initialMapSize = Torture.initialMapSize
    return try Ledger(path: directory, options: options)
}

func stopRequested(_ stopFile: String) -> Bool { FileManager.default.fileExists(atPath: stopFile) }

/// Appends one line to `path` with a single `write` (O_APPEND): a line is either whole or, if
/// the writer was killed inside the call, a torn last line that readers ignore.
func appendLine(_ path: String, _ line: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    guard fd >= 0 else { throw TortureFailure("cannot open \(path): errno \(errno)") }
    defer { close(fd) }
    let bytes = Array((line + "\n").utf8)
    guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
        throw TortureFailure("cannot write \(path): errno \(errno)")
    }
}

struct TortureFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Writers

/// `LEDGER_TORTURE_FAULT`: a deliberate bug for the runner's own tests (`phantom-ack`,
/// `double-append`); unset in real runs.
let injectedFault = ProcessInfo.processInfo.environment["LEDGER_TORTURE_FAULT"] ?? ""

/// The batch `batch` of logical writer `writer`: a pure function of its arguments, so a
/// restarted writer can send exactly the same batch again. Every event carries a tag
/// `writer:batch:index:size` (an extra payload field the ledger keeps and ignores); a keyed
/// batch has a key per event.
func makeBatch(seed: UInt64, generation: Int, writer: String, role: String, batch: Int) -> (events: [NewEvent], keyed: Bool) {
    var rng = SeededGenerator(seed: seed ^ UInt64(truncatingIfNeeded: (writer + ":\(batch)").hashValueStable))
    func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &rng)] }
    func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    let ids = (0..<16).map { "m\($0)" }
    let size = Int.random(in: 1...8, using: &rng)
    let keyed = chance(0.5)
    var events: [NewEvent] = []
    for i in 0..<size {
        let tag = "\(writer):\(batch):\(i):\(size)"
        var type: String
        var body: String
        switch (role, Int.random(in: 0..<10, using: &rng)) {
        case ("app", 0..<6):
            let chosen = Set((0..<Int.random(in: 1...4, using: &rng)).map { _ in pick(ids) }).sorted()
            let messages = chosen.map { id -> String in
                var fields = [#""id":"\#(id)""#, #""title":"\#(pick(["Order shipped", "Payment approved", "Gate change", "“Quote” €5"]))""#,
                              #""sentAt":"2026-11-\#(Int.random(in: 10...28, using: &rng))T0\#(Int.random(in: 0...9, using: &rng)):00:00Z""#]
                if chance(0.5) { fields.append(#""read":\#(chance(0.5))"#) }
                if chance(0.1) { fields.append(#""expiresAt":"\#(chance(0.5) ? "2001-01-01T00:00:00Z" : "2099-01-01T00:00:00Z")""#) }
                return "{" + fields.joined(separator: ",") + "}"
            }
            let full = chance(0.15)
            type = "inbox.synced"
            body = #""mode":"\#(full ? "full" : "delta")","messages":[\#(messages.joined(separator: ","))]"#
        case ("app", _):
            type = "message.read"
            body = #""ids":["\#(pick(ids))"],"read":\#(chance(0.7))"#
        case ("widget", 0..<6):
            let kind = pick(["markRead", "markTaskDone", "openMessage", "custom"])
            let extra = kind == "custom" ? #","name":"snooze""# : #","target":"\#(pick(ids))""#
            type = "widget.action"
            body = #""actionID":"a-\#(generation)-\#(tag)","kind":"\#(kind)"\#(extra)"#
        case ("widget", _):
            type = "message.read"
            body = #""ids":["\#(pick(ids))","\#(pick(ids))"],"read":\#(chance(0.5))"#
        case (_, 0..<5):
            type = "badge.adjusted"
            body = chance(0.8) ? #""delta":\#(Int.random(in: -3...3, using: &rng))"# : #""set":\#(Int.random(in: 0...9, using: &rng))"#
        default:
            type = "com.example.push-opened"  // a custom type: kept, not projected
            body = #""campaign":"c\#(Int.random(in: 0..<5, using: &rng))""#
        }
        events.append(NewEvent(type: type, payload: Array(#"{"tag":"\#(tag)",\#(body)}"#.utf8), key: keyed ? "k:\(generation):\(tag)" : nil))
    }
    return (events, keyed)
}

extension String {
    /// FNV-1a of the UTF-8 bytes: the same in every process (Swift's `hashValue` is seeded per process).
    var hashValueStable: UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }
}

/// A writer process: `threads` logical writers (`<name>.<t>`) appending batches concurrently
/// (group commit), each logging `try B` before and `ack B seq,seq,…` after its append returned.
/// On start it resumes each logical writer's log: a batch tried but not acknowledged is sent
/// again when it is keyed (idempotent), and skipped otherwise.
func runWriter(directory: String, name: String, role: String, threads: Int, seed: UInt64, generation: Int,
               durability: LedgerDurability, logDirectory: String, stopFile: String) throws {
    // Faults of this process's own: half the writers give up on a busy writer lock after 0.5 s
    // (another process may be SIGSTOPped inside its write), half suspend and resume every few
    // hundred milliseconds (what an app does when it goes to the background). Both make appends
    // fail with nothing written; the batch is then sent again.
    var faults = SeededGenerator(seed: UInt64(getpid()))
    let ledger = try openLedger(directory, role: role, durability: durability, writeTimeout: Bool.random(using: &faults) ? 0.5 : 5)
    let failures = Failures()
    let group = DispatchGroup()
    if Bool.random(using: &faults) {
        let seed = faults.next()
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            var rng = SeededGenerator(seed: seed)
            while !stopRequested(stopFile) {
                usleep(UInt32.random(in: 100_000...400_000, using: &rng))
                do { try Ledger.suspend(waitingUpTo: 6) } catch { failures.add("suspend: \(error)") }
                usleep(UInt32.random(in: 20_000...100_000, using: &rng))
                Ledger.resume()
            }
        }
    }
    for t in 0..<threads {
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            do {
                let writer = "\(name).\(t)"
                let log = "\(logDirectory)/\(writer).log"
                var next = 1
                var pendingRetry: Int?
                if let text = try? String(contentsOfFile: log, encoding: .utf8) {
                    for line in text.split(separator: "\n") {
                        let parts = line.split(separator: " ")
                        guard parts.count >= 2, let b = Int(parts[1]) else { continue }
                        if parts[0] == "try" { pendingRetry = b; next = max(next, b + 1) }
                        if parts[0] == "ack", pendingRetry == b { pendingRetry = nil }
                    }
                }
                func send(_ b: Int) throws {
                    let (events, keyed) = makeBatch(seed: seed, generation: generation, writer: writer, role: role, batch: b)
                    try appendLine(log, "try \(b)")
                    let sequences = try ledger.append(contentsOf: events)
                    try appendLine(log, "ack \(b) " + sequences.map(String.init).joined(separator: ","))
                    // Faults that the audit must catch (tests of the runner itself).
                    if injectedFault == "phantom-ack", b == 3 {
                        try appendLine(log, "ack 999999 \((sequences.last ?? 0) + 1)")  // a batch never written
                    }
                    if injectedFault == "double-append", !keyed, t == 0 {
                        _ = try ledger.append(contentsOf: events)  // a blind retry without keys
                    }
                }
                /// Sends batch `b` until it is acknowledged: a suspended process or a busy writer lock
                /// wrote nothing, so sending it again (keyed or not) cannot duplicate it.
                func sendUntilAcknowledged(_ b: Int) throws {
                    while !stopRequested(stopFile) {
                        do {
                            try send(b)
                            return
                        } catch let error as LedgerError {
                            switch error {
                            case .suspended, .writerBusy: usleep(5_000)
                            default: throw error
                            }
                        }
                    }
                }
                if let b = pendingRetry, makeBatch(seed: seed, generation: generation, writer: writer, role: role, batch: b).keyed {
                    try sendUntilAcknowledged(b)
                }
                while !stopRequested(stopFile) {
                    try sendUntilAcknowledged(next)
                    next += 1
                }
            } catch {
                failures.add("writer \(name).\(t): \(error)")
            }
        }
    }
    group.wait()
    if let failure = failures.first { throw TortureFailure(failure) }
}

final class Failures: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var messages: [String] = []
    func add(_ message: String) { lock.lock(); messages.append(message); lock.unlock() }
    var first: String? { lock.lock(); defer { lock.unlock() }; return messages.first }
}

// MARK: - Readers, consumer, compactor

/// A widget: reads the list, the version and pages of events, checking what must always hold.
func runReader(directory: String, stopFile: String) throws {
    let ledger = try openLedger(directory, role: "widget")
    var rng = SeededGenerator(seed: UInt64(getpid()))
    while !stopRequested(stopFile) {
        let list = try ledger.read({ try $0.widgetList(limit: 50) })
        for (a, b) in zip(list.items, list.items.dropFirst()) where a.sentAt < b.sentAt {
            throw TortureFailure("widget list out of order: \(a.id) before \(b.id)")
        }
        guard list.unreadCount >= list.items.filter({ !$0.read }).count, list.badge >= 0 else {
            throw TortureFailure("widget list inconsistent: unread \(list.unreadCount), badge \(list.badge)")
        }
        _ = try ledger.read({ try $0.widgetVersion() }) != list.version
        let head = try ledger.read({ try $0.head() })
        let from = UInt64.random(in: 0...max(1, head), using: &rng)
        let page = try ledger.read({ try $0.events(after: from, limit: 100) })
        for (a, b) in zip(page, page.dropFirst()) where b.sequence != a.sequence + 1 {
            throw TortureFailure("gap in a page of events: \(a.sequence) then \(b.sequence)")
        }
        usleep(500)
    }
}

/// The host app's action queue: completes every widget action once, the completion committed
/// with the consumer's cursor (exactly once, however often it is killed).
func runConsumer(directory: String, stopFile: String) throws {
    let ledger = try openLedger(directory, role: "host")
    let consumer = try ledger.consumers.consumer(named: "torture-actions")
    while !stopRequested(stopFile) {
        let batch = try consumer.next(limit: 20)
        if batch.events.isEmpty { usleep(2_000); continue }
        let completions = try batch.events.compactMap { event -> NewEvent? in
            guard event.type == DomainEvent.widgetActionType,
                  case .widgetAction(let action) = try DomainEvent.decode(type: event.type, payload: event.payload) else { return nil }
            return NewEvent(type: DomainEvent.actionCompletedType,
                            payload: Array(#"{"tag":"C:\#(action.actionID)","actionID":"\#(action.actionID)","outcome":"done"}"#.utf8))
        }
        _ = try consumer.commit(batch, appending: completions)
    }
}

/// The compaction worker: snapshots and trims to a short tail, over and over.
func runCompactor(directory: String, stopFile: String) throws {
    let ledger = try openLedger(directory, role: "compactor")
    var policy = CompactionPolicy()
    policy.retainedTail = 50
    policy.chunkSize = 40
    policy.triggerEvents = 1
    policy.keepSnapshots = 2
    let compactor = Compactor(ledger: ledger, policy: policy)
    while !stopRequested(stopFile) {
        _ = try compactor.runOnce()
        usleep(20_000)
    }
}
