import Foundation
@testable @_spi(LedgerSync) import InboxLedger
import Testing
import TestSupport

/// The rule of docs/semantics.md, "Custom events on every device", one ledger at a time: what
/// the sync client appends (an event from the feed, a settlement) is appended here directly, so
/// each row of the rule table is checked on its own — inline, through a handle without the
/// projection (a read's and an append's catch-up), by a build of a new version, by `verify`,
/// and under compaction.
@Suite struct SharedEventFoldTests {
    /// Each note's text and how `apply` saw the event that wrote it.
    struct Seen: LedgerProjection {
        struct Row: Codable, Sendable, Hashable {
            var text: String
            var placement: String
        }
        struct Document: Codable, Sendable, Hashable { var applied = 0 }
        static let name = "test.seen"
        static let version = 1
        static let eventTypes: Set<String> = [NoteEdited.eventType]
        static let initialDocument = Document()

        static func apply(_ event: Event, to state: inout ProjectionUpdate<Seen>) throws {
            let edit = try event.decode(as: NoteEdited.self)
            let placement = switch state.placement {
            case .local: "local"
            case .pending: "pending"
            case .confirmed(let position): "confirmed \(position)"
            }
            try state.set(Row(text: edit.text, placement: placement), for: edit.noteID)
            state.document.applied += 1
        }
    }

    /// Version 2 of it, to show a build from the log gives what was kept inline.
    struct SeenV2: LedgerProjection {
        typealias Row = Seen.Row
        typealias Document = Seen.Document
        static let name = Seen.name
        static let version = 2
        static let eventTypes = Seen.eventTypes
        static let initialDocument = Document()
        static func apply(_ event: Event, to state: inout ProjectionUpdate<SeenV2>) throws {
            let edit = try event.decode(as: NoteEdited.self)
            let placement = switch state.placement {
            case .local: "local"
            case .pending: "pending"
            case .confirmed(let position): "confirmed \(position)"
            }
            try state.set(Row(text: edit.text, placement: placement), for: edit.noteID)
            state.document.applied += 1
        }
    }

    let directory = TemporaryDirectory()
    var path: String { directory.child("ledger") }

    func open(_ projections: [any LedgerProjection.Type] = [Seen.self], role: String = "app") throws -> Ledger {
        var options = LedgerOptions(role: role)
        options.projections = projections
        options.durability = .none
        options.durabilityFloor = .none
        return try Ledger(path: path, options: options)
    }

    func edit(_ note: String, _ text: String) throws -> NewEvent { try NewEvent(NoteEdited(noteID: note, text: text)) }

    /// Another device's edit, placed at feed `position`.
    func fromFeed(_ note: String, _ text: String, position: UInt64, time: Int64 = 1_000) throws -> NewEvent {
        let plain = try edit(note, text)
        return NewEvent.fromFeed(type: plain.type, payload: plain.payload, key: "sync-down-u-\(position)", time: time, role: "tablet",
                                 origin: FeedOrigin(ledger: "other", sequence: position, key: nil, position: position))
    }

    func settled(_ sequence: UInt64, at position: UInt64?) throws -> NewEvent {
        try NewEvent.settled(SharedSettlement(sequence: sequence, position: position), key: "settle-\(sequence)-\(position.map(String.init) ?? "refused")")
    }

    func expectHealthy(_ ledger: Ledger, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let report = try ledger.maintenance.verify()
        #expect(report.isHealthy, "\(report.findings) \(report.warnings)", sourceLocation: sourceLocation)
    }

    func rows(_ ledger: Ledger) throws -> [String: Seen.Row] {
        try Dictionary(uniqueKeysWithValues: ledger.read { try $0.projection(Seen.self).rows(limit: 100) }.map { ($0.key, $0.row) })
    }

    func pending(_ ledger: Ledger) throws -> [UInt64]? {
        try ledger.read { snapshot in try snapshot.tables.projections.get(.apps, AppProjectionSpace(Seen.self).record) }
            .map { try AppProjectionMeta.decode($0, path: path).pending } ?? nil
    }

