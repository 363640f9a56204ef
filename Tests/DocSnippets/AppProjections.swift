// docs/apps.md, "Your own read models": the task-tracker widget and the shared notes.

import Foundation
import InboxLedgerSync
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

/// Today's list: one row per task, open tasks first by day and title; the document counts them.
struct TaskList: LedgerProjection {
    struct Row: Codable, Sendable, Equatable {
        var title: String
        var day: Int64
        var done: Bool
    }
    struct Document: Codable, Sendable, Equatable {
        var open = 0
        var done = 0
    }
    static let name = "com.example.tasks"
    static let version = 1   // raise it when apply, order or a shape changes: the list is rebuilt
    static let eventTypes: Set<String> = [TaskAdded.eventType, TaskDone.eventType]
    static let initialDocument = Document()

    static func order(of row: Row, key: String) -> ProjectionOrder? {
        ProjectionOrder(.bool(row.done), .int(row.day), .string(row.title))
    }

    /// A pure function of the event and the state: every process runs it, and a rebuild again.
    static func apply(_ event: Event, to state: inout ProjectionUpdate<TaskList>) throws {
        switch event.baseType {
        case TaskAdded.eventType:
            let added = try event.decode(as: TaskAdded.self)
            if let old = try state.row(added.id) {   // added again: replaced
                if old.done { state.document.done -= 1 } else { state.document.open -= 1 }
            }
            try state.set(Row(title: added.title, day: added.day, done: false), for: added.id)
            state.document.open += 1
        default:
            let done = try event.decode(as: TaskDone.self)
            guard var row = try state.row(done.id), !row.done else { return }   // unknown, or done already
            row.done = true
            try state.set(row, for: done.id)
            state.document.open -= 1
            state.document.done += 1
        }
    }
}

/// The host app adds a task: the list has it when the append returns.
func addTask(_ ledger: Ledger, id: String, title: String, day: Int64) async throws {
    try await ledger.append(TaskAdded(id: id, title: title, day: day))
}

struct TasksEntry: TimelineEntry {
    let date: Date
    let tasks: ProjectionContents<TaskList>?
}

/// The widget's entry: the counts and the first rows, from one short read transaction — no
/// scan of the log, however long it has grown (only the events appended by processes that do
/// not register the projection since its last append are applied, in memory: semantics.md).
func currentTasksEntry() -> TasksEntry {
    do {
        let tasks = try InboxStore.open(as: "widget").read { try $0.projection(TaskList.self).contents(limit: 5) }
        return TasksEntry(date: Date(), tasks: tasks)
    } catch {
        print("widget: \(error.localizedDescription)")   // projectionUnavailable: see "Upgrades"
        return TasksEntry(date: Date(), tasks: nil)
    }
}

/// The "done" button's intent, in `perform()`: the row is done in the event's own transaction,
/// so the widget's reload shows it before the host app runs. The key names the tap: `perform()`
/// mints `tapID` once, before the first try (`UUID().uuidString`), and a retry of that tap passes
/// the same one — the retry is recognised, while the next tap is a completion of its own.
func widgetMarkedDone(taskID: String, tapID: String) throws {
    try InboxStore.open(as: "widget").append(TaskDone(id: taskID), key: "done-" + tapID)
}

/// The host app acts on each completion exactly once (a reminder cancelled, the server told):
/// the consumer's cursor moves in the transaction of its commit, so a kill repeats nothing.
func processCompletions(_ ledger: Ledger, completed: @Sendable (TaskDone) async throws -> Void) async throws {
    let host = try await ledger.consumers.consumer(named: "task-completions")
    for try await batch in host.batches(limit: 50) {
        for event in batch.events where event.baseType == TaskDone.eventType {
            try await completed(try event.decode(as: TaskDone.self))   // .eventDecoding names the field on failure
        }
        try await host.commit(batch)
    }
}

#if canImport(SwiftUI)
import SwiftUI

/// The host app's list, current whichever process adds or ticks a task.
struct TodayView: View {
    @State private var tasks: ProjectionModel<TaskList>

    init(ledger: Ledger) {
        _tasks = State(initialValue: ProjectionModel(TaskList.self, in: ledger, limit: 50))
    }

    var body: some View {
        List(tasks.rows) { task in
            Text(task.row.done ? "✓ \(task.row.title)" : task.row.title)
        }
        .task { await tasks.run() }   // follows the projection while the view is shown
    }
}
#endif

struct NoteEdited: LedgerEvent {
    static let eventType = "com.example.note-edited"
    var noteID: String
    var text: String
}

/// The notes the app and its widget share, last edited first, each saying who edited it.
struct SharedNotes: LedgerProjection {
    struct Row: Codable, Sendable, Equatable {
        var text: String
        var editedAt: Timestamp
        var editedBy: String
    }
    static let name = "com.example.notes"
    static let version = 1
    static let eventTypes: Set<String> = [NoteEdited.eventType]

    static func order(of row: Row, key: String) -> ProjectionOrder? {
        ProjectionOrder(.descending(.int(row.editedAt.micros)))
    }

    static func apply(_ event: Event, to state: inout ProjectionUpdate<SharedNotes>) throws {
        let edit = try event.decode(as: NoteEdited.self)
        let row = Row(text: edit.text, editedAt: Timestamp(micros: event.timestampMicros), editedBy: event.origin.role)
        try state.set(row, for: edit.noteID)
    }
}

/// The widget's "quick note" intent: the edit and the notes' new state commit together.
func widgetEdited(noteID: String, text: String) throws {
    try InboxStore.open(as: "widget").append(NoteEdited(noteID: noteID, text: text))
}

/// The app's notes screen: the notes now, then after every edit by any process — the
/// widget's included — with no refetch, history token or Darwin notification.
func followNotes(_ ledger: Ledger, show: @escaping @MainActor ([ProjectionRow<SharedNotes>]) -> Void) async throws {
    for try await notes in LedgerObservation.tracking({ try $0.projection(SharedNotes.self).contents(limit: 100) }).removingDuplicates(by: { $0.sameState(as: $1) }).values(in: ledger) {
        await show(notes.rows)
    }
}

// docs/apps.md, "The notes and the tasks on every device".

/// The host app's sync: the notes and the tasks go to the user's other devices and come back from them.
func notesOnEveryDevice(_ ledger: Ledger, server: URL, token: String, stateFile: String) throws -> SyncClient {
    let configuration = SyncConfiguration(server: server, token: token, stateFile: stateFile,
                                          sharedCustomTypes: [NoteEdited.eventType, TaskAdded.eventType, TaskDone.eventType])
    return try SyncClient(ledger: ledger, configuration: configuration)   // records the shared types in the ledger
}

/// The notes, each saying whether the server has placed its last edit yet.
struct SyncedNotes: LedgerProjection {
    struct Row: Codable, Sendable, Equatable {
        var text: String
        var synced: Bool
    }
    static let name = "com.example.synced-notes"
    static let version = 1
    static let eventTypes: Set<String> = [NoteEdited.eventType]

    static func apply(_ event: Event, to state: inout ProjectionUpdate<SyncedNotes>) throws {
        let edit = try event.decode(as: NoteEdited.self)
        let synced = if case .pending = state.placement { false } else { true }   // "not synced yet" until the feed places it
        try state.set(Row(text: edit.text, synced: synced), for: edit.noteID)
    }
}
