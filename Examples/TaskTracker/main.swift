// The task tracker of docs/apps.md ("Your own read models"), played by real processes beside
// the inbox of `ledger simulate` (scripts/demo.sh): the host app adds tasks and processes each
// completion exactly once with a consumer, a widget reads today's list from the app projection
// and ticks tasks done. Neither `ledger simulate`'s processes nor the CLI register the
// projection; they append freely and the task processes' appends apply their events.
//
//   task-tracker DIR --setup                      create the ledger, register and build the projection
//   task-tracker DIR [--duration S] [--seed N]    run the host app and the widget, then print the list

import Foundation
import InboxLedger

struct TaskAdded: LedgerEvent {
    static let eventType = "com.example.task-added"
    var id: String
    var title: String
    var day: Int64   // the day it is due, in days since 1970
}

struct TaskDone: LedgerEvent {
    static let eventType = "com.example.task-done"
    var id: String
}

/// What the host app's consumer appends, in the transaction that moves its cursor, once per
/// completion it acted on.
struct TaskProcessed: LedgerEvent {
    static let eventType = "com.example.task-processed"
    var id: String
}

/// Today's list: one row per task, open tasks first by day and title; the document counts them.
struct TaskList: LedgerProjection {
    struct Row: Codable, Sendable, Equatable {
        var title: String
        var day: Int64
        var done: Bool
        var processed: Bool
    }
    struct Document: Codable, Sendable, Equatable {
        var open = 0
        var done = 0
        var processed = 0
    }
    static let name = "com.example.tasks"
    static let version = 1
    static let eventTypes: Set<String> = [TaskAdded.eventType, TaskDone.eventType, TaskProcessed.eventType]
    static let initialDocument = Document()

    static func order(of row: Row, key: String) -> ProjectionOrder? {
        ProjectionOrder(.bool(row.done), .int(row.day), .string(row.title))
    }

    static func apply(_ event: Event, to state: inout ProjectionUpdate<TaskList>) throws {
        switch event.baseType {
        case TaskAdded.eventType:
            let added = try event.decode(as: TaskAdded.self)
            guard try state.row(added.id) == nil else { return }
            try state.set(Row(title: added.title, day: added.day, done: false, processed: false), for: added.id)
            state.document.open += 1
        case TaskDone.eventType:
            let done = try event.decode(as: TaskDone.self)
            guard var row = try state.row(done.id), !row.done else { return }
            row.done = true
            try state.set(row, for: done.id)
            state.document.open -= 1
            state.document.done += 1
        default:
            let processed = try event.decode(as: TaskProcessed.self)
            guard var row = try state.row(processed.id), !row.processed else { return }
            row.processed = true
            try state.set(row, for: processed.id)
            state.document.processed += 1
        }
    }
}

/// SplitMix64, so `--seed` makes the tasks and taps repeatable.
struct Random: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
}

enum Demo {
    static let titles = ["Water the plants", "Call the bank", "Buy milk", "Book flights", "Renew passport", "Pay rent",
                         "Stretch for ten minutes", "Reply to Sam", "Back up the laptop", "Read a chapter"]
    static let taskCount = 40
    static var today: Int64 { Int64(Date().timeIntervalSince1970 / 86_400) }
}

func open(_ path: String, as role: String) throws -> Ledger {
    var options = LedgerOptions(role: role)
    options.projections = [TaskList.self]
    return try Ledger(path: path, options: options)
}