    @Test func ownSharedEventsShowAtOnceAndTakeTheFeedsPlaceWhenSettled() throws {
        let ledger = try open()
        try ledger.shareEventTypes([NoteEdited.eventType])
        let mine = try ledger.append(edit("n1", "mine"))                  // 1: pending
        #expect(try ledger.read { try $0.event(at: mine) }?.source == .shared)
        #expect(try rows(ledger)["n1"] == Seen.Row(text: "mine", placement: "pending"))
        try ledger.append(fromFeed("n1", "theirs", position: 1))           // 2: placed before mine: rebase
        #expect(try rows(ledger)["n1"] == Seen.Row(text: "mine", placement: "pending"), "still mine on top")
        #expect(try pending(ledger) == [mine])
        try ledger.append(settled(mine, at: 2))                            // 3: mine is the feed's entry 2
        #expect(try rows(ledger)["n1"] == Seen.Row(text: "mine", placement: "confirmed 2"))
        #expect(try pending(ledger) == nil)
        // The document is state too: restored by each rebase, so it counts the feed's fold (theirs, mine).
        #expect(try ledger.read { try $0.projection(Seen.self).contents() }.document.applied == 2)
        try expectHealthy(ledger)
    }

    @Test func aFeedEntryPlacedAfterTheOwnEditWinsOnceSettled() throws {
        let ledger = try open()
        try ledger.shareEventTypes([NoteEdited.eventType])
        let mine = try ledger.append(edit("n1", "mine"))
        try ledger.append(contentsOf: [try settled(mine, at: 1), try fromFeed("n1", "theirs", position: 2)])   // one page
        #expect(try rows(ledger)["n1"] == Seen.Row(text: "theirs", placement: "confirmed 2"))
        #expect(try pending(ledger) == nil)
        try expectHealthy(ledger)
    }

    @Test func aRefusedSharedEventLeavesTheStateAsIfItHadNeverBeenAppended() throws {
        let ledger = try open()
        try ledger.shareEventTypes([NoteEdited.eventType])
        try ledger.append(fromFeed("n1", "before", position: 1))
        let refused = try ledger.append(edit("n1", "refused"))
        try ledger.append(edit("n2", "kept"))
        #expect(try rows(ledger)["n1"]?.text == "refused")
        try ledger.append(settled(refused, at: nil))
        #expect(try rows(ledger) == ["n1": Seen.Row(text: "before", placement: "confirmed 1"), "n2": Seen.Row(text: "kept", placement: "pending")])
        #expect(try pending(ledger) == [refused + 1])
        // A settlement of an event that is not pending changes nothing.
        try ledger.append(settled(refused, at: 9))
        #expect(try rows(ledger)["n1"]?.text == "before")
        try expectHealthy(ledger)
    }

    @Test func anAppCannotAppendASettlement() throws {
        let ledger = try open()
        let forged = try DomainEvent.sharedSettled(SharedSettlement(sequence: 1, position: 1)).newEvent()
        #expect(throws: LedgerError.self) { try ledger.append(forged) }
        #expect(try ledger.read { try $0.head() } == 0)
    }

    @Test func eventsOfTypesNotSharedAreLocalAndPendingOnesGoOnTopOfThem() throws {
        let ledger = try open()
        try ledger.append(edit("n1", "before sharing"))                  // not shared yet: local
        try ledger.shareEventTypes([NoteEdited.eventType])
        let mine = try ledger.append(edit("n1", "shared"))
        #expect(try ledger.read { try $0.events(after: 0, limit: 10) }.map(\.source) == [.local, .shared])
        try ledger.shareEventTypes([])
        try ledger.append(edit("n2", "after"))                           // local again; n1's pending edit stays on top
        #expect(try rows(ledger)["n1"] == Seen.Row(text: "shared", placement: "pending"))
        #expect(try rows(ledger)["n2"] == Seen.Row(text: "after", placement: "local"))
        #expect(try pending(ledger) == [mine])
    }

