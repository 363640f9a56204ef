import Foundation
import InboxLedger
import InboxLedgerSync
import Logging
import PostgresNIO
import Testing
@testable import ledger_server

/// `MemoryStore` against `PostgresStore` on one script of batches and publishes: every answer
/// and every refusal the same, then the same feeds and states — so the router tests, which run
/// on the memory store, test what the server does. Part of the script goes through
/// `ledger_up_v2`, the previous release's twenty-array call, on the same database: a rolling
/// deploy's old and new servers agree.
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct StoreParityTests {
    /// Which SQL function a step's batch goes through on PostgreSQL.
    enum Call: Sendable { case v3, v2 }

    /// A step of the script.
    enum Step: Sendable {
        case up(user: String, SyncWire.UpRequest, maxLedgers: Int = 100, via: Call = .v3)
        case publish(user: String, SyncWire.PublishRequest)
    }

    /// An answer or a refusal, comparable across stores.
    enum Outcome: Equatable, Sendable {
        case up(UpOutcome)
        case published(SyncWire.PublishResponse)
        case refused(code: SyncWire.ErrorCode, message: String, acked: UInt64?)
    }

    @Test func theMemoryStoreAnswersAsPostgreSQLDoes() async throws {
        let removal = { (seq: UInt64, ids: [String]) in try wire(seq, .messageRemoved(MessageRemoval(ids: ids))) }
        let note = SyncWire.UpEvent(Event(sequence: 4, timestampMicros: 4, origin: Origin(role: "t"), type: "com.example.note", key: "note-4",
                                          payload: [0xfe, 0x00]))
        let markRead = try wire(6, .widgetAction(WidgetAction(actionID: "a6", kind: .markRead, target: "m7")))
        let toggles = try wire(7, .messageRead(ReadChange(ids: ["m1", "m2", "m1"], read: false)))
        let messages = ["m1", "m2", "m3", "m8"].map { InboxMessage(id: $0, title: "Message \($0)", sentAt: Timestamp(micros: 1_795_000_000_000_000)) }
        let script: [Step] = [
            .up(user: "ann", .init(ledger: "p1", after: 0, through: 5,
                                   events: [try read(1, "m1"), try read(2, "m2"), try removal(3, ["m3", "m2"]), note])),
            .up(user: "ann", .init(ledger: "p1", after: 0, through: 5, events: [try read(1, "m1"), try read(2, "m2")]), via: .v2),  // resent
            .up(user: "ann", .init(ledger: "p1", after: 3, through: 7, events: [note, markRead, toggles])),  // overlapping
            .up(user: "bob", .init(ledger: "p1", after: 7, through: 8, events: [try read(8, "x")])),  // another user's ledger
            .up(user: "ann", .init(ledger: "p1", after: 9, through: 10, events: [try read(10, "x")])),  // a gap
            .up(user: "ann", .init(ledger: "p1", after: 7, through: 12, events: [try read(11, "m4")], lostThrough: 10), via: .v2),
            .up(user: "ann", .init(ledger: "p1", after: 7, through: 12, events: [try read(11, "m4")], lostThrough: 10)),  // losses once
            .publish(user: "ann", .init(messages: messages, removed: ["m9"])),
            // A restored ledger: sequences 2 and 5 again (another event; none held), then the old history resent.
            .up(user: "ann", .init(ledger: "p1", after: 1, through: 5, events: [try read(2, "m8", read: false), try read(5, "m5")])),
            .up(user: "ann", .init(ledger: "p1", after: 1, through: 2, events: [try read(2, "m2")]), via: .v2),
            .up(user: "ann", .init(ledger: "p1", after: 1, through: 5, events: [try read(2, "m8", read: false), try read(5, "m5")]), via: .v2),
            .up(user: "ann", .init(ledger: "p2", after: 0, through: 1, events: [try removal(1, ["m1"])]), maxLedgers: 2),
            .up(user: "ann", .init(ledger: "p3", after: 0, through: 1, events: [try read(1, "m1")]), maxLedgers: 2),  // one ledger too many
            .up(user: "ann", .init(ledger: "p3", after: 0, through: 1, events: [try read(1, "m1")]), maxLedgers: 3, via: .v2),
            .publish(user: "ann", .init(messages: [messages[0]])),  // removed by p2: stays removed
            .up(user: "bob", .init(ledger: "b1", after: 0, through: 2, events: [try read(1, "m1"), try read(2, "m1", read: false)])),
            .publish(user: "cyd", .init(messages: [], removed: ["m1"])),
        ]
        try await withHarness { h in
            try await withPostgresStore(h) { postgres in
                let memory = MemoryStore()
                let api = API(store: memory, limits: RequestLimits(), logger: Logger(label: "parity"))
                for (i, step) in script.enumerated() {
                    let (expected, actual): (Outcome, Outcome)
                    switch step {
                    case .up(let user, let request, let maxLedgers, let via):
                        let batch = UpBatch(user: user, request: request, events: try api.validate(request), maxLedgers: maxLedgers)
                        expected = await Self.outcome(memory) { .up(try await memory.up(batch)) }
                        actual = await Self.outcome(postgres) {
                            .up(via == .v3 ? try await postgres.up(batch) : try await Self.upV2(batch, on: postgres.database))
                        }
                    case .publish(let user, let request):
                        expected = await Self.outcome(memory) { .published(try await memory.publish(user: user, request: request)) }
                        actual = await Self.outcome(postgres) { .published(try await postgres.publish(user: user, request: request)) }
                    }
                    #expect(actual == expected, "step \(i): \(step)")
                }
                for user in ["ann", "bob", "cyd", "dan"] {
                    for (after, limit) in [(UInt64(0), 1000), (2, 3), (30, 5)] {
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
                #expect(try await memory.feed(user: "ann", after: 0, limit: 1000).head == 12)
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

    /// `batch` as the previous release sends it: `ledger_up_v2` with twenty positional arrays
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
            for entry in event.feedEntries {
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
