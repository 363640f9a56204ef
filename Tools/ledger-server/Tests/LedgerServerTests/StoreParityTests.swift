import Foundation
import InboxLedger
import InboxLedgerSync
import Logging
import PostgresNIO
import Testing
@testable import ledger_server

/// `MemoryStore` against `PostgresStore` on one script of batches and publishes: every answer
/// and every refusal the same, then the same feeds and states — so the router tests, which run
/// on the memory store, test what the server does. Part of the script goes through the calls
/// of the previous releases on the same database — `ledger_up_v4` (feed entries without `seq`),
/// `ledger_up_v3` (a version-1 batch),
/// `ledger_up_v2` (twenty arrays) and the publish through `ledger_feed_append` — so a rolling
/// deploy's old and new servers agree on the new schema (before `ledger_up_v4`, batches
/// without custom events: those releases append none).
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct StoreParityTests {
    /// Which SQL function a step goes through on PostgreSQL.
    enum Call: Sendable { case current, v4, v3, v2 }

    /// A step of the script.
    enum Step: Sendable {
        case up(user: String, SyncWire.UpRequest, maxLedgers: Int = 100, maxCustom: Int = 100, via: Call = .current)
        case publish(user: String, SyncWire.PublishRequest, maxCustom: Int = 100, via: Call = .current)
    }

    /// An answer or a refusal, comparable across stores.
    enum Outcome: Equatable, Sendable {
        case up(UpOutcome)
        case published(SyncWire.PublishResponse)
        case refused(code: SyncWire.ErrorCode, message: String, acked: UInt64?)
    }

    @Test func theMemoryStoreAnswersAsPostgreSQLDoes() async throws {
        let removal = { (seq: UInt64, ids: [String]) in try wire(seq, .messageRemoved(MessageRemoval(ids: ids))) }
        let note = custom(4, [0xfe, 0x00], key: "note-4")
        let markRead = try wire(6, .widgetAction(WidgetAction(actionID: "a6", kind: .markRead, target: "m7")))
        let toggles = try wire(7, .messageRead(ReadChange(ids: ["m1", "m2", "m1"], read: false)))
        let messages = ["m1", "m2", "m3", "m8"].map { InboxMessage(id: $0, title: "Message \($0)", sentAt: Timestamp(micros: 1_795_000_000_000_000)) }
        // Custom events interleaved with a read: text with a key, no role (an older client) and
        // U+0000 (kept in base64), an empty payload of another type.
        let customs = [custom(13, Array(#"{"n":13}"#.utf8), key: "n-13", role: "widget"), try read(14, "m5"),
                       custom(15, Array("a\u{0}b".utf8), role: nil), custom(16, "com.example.other", [])]
        let script: [Step] = [
            .up(user: "ann", .init(ledger: "p1", after: 0, through: 5,
                                   events: [try read(1, "m1"), try read(2, "m2"), try removal(3, ["m3", "m2"]), note])),
            .up(user: "ann", .init(ledger: "p1", after: 0, through: 5, events: [try read(1, "m1"), try read(2, "m2")]), via: .v2),  // resent
            .up(user: "ann", .init(ledger: "p1", after: 3, through: 7, events: [note, markRead, toggles])),  // overlapping
            .up(user: "bob", .init(ledger: "p1", after: 7, through: 8, events: [try read(8, "x")])),  // another user's ledger
            .up(user: "ann", .init(ledger: "p1", after: 9, through: 10, events: [try read(10, "x")]), via: .v3),  // a gap
            .up(user: "ann", .init(ledger: "p1", after: 7, through: 12, events: [try read(11, "m4")], lostThrough: 10), via: .v2),
            .up(user: "ann", .init(ledger: "p1", after: 7, through: 12, events: [try read(11, "m4")], lostThrough: 10), via: .v3),  // losses once
            .publish(user: "ann", .init(messages: messages, removed: ["m9"])),
            // A restored ledger: sequences 2 and 5 again (another event; none held), then the old history resent.
            .up(user: "ann", .init(ledger: "p1", after: 1, through: 5, events: [try read(2, "m8", read: false), try read(5, "m5")])),
            .up(user: "ann", .init(ledger: "p1", after: 1, through: 2, events: [try read(2, "m2")]), via: .v2),
            .up(user: "ann", .init(ledger: "p1", after: 1, through: 5, events: [try read(2, "m8", read: false), try read(5, "m5")]), via: .v3),
            .up(user: "ann", .init(ledger: "p2", after: 0, through: 1, events: [try removal(1, ["m1"])]), maxLedgers: 2),
            .up(user: "ann", .init(ledger: "p3", after: 0, through: 1, events: [try read(1, "m1")]), maxLedgers: 2),  // one ledger too many
            .up(user: "ann", .init(ledger: "p3", after: 0, through: 1, events: [try read(1, "m1")]), maxLedgers: 3, via: .v2),
            .publish(user: "ann", .init(messages: [messages[0]]), via: .v3),  // removed by p2: stays removed
            .up(user: "bob", .init(ledger: "b1", after: 0, through: 2, events: [try read(1, "m1"), try read(2, "m1", read: false)])),
            .publish(user: "cyd", .init(messages: [], removed: ["m1"])),
            // Custom events (head 13, one custom entry so far): in order among the read, each once.
            .up(user: "ann", .init(ledger: "p1", after: 12, through: 16, events: customs)),
            .up(user: "ann", .init(ledger: "p1", after: 12, through: 16, events: customs)),  // resent: nothing more
            .up(user: "ann", .init(ledger: "p1", after: 14, through: 15, events: [custom(15, Array("other".utf8), key: "k-15")]), via: .v4),  // reused
            .publish(user: "ann", .init(messages: [], events: [published(Array("{}".utf8), key: "t-1"), published([0xff, 0x00], base64: true)])),
            .publish(user: "ann", .init(messages: [messages[3]], events: [published(Array(#"{"t":2}"#.utf8))])),
            // The bound: ann holds 8 custom entries; two more of at most 9 are refused, the listing with them.
            .up(user: "ann", .init(ledger: "p1", after: 16, through: 18, events: [custom(17, Array("a".utf8)), custom(18, Array("b".utf8))]), maxCustom: 9, via: .v4),
            .publish(user: "ann", .init(messages: [messages[1]], events: [published(Array("x".utf8)), published(Array("y".utf8))]), maxCustom: 9),
            .up(user: "ann", .init(ledger: "p1", after: 16, through: 18, events: [try read(17, "m3"), custom(18, Array("b".utf8))]), maxCustom: 9),
            .publish(user: "ann", .init(messages: [], events: [published(Array("z".utf8))]), maxCustom: 9),  // the tenth: refused
            .publish(user: "ann", .init(messages: [messages[1]]), maxCustom: 9),  // a listing alone is not bounded
            .up(user: "bob", .init(ledger: "b1", after: 2, through: 3, events: [custom(3, Array("bob's".utf8), key: "b-3")]), maxCustom: 1),
            .publish(user: "dan", .init(messages: [], events: [published(Array("first".utf8))]), maxCustom: 1),
        ]
        try await withHarness { h in
            try await withPostgresStore(h) { postgres in
                let memory = MemoryStore()
                let api = API(store: memory, limits: RequestLimits(), logger: Logger(label: "parity"))
                for (i, step) in script.enumerated() {
                    let (expected, actual): (Outcome, Outcome)
                    switch step {
                    case .up(let user, let request, let maxLedgers, let maxCustom, let via):
                        let batch = UpBatch(user: user, request: request, events: try api.validate(request), maxLedgers: maxLedgers,
                                            maxCustomEntries: maxCustom)
                        expected = await Self.outcome(memory) { .up(try await memory.up(batch)) }
                        actual = await Self.outcome(postgres) {
                            switch via {
                            case .current: .up(try await postgres.up(batch))
                            case .v4: .up(try await Self.upV4(batch, on: postgres.database))
                            case .v3: .up(try await Self.upV3(batch, on: postgres.database))
                            case .v2: .up(try await Self.upV2(batch, on: postgres.database))
                            }
                        }
                    case .publish(let user, let request, let maxCustom, let via):
                        var publication = try api.validatePublication(request, user: user)
                        publication.maxCustomEntries = Int64(maxCustom)
                        expected = await Self.outcome(memory) { .published(try await memory.publish(publication)) }
                        actual = await Self.outcome(postgres) {
                            via == .current ? .published(try await postgres.publish(publication))
                                : .published(try await Self.publishV1(publication, on: postgres.database))
                        }
                    }
                    #expect(actual == expected, "step \(i): \(step)")
                }
                for user in ["ann", "bob", "cyd", "dan", "eli"] {
                    for (after, limit) in [(UInt64(0), 1000), (2, 3), (12, 5), (17, 4), (30, 5)] {
                        let expected = try await memory.feed(user: user, after: after, limit: limit)
                        #expect(try await postgres.feed(user: user, after: after, limit: limit) == expected, "\(user)'s feed after \(after)")
                    }
                    var after: String?
                    repeat {
                        let expected = try await memory.state(user: user, after: after, limit: 2)
                        #expect(try await postgres.state(user: user, after: after, limit: 2) == expected, "\(user)'s state after \(after ?? "–")")
                        after = expected.nextAfter
                    } while after != nil
                }
                // What both stores hold, spelled out: ann's custom entries and their envelopes.
                let feed = try await postgres.feed(user: "ann", after: 0, limit: 1000)
                #expect(feed.head == 25 && feed.changes.count == 25)
                let customEntries = feed.changes.filter { $0.origin != nil }
                try #require(customEntries.map(\.seq) == [4, 14, 16, 17, 18, 19, 20, 22, 24])
                let origins = customEntries.map { $0.origin.map { [$0.ledger ?? "–", String($0.seq), $0.role, $0.key ?? "–"] } ?? [] }
                #expect(origins == [["p1", "4", "t", "note-4"], ["p1", "13", "widget", "n-13"], ["p1", "15", "device", "–"], ["p1", "16", "t", "–"],
                                    ["p1", "15", "t", "k-15"], ["–", "19", "server", "t-1"], ["–", "20", "server", "–"], ["–", "22", "server", "–"],
                                    ["p1", "18", "t", "–"]])
                #expect(customEntries.map(\.payloadBytes) == [[0xfe, 0x00], Array(#"{"n":13}"#.utf8), [0x61, 0x00, 0x62], [], Array("other".utf8),
                                                              Array("{}".utf8), [0xff, 0x00], Array(#"{"t":2}"#.utf8), Array("b".utf8)])
                #expect(customEntries.map { $0.payloadBase64 != nil } == [true, false, true, false, false, false, true, false, false])
                #expect(customEntries.filter { $0.payloadBase64 != nil }.allSatisfy { $0.payload.isEmpty })
                // A publish's events share its time (the server's clock then); the next publish is later.
                let published = customEntries.compactMap(\.origin?.time)[5...7]
                #expect(customEntries.map(\.origin?.time) == [4, 13, 15, 16, 15] + published.map { Optional($0) } + [18])
                #expect(published[5] == published[6] && published[6] < published[7] && published[5] > 1_700_000_000_000_000)
                #expect(feed.changes.filter { $0.origin == nil }.allSatisfy { $0.payloadBase64 == nil })
                #expect(try await postgres.feed(user: "dan", after: 0, limit: 10).changes.map(\.origin?.seq) == [1])
                #expect(try await postgres.feed(user: "bob", after: 0, limit: 10).changes.compactMap(\.origin?.key) == ["b-3"])
            }
        }
    }

    /// Runs `body`, or answers the refusal `store` makes of its error (a bug fails the test).
    static func outcome(_ store: some SyncStore, _ body: () async throws -> Outcome) async -> Outcome {
        do {
            return try await body()
        } catch {
            guard let refusal = store.apiError(for: error) else {
                Issue.record("\(type(of: store)): \(error)")
                return .refused(code: .internal, message: "\(error)", acked: nil)
            }
            return .refused(code: refusal.code, message: refusal.message, acked: refusal.acked)
        }
    }

    /// `batch` as the previous release sends it: a version-1 batch to `ledger_up_v3` (migration
    /// 5), which stays defined for rolling deploys — the batch without `maxCustomEntries`, and
    /// without custom entries, which that release does not make.
    static func upV3(_ batch: UpBatch, on database: Database) async throws -> UpOutcome {
        guard var object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(batch)) as? [String: Any],
              let events = object["events"] as? [[String: Any]] else { throw HarnessError(description: "the batch is not a JSON object") }
        object["version"] = 1
        object["maxCustomEntries"] = nil
        for event in events where (event["feed"] as? [[String: Any]])?.contains(where: { $0["role"] != nil }) == true {
            Issue.record("the previous release makes no custom entry: send event \(event["seq"] ?? "?") through ledger_up_v4")
        }
        return try await call("ledger_up_v3", object, on: database)
    }

    /// `batch` as the previous release sends it: version 2 to `ledger_up_v4` (migration 6), which
    /// stays defined for rolling deploys — its feed entries without the `seq` that
    /// `ledger_up_v5` (migration 7) reads.
    static func upV4(_ batch: UpBatch, on database: Database) async throws -> UpOutcome {
        guard var object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(batch)) as? [String: Any],
              var events = object["events"] as? [[String: Any]] else { throw HarnessError(description: "the batch is not a JSON object") }
        for i in events.indices {
            guard let feed = events[i]["feed"] as? [[String: Any]] else { continue }
            events[i]["feed"] = feed.map { entry in entry.filter { $0.key != "seq" } }
        }
        object["events"] = events
        return try await call("ledger_up_v4", object, on: database)
    }

    /// `SELECT function(object::jsonb)` and its answer.
    static func call(_ function: String, _ object: [String: Any], on database: Database) async throws -> UpOutcome {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        let logger = database.logger
        return try await database.withConnection { c in
            var outcome: UpOutcome?
            for try await answer in try await c.query("SELECT \(unescaped: function)(\(json)::jsonb)", logger: logger)
                .decode(UpOutcome.self) { outcome = answer }
            guard let outcome else { throw HarnessError(description: "\(function) answered no row") }
            return outcome
        }
    }

    /// A listing as the previous release publishes it: the statements of its `PostgresStore`,
    /// through `ledger_feed_append` (migration 4).
    static func publishV1(_ publication: Publication, on database: Database) async throws -> SyncWire.PublishResponse {
        guard publication.events.isEmpty else { throw HarnessError(description: "the previous release publishes no custom event") }
        let user = publication.user, request = publication.request
        let logger = database.logger
        return try await database.withConnection { c in
            try await c.query("BEGIN", logger: logger)
            do {
                try await c.query("INSERT INTO users (user_id) VALUES (\(user)) ON CONFLICT (user_id) DO UPDATE SET feed_head = users.feed_head", logger: logger)
                var flags: [String: Bool] = [:]
                var removedHere = Set<String>()
                for try await (id, read, removed) in try await c.query(
                    "SELECT message_id, read, removed FROM messages WHERE user_id = \(user) AND message_id = ANY(\(request.messages.map(\.id))::text[])",
                    logger: logger).decode((String, Bool?, Bool).self) {
                    if let read { flags[id] = read }
                    if removed { removedHere.insert(id) }
                }
                let listing = try PublishListing(request, flags: flags, removedHere: removedHere)
                let types = [PublishListing.type], payloads = [listing.payload], noIDs: [String] = [], noFlags: [Bool] = []
                try await c.query("""
                    SELECT ledger_feed_append(\(user), NULL, \(types)::text[], \(payloads)::text[], \(noIDs)::text[], \(noFlags)::bool[],
                        \(listing.removed)::text[], \(listing.listingIDs)::text[], \(listing.listings)::text[])
                    """, logger: logger)
                var head: Int64 = 0
                for try await h in try await c.query("SELECT feed_head FROM users WHERE user_id = \(user)", logger: logger).decode(Int64.self) { head = h }
                try await c.query("COMMIT", logger: logger)
                return SyncWire.PublishResponse(seq: UInt64(head))
            } catch {
                _ = try? await c.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// `batch` as the release before the previous one sends it: `ledger_up_v2` with twenty positional arrays
    /// (migration 4), which stays defined for rolling deploys.
    static func upV2(_ batch: UpBatch, on database: Database) async throws -> UpOutcome {
        var seqs: [Int64] = [], types: [String] = [], keys: [String] = [], times: [Int64] = [], payloads: [String] = [], binary: [Bool] = []
        var feedEvent: [Int64] = [], feedTypes: [String] = [], feedPayloads: [String] = []
        var readEvent: [Int64] = [], readIDs: [String] = [], readFlags: [Bool] = []
        var removedEvent: [Int64] = [], removedIDs: [String] = []
        for event in batch.events {
            seqs.append(event.seq)
            types.append(event.type)
            keys.append(event.key ?? "")
            times.append(event.time)
            payloads.append(event.payload)
            binary.append(event.base64)
            for entry in event.feedEntries(ledger: batch.ledger) {
                if entry.origin != nil { Issue.record("ledger_up_v2 (the release before the previous) makes no custom entry: send event \(event.seq) through ledger_up_v4") }
                feedEvent.append(event.seq)
                feedTypes.append(entry.type)
                feedPayloads.append(entry.payload)
            }
            for read in event.reads {
                readEvent.append(event.seq)
                readIDs.append(read.id)
                readFlags.append(read.read)
            }
            for id in event.removed {
                removedEvent.append(event.seq)
                removedIDs.append(id)
            }
        }
        let call: PostgresQuery = """
            SELECT out_acked, out_applied, out_changes, out_reused, out_lost FROM ledger_up_v2(\(batch.ledger), \(batch.user), \(batch.maxLedgers),
                \(batch.after), \(batch.through), \(batch.lostThrough)::int8,
                \(seqs)::int8[], \(types)::text[], \(keys)::text[], \(times)::int8[], \(payloads)::text[], \(binary)::bool[],
                \(feedEvent)::int8[], \(feedTypes)::text[], \(feedPayloads)::text[],
                \(readEvent)::int8[], \(readIDs)::text[], \(readFlags)::bool[], \(removedEvent)::int8[], \(removedIDs)::text[])
            """
        let logger = database.logger
        return try await database.withConnection { c in
            var outcome: UpOutcome?
            for try await (acked, applied, changes, reused, lost) in try await c.query(call, logger: logger).decode((Int64, Int64, Int64, Int64, Int64).self) {
                outcome = UpOutcome(acked: acked, applied: applied, changes: changes, reused: reused, lost: lost, refused: 0)
            }
            guard let outcome else { throw HarnessError(description: "ledger_up_v2 answered no row") }
            return outcome
        }
    }
}

/// Runs `body` with a `PostgresStore` on the harness's database (migrated), its pool running.
func withPostgresStore(_ h: Harness, _ body: (PostgresStore) async throws -> Void) async throws {
    let settings = ServerSettings(port: 0, database: try DatabaseURL(h.databaseURL), identity: IdentityConfiguration(developmentSecret: Harness.secret))
    let store = try await connectPostgresStore(settings, logger: Logger(label: "parity"))
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await store.database.client.run() }
        do {
            try await body(store)
        } catch {
            group.cancelAll()
            throw error
        }
        group.cancelAll()
    }
}