    /// Refuses a note whose text is "bad", whoever appends it.
    struct Strict: LedgerProjection {
        struct Row: Codable, Sendable, Hashable { var text: String }
        struct Bad: Error {}
        static let name = "test.strict"
        static let version = 1
        static let eventTypes: Set<String> = [NoteEdited.eventType]
        static func apply(_ event: Event, to state: inout ProjectionUpdate<Strict>) throws {
            let edit = try event.decode(as: NoteEdited.self)
            if edit.text == "bad" { throw Bad() }
            try state.set(Row(text: edit.text), for: edit.noteID)
        }
    }

    /// An event from the feed is never this process's own append: one `apply` refuses is skipped
    /// and counted, and the sync client's page goes in (docs/semantics.md, "Events `apply` refuses").
    @Test func aFeedEventApplyRefusesIsSkippedAndThePageIsAppended() throws {
        let ledger = try open([Strict.self])
        #expect(throws: LedgerError.self) { try ledger.append(edit("n0", "bad")) }   // its own: refused
        try ledger.append(contentsOf: [try fromFeed("n1", "bad", position: 1), try fromFeed("n2", "good", position: 2)])
        let contents = try ledger.read { try $0.projection(Strict.self).contents() }
        #expect(contents.rows.map(\.key) == ["n2"])
        #expect(try ledger.projections.list().first?.skippedEvents == 1)
    }

    /// The sync process registers no projection (like `ledger sync`): the feed's events and the
    /// settlements reach the projection through a read's catch-up (in memory) and then the next
    /// registered append's (stored), and a new version built from the log ends the same.
    @Test func aProcessWithoutTheProjectionImportsAndTheCatchUpsAndABuildFoldTheSame() throws {
        let app = try open()
        try app.shareEventTypes([NoteEdited.eventType])
        let mine = try app.append(edit("n1", "mine"))
        try app.append(edit("n2", "mine too"))
        let sync = try open([], role: "sync")
        try sync.append(contentsOf: [try fromFeed("n1", "theirs", position: 1), try settled(mine, at: 2), try fromFeed("n3", "third", position: 3)])
        let expected: [String: Seen.Row] = ["n1": .init(text: "mine", placement: "confirmed 2"), "n2": .init(text: "mine too", placement: "pending"),
                                            "n3": .init(text: "third", placement: "confirmed 3")]
        #expect(try rows(app) == expected, "a read's catch-up, in memory")
        try app.append(edit("n4", "later"))
        var withLater = expected
        withLater["n4"] = .init(text: "later", placement: "pending")
        #expect(try rows(app) == withLater, "an append's catch-up, stored")
        #expect(try pending(app) == [mine + 1, 6])
        try expectHealthy(app)
        // A new version, built from the log, equals the state kept inline.
        var options = LedgerOptions(role: "app")
        options.projections = [SeenV2.self]
        options.projectionBuilds = .whenAsked
        let v2 = try Ledger(path: path, options: options)
        try v2.projections.build()
        let built = try Dictionary(uniqueKeysWithValues: v2.read { try $0.projection(SeenV2.self).rows(limit: 100) }.map { ($0.key, $0.row) })
        #expect(built == withLater)
    }

    /// A pending event stays in the log while it is younger than the consumer lease (a rebase
    /// applies it again); the compaction report names it.
    @Test func compactionKeepsAPendingEventItMayApplyAgain() throws {
        let ledger = try open()
        try ledger.shareEventTypes([NoteEdited.eventType])
        try ledger.append(fromFeed("n0", "old", position: 1))
        let mine = try ledger.append(edit("n1", "mine"))
        for i in 0..<5 { try ledger.append(fromFeed("n\(i + 2)", "x", position: UInt64(i + 2))) }
        var policy = CompactionPolicy()
        policy.retainedTail = 0
        let report = try Compactor(ledger: ledger, policy: policy).runOnce()
        #expect(report.trimmed == 1...(mine - 1))
        #expect(report.blockers.contains(.pendingSharedEvent(name: Seen.name, sequence: mine)))
        try ledger.append(settled(mine, at: 7))
        #expect(try rows(ledger)["n1"] == Seen.Row(text: "mine", placement: "confirmed 7"))
        try expectHealthy(ledger)
    }
}
