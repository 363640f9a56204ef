import InboxLedger

struct NoteAdded: LedgerEvent {
    static let eventType = "com.example.note-added"
    var noteID: String
    var text: String
}

func addNote(_ ledger: Ledger) throws {
    try ledger.append(NoteAdded(noteID: "n1", text: "Buy milk"), key: "note-n1")   // a retry is recognised
}

/// Version 2 renamed `text` to `body` and added `pinned`.
struct NoteAddedV2: LedgerEvent {
    static let eventType = "com.example.note-added"
    static let eventVersion = 2
    var noteID: String
    var body: String
    var pinned: Bool
}

func openWithUpcaster(path: String) throws -> Ledger {
    var options = LedgerOptions(role: "app")
    options.upcasters = [
        EventUpcaster(NoteAdded.self, to: NoteAddedV2.self) { old in
            NoteAddedV2(noteID: old.noteID, body: old.text, pinned: false)
        },
    ]
    return try Ledger(path: path, options: options)   // reads now give version 2; nothing is rewritten
}

/// Read, decide, write: the append fails with `.headMoved` if any process appended in between.
func archiveIfUnchanged(_ ledger: Ledger) throws {
    let head = try ledger.read({ try $0.head() })
    let list = try ledger.read({ try $0.widgetList(limit: 100) })
    let stale = list.items.filter(\.read).map(\.id)
    guard !stale.isEmpty else { return }
    let removal = try DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: [], removed: stale)).newEvent()
    do {
        try ledger.append(AppendRequest([removal], expectingHead: head))
    } catch {
        guard case .headMoved = error else { throw error }
        try archiveIfUnchanged(ledger)   // someone moved first: decide again on what is there now
    }
}
