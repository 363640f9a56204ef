import Foundation
import InboxLedger
import InboxLedgerSync
import Logging
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
}
