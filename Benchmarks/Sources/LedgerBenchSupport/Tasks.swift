// W9 of ledger-bench: an app's own projection (issue 28). The task tracker of docs/apps.md:
// events the app defines (tasks added, marked done, removed) and its projection, one row per
// task, open tasks first by day then title.
//
// The types copy Tests/TestSupport/TaskExample.swift (`TaskList` v1, same name, version, rows,
// order and apply) rather than import LedgerTestSupport: the cold reader (`ledger-bench-cold`)
// links only FoundationEssentials, as small as a widget extension, and TestSupport imports
// Foundation.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import InboxLedger

public struct TaskAdded: LedgerEvent, Equatable {
    public static let eventType = "com.example.task-added"
    public var id: String
    public var title: String
    /// The day it is due (days since 1970).
    public var day: Int64
    public init(id: String, title: String, day: Int64) {
        self.id = id
        self.title = title
        self.day = day
    }
}

public struct TaskDone: LedgerEvent, Equatable {
    public static let eventType = "com.example.task-done"
    public var id: String
    public init(id: String) { self.id = id }
}

public struct TaskRemoved: LedgerEvent, Equatable {
    public static let eventType = "com.example.task-removed"
    public var id: String
    public init(id: String) { self.id = id }
}

/// One row per task, open tasks first by day then title; the document counts them.
public struct TaskList: LedgerProjection {
    public struct Row: Codable, Sendable, Hashable {
        public var title: String
        public var day: Int64
        public var done: Bool
        public init(title: String, day: Int64, done: Bool) {
            self.title = title
            self.day = day
            self.done = done
        }
    }
    public struct Document: Codable, Sendable, Hashable {
        public var open = 0
        public var done = 0
        public init(open: Int = 0, done: Int = 0) {
            self.open = open
            self.done = done
        }
    }
    public static let name = "com.example.tasks"
    public static let version = 1
    public static let eventTypes: Set<String> = [TaskAdded.eventType, TaskDone.eventType, TaskRemoved.eventType]
    public static let initialDocument = Document()

    public static func order(of row: Row, key: String) -> ProjectionOrder? {
        ProjectionOrder(.bool(row.done), .int(row.day), .string(row.title))
    }

    public static func apply(_ event: Event, to state: inout ProjectionUpdate<TaskList>) throws {
        switch event.baseType {
        case TaskAdded.eventType:
            let added = try event.decode(as: TaskAdded.self)
            if let old = try state.row(added.id) {
                if old.done { state.document.done -= 1 } else { state.document.open -= 1 }
            }
            try state.set(Row(title: added.title, day: added.day, done: false), for: added.id)
            state.document.open += 1
        case TaskDone.eventType:
            let done = try event.decode(as: TaskDone.self)
            guard var row = try state.row(done.id), !row.done else { return }
            row.done = true
            try state.set(row, for: done.id)
            state.document.open -= 1
            state.document.done += 1
        default:
            let removed = try event.decode(as: TaskRemoved.self)
            guard let row = try state.row(removed.id) else { return }
            if row.done { state.document.done -= 1 } else { state.document.open -= 1 }
            state.removeRow(removed.id)
        }
    }
}

/// A deterministic task log. In every 10 events: 6 tasks added, the first 3 of them marked
/// done, the 4th removed — 5 rows per 10 events (50,000 rows at 100,000 events), 2 of them open.
public enum TaskLog {
    private static let titles = [
        "Water the plants", "Call the dentist about the appointment", "Pay the electricity bill",
        "Pick up the parcel from the post office", "Run 5 km", "Read 20 pages", "Stretch for 10 minutes",
        "Reply to Maya’s message", "Book the train to Lyon (€49 fare)", "Take out the recycling",
    ]

    /// The task added by event `i` (valid when `i % 10 < 6`), also used for the append workloads.
    public static func added(_ i: Int) -> TaskAdded {
        TaskAdded(id: "task-\(i)", title: titles[(i / 10) % titles.count] + " #\(i % 1000)", day: 20_400 + Int64((i * 7) % 365))
    }

