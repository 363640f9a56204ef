import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// One identifier rule for the ledger and the sync server (docs/semantics.md, "Identifiers";
/// issue 40): what the server refuses — U+0000, text not in NFC — the ledger refuses at append,
/// typed, naming the field, nothing written; and what it accepts goes through.
@Suite struct IdentifierRuleTests {
    static let nul = "m\u{0}1"
    static let nfd = "e\u{301}"  // "é" decomposed

    @Test func theRuleRefusesNULAndTextNotInNFC() {
        #expect(IdentifierRule.problem("m42") == nil)
        #expect(IdentifierRule.problem("é") == nil, "precomposed: NFC")
        #expect(IdentifierRule.problem("😀-メッセージ") == nil)
        #expect(IdentifierRule.problem(Self.nul)?.contains("U+0000") == true)
        #expect(IdentifierRule.problem(Self.nfd)?.contains("Normalization Form C") == true)
        // An independent check of NFC on every case above: the decomposed form differs from its
        // precomposition; the precomposed ones equal theirs.
        for text in ["m42", "é", "😀-メッセージ", Self.nfd] {
            let isNFC = Array(text.precomposedStringWithCanonicalMapping.utf8) == Array(text.utf8)
            #expect((IdentifierRule.problem(text) == nil) == isNFC, "\(text.unicodeScalars.map(\.value))")
        }
    }

    @Test(arguments: [
        ("a message id in a read", DomainEvent.messageRead(ReadChange(ids: ["ok", nul], read: true)), nil as String?, "data.ids[1]"),
        ("a decomposed message id in a removal", .messageRemoved(MessageRemoval(ids: [nfd])), nil, "data.ids[0]"),
        ("a listed message's id", .inboxSynced(InboxSync(mode: .delta, messages: [InboxMessage(id: nfd, title: "t", sentAt: Timestamp(micros: 1))])), nil, "data.messages[0].id"),
        ("a listing's removal", .inboxSynced(InboxSync(mode: .delta, messages: [], removed: [nul])), nil, "data.removed[0]"),
        ("a mark-read target", .widgetAction(WidgetAction(actionID: "a1", kind: .markRead, target: nul)), nil, "data.target"),
        ("an action id", .actionCompleted(ActionCompletion(actionID: nfd, outcome: .done)), nil, "data.actionID"),
        ("a key", .messageRead(ReadChange(ids: ["m1"], read: true)), "k\u{0}", "key"),
        ("a decomposed key", .messageRead(ReadChange(ids: ["m1"], read: true)), "k" + nfd, "key"),
    ])
    func anAppendWithABadIdentifierIsRefusedAndWritesNothing(what: String, event: DomainEvent, key: String?, field: String) throws {
        let ledger = try Ledger.temporary(options: LedgerOptions(role: "test"))
        try ledger.append(.messageRead(ReadChange(ids: ["m0"], read: true)))
        do {
            try ledger.append(AppendRequest(event, key: key))
            Issue.record("\(what): accepted")
        } catch let LedgerError.invalidEvent(index, refusedField, reason) {
            #expect(index == 0 && refusedField == field, "\(what): \(refusedField): \(reason)")
        }
        #expect(try ledger.read { try $0.head() } == 1, "\(what): nothing written")
        // The same event with a good identifier goes through.
        try ledger.append(.messageRead(ReadChange(ids: ["é", "m-2"], read: true)), key: "k-é")
        #expect(try ledger.read { try $0.head() } == 2)
    }

    /// The rule is the append's, not the reader's: an event an older library stored with such an
    /// id still decodes (what replays, rebuilds and `verify` use), so upgrading never turns it
    /// into a damaged record that stops every reader at it.
    @Test func aStoredEventWithSuchAnIDStillDecodes() throws {
        let payload = Array(#"{"ids":["m\u0000","e\u0301"],"read":true}"#.utf8)
        guard case .messageRead(let change) = try DomainEvent.decode(type: "message.read", payload: payload) else {
            Issue.record("not a read")
            return
        }
        #expect(change.ids == [Self.nul.replacingOccurrences(of: "1", with: ""), Self.nfd])
        #expect(throws: LedgerError.self) { try DomainEvent.messageRead(change).checkIdentifiers(index: 0) }
    }
}
