import Foundation
import Testing
import TestSupport

/// Power cuts: the crash-state explorer (ledger-crash-states, docs/reliability.md).
@Suite(.serialized) struct CrashStateExplorerTests {
    let explorer = Processes.product("ledger-crash-states")

    /// A short exploration of every scenario of the promise: creation, each durability mode,
    /// mixed modes, group commit, map growth, compaction, durable replays of another process's
    /// singleSync appends through each call. No state may lose an acknowledged
    /// durable event, be unusable, or crash.
    @Test func noPowerCutLosesAnAcknowledgedDurableEvent() throws {
        let dir = TemporaryDirectory()
        let out = try Processes.run(explorer, ["--quick", "--seed", "7", "--directory", dir.path], timeout: 600)
        #expect(out.status == 0 && !out.signalled, "\(out.stdout)\n\(out.stderr)")
        #expect(out.stdout.contains(" 0 failed (acknowledged"), "\(out.stdout)")
        for scenario in ["creation", "interrupted-creation", "durable", "single-sync", "mixed", "format-upgrade", "group-commit", "map-growth", "compaction", "replay-keyed", "replay-conditional", "replay-async", "replay-consumer"] {
            #expect(out.stdout.contains(scenario), "scenario \(scenario) did not run: \(out.stdout)")
        }
    }

    /// The checker can fail: on a ledger whose floor allows `none` (no syncs at all), a power
    /// cut can leave a meta page pointing at pages that never reached the disk, and the
    /// explorer reports the durable writer's events as lost. This is what the stored
    /// durability floor prevents by default.
    @Test func withoutTheFloorAPowerCutCorruptsTheStore() throws {
        let dir = TemporaryDirectory()
        let out = try Processes.run(explorer, ["--scenarios", "unsafe-none", "--cuts", "200", "--subsets", "4", "--directory", dir.path], timeout: 600)
        #expect(out.status == 1 && !out.signalled, "\(out.stdout)\n\(out.stderr)")
        #expect(out.stdout.contains("FAILED: unsafe-none"), "\(out.stdout)")
    }
}