    /// Event `i` of the log.
    public static func event(_ i: Int) throws(LedgerError) -> NewEvent {
        let block = i - i % 10
        switch i % 10 {
        case 0..<6: return try NewEvent(added(i))
        case 6..<9: return try NewEvent(TaskDone(id: "task-\(block + i % 10 - 6)"))
        default: return try NewEvent(TaskRemoved(id: "task-\(block + 3)"))
        }
    }

    /// Keys of rows that exist once `count` events are in the log (blocks complete), up to `limit`.
    public static func liveKeys(count: Int, limit: Int) -> [String] {
        var keys: [String] = []
        var block = 0
        while block + 10 <= count, keys.count < limit {
            for offset in [0, 1, 2, 4, 5] where keys.count < limit { keys.append("task-\(block + offset)") }
            block += 10
        }
        return keys
    }
}

/// A ledger holding task events, with the task projection registered or not.
public func openTaskLedger(_ directory: String, projection: Bool, role: String = "bench", builds: ProjectionBuilds = .inBackground,
                           readOnly: Bool = false) throws -> Ledger {
    var options = LedgerOptions(role: role)
    options.maxMapSize = 8 << 30
    options.projectionBuilds = builds
    options.readOnly = readOnly
    if projection { options.projections = [TaskList.self] }
    return try Ledger(path: directory, options: options)
}

/// What a widget shows of the task list: the first 10 rows' keys, read by a cold process (W9-C)
/// either from the app projection (`ledgerProjection`) or by scanning and folding the whole
/// log at launch (`ledgerFoldLog`: what docs/apps.md showed before app projections).
public func coldReadTasks(_ system: SystemKind, directory: String) throws -> [String] {
    switch system {
    case .ledgerProjection:
        let ledger = try openTaskLedger(directory, projection: true, role: "widget")
        let contents = try ledger.read({ try $0.projection(TaskList.self).contents(limit: 10) })
        guard contents.document.open >= 0 else { throw BenchFailure("negative open count") }
        return contents.rows.map(\.key)
    case .ledgerFoldLog:
        let ledger = try openTaskLedger(directory, projection: false, role: "widget")
        return try foldTaskLog(ledger).prefix(10).map(\.key)
    case .ledgerBuildDue:
        // Opened writable, as a widget with an App Intent is: the build is due, the opening
        // starts it in the background and returns; the first read says how far it got.
        let ledger = try openTaskLedger(directory, projection: true, role: "widget")
        switch Result(catching: { () throws(LedgerError) in try ledger.read({ try $0.projection(TaskList.self).contents(limit: 10) }) }) {
        case .success: return ["ready"]
        case .failure(.projectionBuilding): return ["building"]
        case .failure(let error): throw error
        }
    default:
        throw BenchFailure("\(system.rawValue) does not read tasks")
    }
}

/// The task list folded from the whole log: `events(after:)` in pages of 1,000, each task
/// event decoded and applied to a dictionary, then sorted in the projection's order.
public func foldTaskLog(_ ledger: Ledger) throws -> [(key: String, row: TaskList.Row)] {
    var rows: [String: TaskList.Row] = [:]
    var after: UInt64 = 0
    while true {
        let page = try ledger.read({ try $0.events(after: after, limit: 1000) })
        guard let last = page.last else { break }
        for event in page {
            switch event.baseType {
            case TaskAdded.eventType:
                let added = try event.decode(as: TaskAdded.self)
                rows[added.id] = TaskList.Row(title: added.title, day: added.day, done: false)
            case TaskDone.eventType:
                rows[try event.decode(as: TaskDone.self).id]?.done = true
            case TaskRemoved.eventType:
                rows[try event.decode(as: TaskRemoved.self).id] = nil
            default:
                continue
            }
        }
        after = last.sequence
    }
    // The projection's order: open first, then by day, title, key.
    return rows.map { (key: $0.key, row: $0.value) }.sorted { a, b in
        if a.row.done != b.row.done { return !a.row.done }
        if a.row.day != b.row.day { return a.row.day < b.row.day }
        if a.row.title != b.row.title { return Array(a.row.title.utf8).lexicographicallyPrecedes(Array(b.row.title.utf8)) }
        return Array(a.key.utf8).lexicographicallyPrecedes(Array(b.key.utf8))
    }
}
