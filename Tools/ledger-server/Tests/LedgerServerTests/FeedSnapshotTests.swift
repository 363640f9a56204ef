import Foundation
import InboxLedger
import InboxLedgerSync
import Logging
import NIOCore
import PostgresNIO
import Testing
@testable import ledger_server

/// `GET /v1/down` answers from one snapshot (issue 40): while batches commit, every page
/// ends at the head it reports (unless its limit cut it), so a client never sees a head beyond
/// the entries it was given. Read apart — the entries, then the head — a commit between the
/// two reads gave an empty page below a higher head, which the client called a protocol
/// violation.
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct FeedSnapshotTests {
    @Test func everyPageEndsAtItsHeadWhileBatchesCommit() async throws {
        let batches = 400
        try await withHarness { h in
            try await withPostgresStore(h) { postgres in
                let api = API(store: postgres, limits: RequestLimits(), logger: Logger(label: "snapshot"))
                try await withThrowingTaskGroup(of: Int.self) { group in
                    group.addTask {
                        for i in 1...batches {
                            let request = SyncWire.UpRequest(ledger: "p1", after: UInt64(i - 1), through: UInt64(i), events: [try read(UInt64(i), "m\(i)")])
                            _ = try await postgres.up(UpBatch(user: "ann", request: request, events: try api.validate(request), maxLedgers: 100))
                        }
                        return 0
                    }
                    group.addTask {
                        // Reads the feed as a device does, from its cursor, until the last batch's
                        // entry arrived; every page is checked against the head it reports.
                        var after: UInt64 = 0, pages = 0
                        while after < UInt64(batches) {
                            let page = try await postgres.feed(user: "ann", after: after, limit: 3)
                            pages += 1
                            let seqs = page.changes.map(\.seq)
                            #expect(seqs == Array(stride(from: after + 1, through: after + UInt64(seqs.count), by: 1)), "page after \(after): dense")
                            if seqs.count < 3 {
                                #expect((seqs.last ?? after) == page.head, "page after \(after) ends at \(seqs.last ?? after), its head is \(page.head)")
                            }
                            after = seqs.last ?? after
                        }
                        return pages
                    }
                    var pages = 0
                    for try await n in group { pages += n }
                    #expect(pages >= batches / 3)
                }
            }
        }
    }

    /// A page reads at most `limit` rows of the feed however far behind the cursor is: the
    /// statement bounds the range on both sides (the feed is dense), so no plan — not the bitmap
    /// scan of everything after the cursor plus a sort that PostgreSQL picked for a feed grown
    /// since its last `ANALYZE`, which made a device's catch-up quadratic — reads more.
    @Test func aPageReadsAtMostItsLimitOfRows() async throws {
        let entries = 3000, limit = 10
        try await withHarness { h in
            try await withPostgresStore(h) { postgres in
                let api = API(store: postgres, limits: RequestLimits(), logger: Logger(label: "page"))
                for first in stride(from: 1, through: entries, by: 500) {
                    let events = try (first..<first + 500).map { try read(UInt64($0), "m\($0)") }
                    let request = SyncWire.UpRequest(ledger: "p1", after: UInt64(first - 1), through: UInt64(first + 499), events: events)
                    _ = try await postgres.up(UpBatch(user: "ann", request: request, events: try api.validate(request), maxLedgers: 100))
                }
                for after in [0, 1500, entries - 5] {
                    let page = PostgresStore.feedPage(user: "ann", after: UInt64(after), limit: limit)
                    let explain = PostgresQuery(unsafeSQL: "EXPLAIN (ANALYZE, FORMAT JSON) " + page.sql, binds: page.binds)
                    let plan = try await postgres.database.withConnection { c in
                        var text = ""
                        for try await buffer in try await c.query(explain, logger: postgres.logger).decode(ByteBuffer.self) {
                            text += String(buffer: buffer)
                        }
                        return text
                    }
                    let scans = Self.nodes(in: try JSONSerialization.jsonObject(with: Data(plan.utf8))).filter {
                        $0["Relation Name"] as? String == "feed" || ($0["Index Name"] as? String)?.hasPrefix("feed") == true
                    }
                    #expect(!scans.isEmpty, "a plan that reads the feed: \(plan)")
                    for scan in scans {
                        let rows = scan["Actual Rows"] as? Int ?? Int.max
                        #expect(rows <= limit, "after \(after): \(scan["Node Type"] ?? "?") read \(rows) rows of the feed for a page of \(limit)")
                    }
                    let got = try await postgres.feed(user: "ann", after: UInt64(after), limit: limit).changes.map(\.seq)
                    #expect(got == Array(UInt64(after + 1)...UInt64(min(after + limit, entries))))
                }
            }
        }
    }

    /// Every node of an `EXPLAIN (FORMAT JSON)` plan.
    static func nodes(in json: Any) -> [[String: Any]] {
        if let list = json as? [Any] { return list.flatMap { nodes(in: $0) } }
        guard let object = json as? [String: Any] else { return [] }
        let own = object["Node Type"] != nil ? [object] : []
        return own + object.values.flatMap { nodes(in: $0) }
    }
}
