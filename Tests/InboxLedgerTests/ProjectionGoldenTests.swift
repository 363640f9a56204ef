import Testing
@testable import InboxLedger

/// The projector's output on a fixed corpus of events — every projection table, byte for byte,
/// and the notes it reported — pinned as a digest together with the projection rules version it
/// was recorded under. Stored projections and snapshots hold what the rules built: a change to
/// that output without a new ``ProjectionRules/version`` would leave stores built by the old
/// rules looking valid (docs/operations.md, "Upgrades"), so it fails here.
@Suite struct ProjectionGoldenTests {
    /// The rules version the digest below was recorded under.
    static let recordedVersion: UInt32 = 2
    /// FNV-1a (64 bits) of ``dump(_:notes:)`` for ``corpus()``.
    static let recordedDigest = "03eefbf2d1c2182a"

    @Test func theProjectorsOutputOnTheCorpusIsPinnedWithTheRulesVersion() throws {
        let (store, notes) = try Self.project(Self.corpus())
        let dump = Self.dump(store, notes: notes)
        let digest = Self.fnv1a(dump)
        let advice = "record recordedVersion = \(ProjectionRules.version) and recordedDigest = \"\(digest)\" in ProjectionGoldenTests.swift"
        if digest != Self.recordedDigest {
            #expect(
                ProjectionRules.version != Self.recordedVersion,
                "The projector's output on the golden corpus changed (digest \(digest), recorded \(Self.recordedDigest)) while ProjectionRules.version is still \(Self.recordedVersion): bump the projection rules version (ProjectionUpgrade.swift, with its upgrade), then \(advice). Output:\n\(dump)")
            #expect(ProjectionRules.version == Self.recordedVersion, "New projection rules: \(advice)")
        } else {
            #expect(ProjectionRules.version == Self.recordedVersion, "The projection rules version changed: \(advice)")
        }
    }

    /// The corpus covers every built-in event type and its branches: full and delta syncs
    /// (with removals, expiries, server read flags and extras), local reads that a listing
    /// settles, removals, pushes with and without a message and badge, widget actions of every
    /// kind and their completions (done, failed, discarded, unknown, repeated), a duplicate
    /// action id, badge deltas and sets, and custom events.
    static func corpus() -> [DomainEvent] {
        func message(_ id: String, _ minute: Int, expires: Int? = nil, read: Bool? = nil, extras: [String: String]? = nil) -> InboxMessage {
            InboxMessage(
                id: id, title: "title " + id, subheading: id == "m2" ? "sub" : nil, iconURL: id == "m3" ? "https://example.com/i.png" : nil,
                sentAt: Timestamp(micros: Int64(minute) * 60_000_000), expiresAt: expires.map { Timestamp(micros: Int64($0) * 60_000_000) },
                read: read, extras: extras)
        }
        return [
            .inboxSynced(InboxSync(mode: .full, messages: [
                message("m1", 1), message("m2", 2, read: true), message("m3", 3, expires: 30, extras: ["k": "v", "a": "b"]),
                message("m4", 4, expires: 12), message("m5", 5),
            ])),
            .messageRead(ReadChange(ids: ["m1", "m5"], read: true)),
            .messageRead(ReadChange(ids: ["m2"], read: false)),
            .messageRead(ReadChange(ids: ["nope"], read: true)),
            .badgeAdjusted(.delta(3)),
            .badgeAdjusted(.delta(-1)),
            .pushReceived(PushReceived(messageID: "m6", badge: 4)),
            .pushReceived(PushReceived(messageID: "m7", message: message("m7", 7), badge: nil)),
            .widgetAction(WidgetAction(actionID: "a1", kind: .markRead, target: "m3")),
            .widgetAction(WidgetAction(actionID: "a2", kind: .openMessage, target: "m4")),
            .widgetAction(WidgetAction(actionID: "a3", kind: .custom, name: "snooze", payload: .object(["minutes": .integer(10), "why": .string("later")]))),
            .widgetAction(WidgetAction(actionID: "a4", kind: .markTaskDone, target: "m5")),
            .widgetAction(WidgetAction(actionID: "a1", kind: .markRead, target: "m1")),
            .actionCompleted(ActionCompletion(actionID: "a1", outcome: .done)),
            .actionCompleted(ActionCompletion(actionID: "a2", outcome: .failed, reason: "offline")),
            .actionCompleted(ActionCompletion(actionID: "a4", outcome: .discarded)),
            .actionCompleted(ActionCompletion(actionID: "a1", outcome: .failed)),
            .actionCompleted(ActionCompletion(actionID: "ghost", outcome: .done)),
            .messageRemoved(MessageRemoval(ids: ["m2", "m6", "unknown"])),
            .custom(type: "com.example.note-added", payload: Array(#"{"note":"n1"}"#.utf8)),
            .inboxSynced(InboxSync(mode: .delta, messages: [message("m8", 8, expires: 40), message("m1", 1, read: true)], removed: ["m5"])),
            .badgeAdjusted(.set(9)),
            .inboxSynced(InboxSync(mode: .delta, messages: [message("m9", 13, read: false)])),
            // A listing, then local changes it has not settled yet (the `local` table).
            .inboxSynced(InboxSync(mode: .full, messages: [
                message("m1", 1, read: true), message("m2", 2), message("m3", 3, expires: 300, read: true, extras: ["k": "v"]),
                message("m7", 7), message("m9", 13), message("m10", 10, expires: 200),
            ])),
            .messageRemoved(MessageRemoval(ids: ["m2"])),
            .pushReceived(PushReceived(messageID: "m11", badge: 5)),
            .messageRead(ReadChange(ids: ["m11", "m7"], read: true)),
            .messageRead(ReadChange(ids: ["m10"], read: false)),
            .custom(type: "com.example.other", payload: []),
            .badgeAdjusted(.delta(2)),
        ]
    }

    /// Applies `events` (sequence n at minute 10 + n) to an empty store, as a replay does: each
    /// one encoded, decoded from its stored form, then applied.
    static func project(_ events: [DomainEvent]) throws -> (MemoryStore, [ProjectionNote]) {
        let store = MemoryStore()
        let projector = try Projector(store: store)
        var notes: [ProjectionNote] = []
        for (index, domain) in events.enumerated() {
            let new = try domain.newEvent(key: "k\(index)")
            let sequence = UInt64(index + 1)
            let event = Event(
                sequence: sequence, timestampMicros: Int64(10 + index) * 60_000_000, origin: Origin(role: "golden", pid: 1),
                type: new.type, key: new.key, payload: new.payload)
            let decoded = try DomainEvent.decode(type: event.type, payload: event.payload)
            notes += try projector.apply(event, decoded)
        }
        try projector.finish()
        return (store, notes)
    }

    /// Every table's entries in key order, as hex, then the notes.
    static func dump(_ store: MemoryStore, notes: [ProjectionNote]) -> String {
        func hex(_ bytes: [UInt8]) -> String {
            let digits = Array("0123456789abcdef")
            return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
        }
        var lines: [String] = []
        for table in ProjectionTable.allCases {
            for (key, value) in store.sorted(table) { lines.append("\(table.rawValue) \(hex(key)) \(hex(value))") }
        }
        for note in notes { lines.append("note \(note)") }
        return lines.joined(separator: "\n")
    }

    static func fnv1a(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
