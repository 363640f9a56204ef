import InboxLedger

// The task-tracker example of docs/apps.md ("Your own read models"), shared by the tests and the
// test agent's processes: tasks added by the host app, marked done from the widget.

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

/// Version 1: one row per task, open tasks first by day then title; the document counts them.
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
            guard var row = try state.row(done.id), !row.done else { return }  // unknown or already done: nothing
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

/// Version 2 of the same projection: done tasks are dropped from the list instead of kept
/// (the document still counts them).
public struct TaskListV2: LedgerProjection {
    public typealias Row = TaskList.Row
    public typealias Document = TaskList.Document
    public static let name = TaskList.name
    public static let version = 2
    public static let eventTypes = TaskList.eventTypes
    public static let initialDocument = Document()

    public static func order(of row: Row, key: String) -> ProjectionOrder? { ProjectionOrder(.int(row.day), .string(row.title)) }

    public static func apply(_ event: Event, to state: inout ProjectionUpdate<TaskListV2>) throws {
        switch event.baseType {
        case TaskAdded.eventType:
            let added = try event.decode(as: TaskAdded.self)
            if try state.row(added.id) != nil { state.document.open -= 1 }
            try state.set(Row(title: added.title, day: added.day, done: false), for: added.id)
            state.document.open += 1
        case TaskDone.eventType:
            let done = try event.decode(as: TaskDone.self)
            guard try state.row(done.id) != nil else { return }
            state.removeRow(done.id)
            state.document.open -= 1
            state.document.done += 1
        default:
            let removed = try event.decode(as: TaskRemoved.self)
            guard try state.row(removed.id) != nil else { return }
            state.removeRow(removed.id)
            state.document.open -= 1
        }
    }
}
