import Testing
@testable import InboxLedger

/// The flag bits of the projection rows are on-disk format (docs/format.md, "Message record",
/// "Action record"): these tests pin them, and the bytes of whole rows, so that a change to the
/// option sets cannot change what a store holds.
@Suite struct ProjectionRecordTests {
    @Test func messageFlagBitsAreTheDocumentedOnes() {
        #expect(MessageFlags.hasSubheading.rawValue == 1)
        #expect(MessageFlags.hasIconURL.rawValue == 2)
        #expect(MessageFlags.hasExpiry.rawValue == 4)
        #expect(MessageFlags.serverRead.rawValue == 8)
        #expect(MessageFlags.hasLocalRead.rawValue == 16)
        #expect(MessageFlags.localRead.rawValue == 32)
        #expect(MessageFlags(localRead: nil).rawValue == 0)
        #expect(MessageFlags(localRead: false).rawValue == 16)
        #expect(MessageFlags(localRead: true).rawValue == 48)
        #expect(ActionFlags.hasTarget.rawValue == 1)
        #expect(ActionFlags.hasName.rawValue == 2)
    }

    /// A row with every optional field, byte for byte as docs/format.md lays it out.
    @Test func aFullMessageRowHasTheDocumentedBytes() {
        let record = MessageRecord(
            id: "m1", title: "T", subheading: "S", iconURL: "I", sentAt: 0x0102, expiresAt: 0x0304, serverRead: true,
            localRead: false, extras: ["b": "2", "a": "1"], changedAt: 7)
        var expected: [UInt8] = [1, 1 | 2 | 4 | 8 | 16]
        expected += [0x02, 0x01, 0, 0, 0, 0, 0, 0]  // sentAt
        expected += [0x04, 0x03, 0, 0, 0, 0, 0, 0]  // expiresAt
        expected += [7, 0, 0, 0, 0, 0, 0, 0]  // changedAt
        for text in ["m1", "T", "S", "I"] { expected += Self.string(text) }
        expected += [2, 0, 0, 0]
        for text in ["a", "1", "b", "2"] { expected += Self.string(text) }
        #expect(record.encode() == expected)
        #expect(MessageRecord.decode(expected) == record)
    }

    /// A row without optional fields, read by the server and overridden as read locally.
    @Test func aBareMessageRowHasTheDocumentedBytes() {
        let record = MessageRecord(
            id: "m2", title: "T", subheading: nil, iconURL: nil, sentAt: -1, expiresAt: nil, serverRead: false,
            localRead: true, extras: [:], changedAt: 1)
        var expected: [UInt8] = [1, 16 | 32]
        expected += [UInt8](repeating: 0xFF, count: 8)  // sentAt -1
        expected += [UInt8](repeating: 0, count: 8)  // no expiry
        expected += [1, 0, 0, 0, 0, 0, 0, 0]
        for text in ["m2", "T", "", ""] { expected += Self.string(text) }
        expected += [0, 0, 0, 0]
        #expect(record.encode() == expected)
        #expect(MessageRecord.decode(expected) == record)
        var bytes = expected
        MessageRecord.setLocalRead(nil, in: &bytes)
        #expect(bytes[1] == 0)
        MessageRecord.setLocalRead(false, in: &bytes)
        #expect(bytes[1] == 16)
    }

    @Test func actionRowsHaveTheDocumentedFlags() {
        let full = ActionRecord(actionID: "a", kind: .markRead, target: "m1", name: "n", payload: [], role: "widget", recordedAt: 5)
        let bare = ActionRecord(actionID: "a", kind: .markRead, target: nil, name: nil, payload: [], role: "widget", recordedAt: 5)
        #expect(full.encode().prefix(2) == [1, 3])
        #expect(bare.encode().prefix(2) == [1, 0])
        #expect(ActionRecord.decode(full.encode()) == full)
        #expect(ActionRecord.decode(bare.encode()) == bare)
    }

    static func string(_ text: String) -> [UInt8] {
        let utf8 = Array(text.utf8)
        return [UInt8(utf8.count), 0, 0, 0] + utf8
    }
}
