// The shared notes and the task list of docs/apps.md ("The notes and the tasks on every
// device"), with sync: each device of the user edits them offline, and after a sync every device
// shows the same notes and tasks — the fold of the server's order (docs/semantics.md, "Custom
// events on every device"). `make demo-sync` runs it on two devices.
//
//   shared-notes DIR edit NOTE TEXT [--role R]          edit a note (as role R, default app)
//   shared-notes DIR add-task ID TITLE [--role R]       add a task
//   shared-notes DIR done ID [--role R]                 tick a task done
//   shared-notes DIR show                               print the notes and the tasks
//   shared-notes DIR sync --server URL --token T [--watch]   sync once (or until killed)

import Foundation
import InboxLedger
import InboxLedgerSync

struct NoteEdited: LedgerEvent {
    static let eventType = "com.example.note-edited"
    var noteID: String
    var text: String
}

struct TaskAdded: LedgerEvent {
    static let eventType = "com.example.task-added"
    var id: String
    var title: String
}

struct TaskDone: LedgerEvent {
    static let eventType = "com.example.task-done"
    var id: String
}

/// The notes, last edited first, each saying who edited it and when (its origin's, on every device).
struct SharedNotes: LedgerProjection {
    struct Row: Codable, Sendable, Equatable {
        var text: String
        var editedAt: Timestamp
        var editedBy: String
        var synced: Bool
    }
    static let name = "com.example.notes"
    static let version = 1
    static let eventTypes: Set<String> = [NoteEdited.eventType]

    static func order(of row: Row, key: String) -> ProjectionOrder? {
        ProjectionOrder(.descending(.int(row.editedAt.micros)))
    }

    static func apply(_ event: Event, to state: inout ProjectionUpdate<SharedNotes>) throws {
        let edit = try event.decode(as: NoteEdited.self)
        let synced = if case .pending = state.placement { false } else { true }
        try state.set(Row(text: edit.text, editedAt: Timestamp(micros: event.timestampMicros), editedBy: event.origin.role, synced: synced),
                      for: edit.noteID)
    }
}

/// The tasks, open ones first; the document counts them.
struct TaskList: LedgerProjection {
    struct Row: Codable, Sendable, Equatable {
        var title: String
        var done: Bool
    }
    struct Document: Codable, Sendable, Equatable {
        var open = 0
        var done = 0
    }
    static let name = "com.example.tasks"
    static let version = 1
    static let eventTypes: Set<String> = [TaskAdded.eventType, TaskDone.eventType]
    static let initialDocument = Document()

    static func order(of row: Row, key: String) -> ProjectionOrder? { ProjectionOrder(.bool(row.done), .string(row.title)) }

    static func apply(_ event: Event, to state: inout ProjectionUpdate<TaskList>) throws {
        switch event.baseType {
        case TaskAdded.eventType:
            let added = try event.decode(as: TaskAdded.self)
            guard try state.row(added.id) == nil else { return }  // added on two devices: the first placed wins
            try state.set(Row(title: added.title, done: false), for: added.id)
            state.document.open += 1
        default:
            let done = try event.decode(as: TaskDone.self)
            guard var row = try state.row(done.id), !row.done else { return }
            row.done = true
            try state.set(row, for: done.id)
            state.document.open -= 1
            state.document.done += 1
        }
    }
}

/// The types every device shares.
let sharedTypes: Set<String> = [NoteEdited.eventType, TaskAdded.eventType, TaskDone.eventType]

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("shared-notes: \(message)\n".utf8))
    exit(64)
}

func option(_ name: String, in arguments: [String]) -> String? {
    guard let at = arguments.firstIndex(of: name), at + 1 < arguments.count else { return nil }
    return arguments[at + 1]
}

func open(_ path: String, role: String) throws -> Ledger {
    var options = LedgerOptions(role: role)
    options.create = true
    options.projections = [SharedNotes.self, TaskList.self]
    return try Ledger(path: path, options: options)
}

func show(_ ledger: Ledger) throws {
    let (notes, tasks) = try ledger.read { snapshot in
        (try snapshot.projection(SharedNotes.self).rows(limit: 100), try snapshot.projection(TaskList.self).contents(limit: 100))
    }
    for note in notes.sorted(by: { $0.key < $1.key }) {
        print("note \(note.key): \"\(note.row.text)\" (edited by \(note.row.editedBy) at \(note.row.editedAt.iso8601)\(note.row.synced ? "" : ", not synced yet"))")
    }
    for task in tasks.rows { print("task \(task.key): \(task.row.done ? "✓" : "○") \(task.row.title)") }
    print("tasks: \(tasks.document.open) open, \(tasks.document.done) done")
}

func sync(_ ledger: Ledger, path: String, arguments: [String]) async throws {
    guard let server = option("--server", in: arguments).flatMap(URL.init(string:)), let token = option("--token", in: arguments) else {
        fail("sync needs --server URL and --token TOKEN")
    }
    let configuration = SyncConfiguration(server: server, token: token, stateFile: path + ".sync-state", sharedCustomTypes: sharedTypes)
    let client = try SyncClient(ledger: ledger, configuration: configuration)
    guard arguments.contains("--watch") else {
        let report = try await client.syncOnce()
        print("sent \(report.sent), received \(report.received)")
        return
    }
    await client.run()   // until the process is stopped
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else { fail("usage: shared-notes DIR edit|add-task|done|show|sync …") }
let path = arguments[0]
let role = option("--role", in: arguments) ?? "app"
do {
    let ledger = try open(path, role: role)
    switch arguments[1] {
    case "edit" where arguments.count >= 4:
        try ledger.append(NoteEdited(noteID: arguments[2], text: arguments[3]))
    case "add-task" where arguments.count >= 4:
        try ledger.append(TaskAdded(id: arguments[2], title: arguments[3]))
    case "done" where arguments.count >= 3:
        try ledger.append(TaskDone(id: arguments[2]))
    case "show":
        try show(ledger)
    case "sync":
        try await sync(ledger, path: path, arguments: arguments)
    default:
        fail("unknown command or missing arguments: \(arguments.dropFirst().joined(separator: " "))")
    }
} catch {
    FileHandle.standardError.write(Data("shared-notes: \(error)\n".utf8))
    exit(1)
}