func option(_ arguments: [String], _ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

/// The host app: adds a task every few hundred milliseconds (up to `Demo.taskCount`), and acts on
/// each completion exactly once — its consumer's cursor and the `TaskProcessed` it appends
/// commit together.
func host(_ ledger: Ledger, seed: UInt64) async throws {
    let adder = Task {
        var random = Random(state: seed)
        for i in 0..<Demo.taskCount {
            let task = TaskAdded(id: "task-\(i)", title: Demo.titles[i % Demo.titles.count] + (i < Demo.titles.count ? "" : " (\(i / Demo.titles.count + 1))"),
                                 day: Demo.today + Int64(random.int(0...2)))
            try await ledger.append(task, key: "add-\(seed)-\(i)")
            try await Task.sleep(for: .milliseconds(random.int(100...300)))
        }
    }
    let consumer = try await ledger.consumers.consumer(named: "task-completions")
    while true {
        let batch: ConsumerBatch
        do {
            batch = try await consumer.next(limit: 100)
        } catch LedgerError.consumerGap {
            try consumer.rebase()   // a compaction trimmed past it (its lease expired): go on from there
            continue
        }
        if batch.events.isEmpty {
            _ = try await ledger.waitForChange(after: batch.after)
            continue
        }
        var processed: [NewEvent] = []
        for event in batch.events where event.baseType == TaskDone.eventType {
            let done = try event.decode(as: TaskDone.self)
            processed.append(try NewEvent(TaskProcessed(id: done.id)))   // here: a reminder cancelled, the server told
        }
        try await consumer.commit(batch, appending: processed)
        if Task.isCancelled { break }
    }
    adder.cancel()
}

/// The widget: reads what it shows (one short read transaction), ticks one of the open tasks.
func widget(_ ledger: Ledger, seed: UInt64) async throws {
    var random = Random(state: seed &* 31 &+ 7)
    while true {
        let shown = try await ledger.read({ try $0.projection(TaskList.self).contents(limit: 8) })
        let open = shown.rows.filter { !$0.row.done }
        if !open.isEmpty {
            let tapped = open[random.int(0...(open.count - 1))]
            try await ledger.append(TaskDone(id: tapped.key), key: "done-" + UUID().uuidString)   // one key per tap, not per task (docs/apps.md)
        }
        try await Task.sleep(for: .milliseconds(random.int(250...700)))
    }
}

func spawn(_ role: String, _ path: String, seed: UInt64) throws -> Process {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    let process = Process()
    process.executableURL = URL(fileURLWithPath: FileManager.default.isExecutableFile(atPath: executable) ? executable : CommandLine.arguments[0])
    process.arguments = ["_role", role, path, "--seed", String(seed)]
    try process.run()
    return process
}

func run(_ arguments: [String]) async throws {
    if arguments.first == "_role", arguments.count >= 3 {
        let seed = option(arguments, "--seed").flatMap(UInt64.init) ?? 1
        let ledger = try open(arguments[2], as: arguments[1] == "host" ? "app" : "widget")
        if arguments[1] == "host" { try await host(ledger, seed: seed) } else { try await widget(ledger, seed: seed) }
        return
    }
    guard let path = arguments.first, !path.hasPrefix("-") else {
        throw Failure(description: "usage: task-tracker DIR [--setup] [--duration SECONDS] [--seed N]")
    }
    let ledger = try open(path, as: "app")   // creates the ledger if needed, builds the projection
    if arguments.contains("--setup") {
        print("Task tracker: app projection \(TaskList.name) version \(TaskList.version) registered in \(path)")
        return
    }
    let duration = option(arguments, "--duration").flatMap(Double.init) ?? 10
    let seed = option(arguments, "--seed").flatMap(UInt64.init) ?? 1
    let host = try spawn("host", path, seed: seed)
    let widget = try spawn("widget", path, seed: seed)
    try await Task.sleep(for: .seconds(duration))
    widget.terminate()
    widget.waitUntilExit()
    // Let the host process every completion the widget recorded, then stop it.
    var settled = false
    let deadline = Date().addingTimeInterval(30)
    while !settled, host.isRunning, Date() < deadline {
        let document = try await ledger.read({ try $0.projection(TaskList.self).document() })
        settled = document.processed == document.done
        if !settled { try await Task.sleep(for: .milliseconds(50)) }
    }
    host.terminate()
    host.waitUntilExit()

    let list = try await ledger.read({ try $0.projection(TaskList.self).contents(limit: 6) })
    // The done tasks sort after the open ones: their rows start at the order (done = true).
    let done = try await ledger.read({ try $0.projection(TaskList.self).rows(from: ProjectionOrder(.bool(true)), limit: 4) })
    let info = try ledger.projections.list().first { $0.name == TaskList.name }
    var lines = ["", "Task tracker — app projection \(TaskList.name), beside the inbox"]
    lines.append("  the host app added \(list.rowCount) tasks, the widget ticked \(list.document.done) done,"
        + " the host's consumer processed \(list.document.processed)")
    if let info {
        let behind = list.head > info.appliedThrough
            ? " (head \(list.head): a read applies the \(list.head - info.appliedThrough) later events in memory)" : ""
        lines.append("  stored: version \(info.version), \(info.status), \(info.rows) rows, applied through \(info.appliedThrough)" + behind)
    }
    let today = Demo.today
    func show(_ task: ProjectionRow<TaskList>) {
        let due = task.row.day == today ? "today" : task.row.day == today + 1 ? "tomorrow" : "in \(task.row.day - today) days"
        let state = task.row.done ? (task.row.processed ? "done · processed by the host" : "done") : "due \(due)"
        lines.append("    \(task.row.done ? "✓" : "○") \(task.row.title.padding(toLength: 28, withPad: " ", startingAt: 0)) \(state)")
    }
    lines.append("  today's list, open first by day (\(list.document.open) open):")
    list.rows.filter { !$0.row.done }.forEach(show)
    lines.append("  done (\(list.document.done)):")
    done.forEach(show)
    print(lines.joined(separator: "\n"))
    guard settled else { throw Failure(description: "the host did not process every completion within 30 s") }
}

do {
    try await run(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("task-tracker: \(error)\n".utf8))
    exit(1)
}
