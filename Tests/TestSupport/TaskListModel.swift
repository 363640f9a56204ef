import Foundation
import InboxLedger

/// An independent model of the task-list projections (TaskExample.swift), written from the
/// rules docs/apps.md states for them — a dictionary folded by hand, never the projections'
/// own `apply` — shared by the multi-process tests and the test agent's live checks.
///
/// - Version 1 (`TaskList`): one row per task added and not removed, marked done by TaskDone;
///   open tasks first, then by day, title and key; the document counts open and done rows.
/// - Version 2 (`TaskListV2`): done tasks are dropped from the list; rows by day, title and
///   key; the document counts the open rows and every task marked done while listed.
public struct TaskListModel: Sendable, Equatable {
    public enum Rules: Sendable, Equatable { case v1, v2 }

    public let rules: Rules
    public private(set) var rows: [String: TaskList.Row] = [:]
    /// Version 2: tasks dropped from the list because they were done.
    public private(set) var doneDropped = 0
    /// The last sequence folded.
    public private(set) var through: UInt64 = 0

    public init(_ rules: Rules) { self.rules = rules }

    private struct Identified: Decodable { var id: String }
    private struct Added: Decodable { var id: String; var title: String; var day: Int64 }

    /// Folds one event (events of other types only move ``through``).
    public mutating func apply(_ event: Event) throws {
        through = event.sequence
        let payload = Data(event.payload)
        switch event.baseType {
        case "com.example.task-added":
            let e = try JSONDecoder().decode(Added.self, from: payload)
            rows[e.id] = TaskList.Row(title: e.title, day: e.day, done: false)
        case "com.example.task-done":
            let e = try JSONDecoder().decode(Identified.self, from: payload)
            guard rows[e.id] != nil else { return }
            switch rules {
            case .v1: rows[e.id]?.done = true
            case .v2:
                rows[e.id] = nil
                doneDropped += 1
            }
        case "com.example.task-removed":
            let e = try JSONDecoder().decode(Identified.self, from: payload)
            rows[e.id] = nil
        default:
            break
        }
    }

    /// Folds every event of `events` after ``through`` and at or before `limit`.
    public mutating func fold(_ events: [Event], through limit: UInt64 = .max) throws {
        for event in events where event.sequence > through && event.sequence <= limit { try apply(event) }
    }

    /// The rows in the projection's order.
    public var ordered: [(key: String, row: TaskList.Row)] {
        rows.map { (key: $0.key, row: $0.value) }.sorted { a, b in
            if rules == .v1, a.row.done != b.row.done { return !a.row.done }
            if a.row.day != b.row.day { return a.row.day < b.row.day }
            if a.row.title != b.row.title { return a.row.title.utf8.lexicographicallyPrecedes(b.row.title.utf8) }
            return a.key.utf8.lexicographicallyPrecedes(b.key.utf8)
        }
    }

    public var document: TaskList.Document {
        switch rules {
        case .v1: TaskList.Document(open: rows.values.filter { !$0.done }.count, done: rows.values.filter(\.done).count)
        case .v2: TaskList.Document(open: rows.count, done: doneDropped)
        }
    }

    /// nil when `contents` (read with no limit) is what the model holds; else what differs.
    public func mismatch<P: LedgerProjection>(_ contents: ProjectionContents<P>) -> String? where P.Row == TaskList.Row, P.Document == TaskList.Document {
        let expected = ordered
        var problems: [String] = []
        let keys = contents.rows.map(\.key), expectedKeys = expected.map(\.key)
        if keys != expectedKeys {
            let extra = Set(keys).subtracting(expectedKeys).sorted().prefix(10)
            let missing = Set(expectedKeys).subtracting(keys).sorted().prefix(10)
            let at = zip(keys, expectedKeys).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(keys.count, expectedKeys.count)
            problems.append("keys differ from position \(at) (\(keys.count) read, \(expectedKeys.count) in the model); extra \(Array(extra)), missing \(Array(missing))")
        } else if contents.rows.map(\.row) != expected.map(\.row) {
            let differing = zip(contents.rows, expected).filter { $0.0.row != $0.1.row }.map { "\($0.0.key): \($0.0.row) != \($0.1.row)" }
            problems.append("rows differ: \(differing.prefix(5))")
        }
        if contents.document != document { problems.append("document \(contents.document) != model \(document)") }
        if contents.rowCount != rows.count { problems.append("rowCount \(contents.rowCount) != model \(rows.count)") }
        return problems.isEmpty ? nil : "through \(through): " + problems.joined(separator: "; ")
    }
}

/// The events of one actor of the task-tracker tests, by role: the host adds tasks (and
/// sometimes removes one), the widget marks them done, the extension removes tasks and
/// appends events the projection ignores (badge deltas).
public enum TaskWorkload {
    public static func batch(role: String, using generator: inout SeededGenerator, tasks: Int = 60) throws -> [NewEvent] {
        let size = Int.random(in: 1...3, using: &generator)
        return try (0..<size).map { _ in
            let id = "t\(Int.random(in: 0..<tasks, using: &generator))"
            let dice = Int.random(in: 0..<10, using: &generator)
            switch role {
            case "host":
                if dice == 0 { return try NewEvent(TaskRemoved(id: id)) }
                return try NewEvent(TaskAdded(id: id, title: "task \(Int.random(in: 0..<12, using: &generator))", day: Int64.random(in: 0..<7, using: &generator)))
            case "widget":
                return try NewEvent(TaskDone(id: id))
            default:  // an extension without the projection
                if dice < 4 { return try NewEvent(TaskRemoved(id: id)) }
                if dice < 6 { return try NewEvent(TaskAdded(id: id, title: "from extension", day: Int64.random(in: 0..<7, using: &generator))) }
                return NewEvent(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8))
            }
        }
    }
}
