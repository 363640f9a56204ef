import Foundation

/// The one rule for identifiers the ledger stores and sync carries — message ids, action ids,
/// idempotency keys, a device ledger's id: compared **byte for byte** (their UTF-8), so only
/// text in Unicode Normalization Form C (two spellings of one text would otherwise be two
/// messages), and no U+0000 (PostgreSQL, the sync server's store, cannot hold it in text).
/// The ledger refuses such an identifier at append (``LedgerError/invalidEvent(index:field:reason:)``,
/// nothing written); the sync server refuses it by the same function, so what one accepts
/// the other does (docs/semantics.md, "Identifiers").
///
/// ```swift
/// let fine = IdentifierRule.problem("m42")          // nil
/// let refused = IdentifierRule.problem("e\u{301}")  // "is not in Unicode Normalization Form C …"
/// ```
public enum IdentifierRule {
    /// Why `text` cannot be an identifier, or nil when it can. ASCII text costs one pass over
    /// its bytes; only other text is normalised to be compared.
    public static func problem(_ text: String) -> String? {
        var ascii = true
        for byte in text.utf8 {
            if byte == 0 { return "contains U+0000 (NUL), which no text column can hold" }
            if byte >= 0x80 { ascii = false }
        }
        if !ascii, !text.precomposedStringWithCanonicalMapping.utf8.elementsEqual(text.utf8) {
            return "is not in Unicode Normalization Form C (identifiers are compared byte for byte: send the NFC form)"
        }
        return nil
    }
}

extension DomainEvent {
    /// Refuses an event whose identifiers break ``IdentifierRule`` (message ids, action ids, a
    /// `markRead`/`openMessage` target), naming the field as its payload's rules do. Called when
    /// an event is **appended**, never when a stored one is read: an event an older library
    /// stored with such an id still decodes, replays and rebuilds (a read-time check would turn
    /// it into a damaged record, and stop every reader at it).
    func checkIdentifiers(index: Int) throws(LedgerError) {
        func check(_ id: String, _ field: @autoclosure () -> String) throws(LedgerError) {
            if let problem = IdentifierRule.problem(id) {
                throw .invalidEvent(index: index, field: field(), reason: "\(String(reflecting: id)) \(problem)")
            }
        }
        switch self {
        case .inboxSynced(let sync):
            for (i, message) in sync.messages.enumerated() { try check(message.id, "data.messages[\(i)].id") }
            for (i, id) in sync.removed.enumerated() { try check(id, "data.removed[\(i)]") }
        case .messageRead(let change):
            for (i, id) in change.ids.enumerated() { try check(id, "data.ids[\(i)]") }
        case .messageRemoved(let removal):
            for (i, id) in removal.ids.enumerated() { try check(id, "data.ids[\(i)]") }
        case .widgetAction(let action):
            try check(action.actionID, "data.actionID")
            if action.kind == .markRead || action.kind == .openMessage, let target = action.target { try check(target, "data.target") }
        case .actionCompleted(let completion):
            try check(completion.actionID, "data.actionID")
        case .pushReceived(let push):
            try check(push.messageID, "data.messageID")  // a message it carries has the same id
        case .badgeAdjusted, .sharedSettled, .custom:
            return
        }
    }
}
