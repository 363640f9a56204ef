import InboxLedger

// The shared-notes example of docs/apps.md ("Shared notes instead of a shared Core Data store"),
// for the tests of notes edited on several devices (docs/sync.md, "Custom events on every device").

public struct NoteEdited: LedgerEvent, Equatable {
    public static let eventType = "com.example.note-edited"
    public var noteID: String
    public var text: String
    public init(noteID: String, text: String) {
        self.noteID = noteID
        self.text = text
    }
}

/// The notes, last edited first, each saying who edited it and when.
public struct SharedNotes: LedgerProjection {
    public struct Row: Codable, Sendable, Hashable {
        public var text: String
        public var editedAt: Timestamp
        public var editedBy: String
        public init(text: String, editedAt: Timestamp, editedBy: String) {
            self.text = text
            self.editedAt = editedAt
            self.editedBy = editedBy
        }
    }
    public static let name = "com.example.notes"
    public static let version = 1
    public static let eventTypes: Set<String> = [NoteEdited.eventType]

    public static func order(of row: Row, key: String) -> ProjectionOrder? {
        ProjectionOrder(.descending(.int(row.editedAt.micros)))
    }

    public static func apply(_ event: Event, to state: inout ProjectionUpdate<SharedNotes>) throws {
        let edit = try event.decode(as: NoteEdited.self)
        let row = Row(text: edit.text, editedAt: Timestamp(micros: event.timestampMicros), editedBy: event.origin.role)
        try state.set(row, for: edit.noteID)
    }
}
