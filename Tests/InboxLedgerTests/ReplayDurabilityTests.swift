import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// "durable: every acknowledged event kept" holds for replays too (docs/semantics.md, docs/lmdb.md
/// rule 30): the notification extension appends the push under its key with `singleSync`, the
/// host appends the same keyed line with `durable` — the host's answer is a replay, which writes
/// nothing, so the ledger syncs before answering. The power-cut proof is the crash-state
/// explorer's `replay-*` scenarios (Benchmarks, CrashStateExplorerTests); here, that each call
/// that answers from what is stored does sync, once, and only when it must.
@Suite struct ReplayDurabilityTests {
    let cli = Processes.product("ledger")
    let push = #"{"type":"push.received","key":"push-4711","data":{"messageID":"m1","badge":1}}"#

    /// The extension's append (the CLI, another process, `singleSync`); returns the event as
    /// stored, for the host to append the same keyed event.
    @discardableResult
    func extensionAppends(_ path: String, _ line: String) throws -> NewEvent {
        let out = try Processes.run(cli, ["append", path, "--durability", "singleSync"], input: Data(line.utf8))
        #expect(out.status == 0, "\(out.stderr)")
        let reader = try Ledger(path: path, options: LedgerOptions(role: "reader"))
        guard let stored = try reader.read({ try $0.events(after: $0.head() - 1, limit: 1) }).first else { throw LedgerError.unexpected(path: path, operation: "test", reason: "nothing appended") }
        return NewEvent(type: stored.type, payload: stored.payload, key: stored.key)
    }

    @Test func aDurableReplayOfAnotherProcesssSingleSyncAppendSyncsBeforeAnswering() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let host = try Ledger(path: path, options: LedgerOptions(role: "app"))
        let event = try extensionAppends(path, push)
        let before = host.store.settlingSyncs
        let receipt = try host.append(AppendRequest([event]))
        #expect(receipt.isReplay && receipt.sequences == [1])
        #expect(host.store.settlingSyncs == before + 1, "the replay rests on a commit whose meta page was not synced")
        // Proven now: a second replay, the conditional and the async calls answer without syncing again.
        _ = try host.append(AppendRequest([event]))
        #expect(try host.append(AppendRequest([event], expectingHead: 1)).sequences == [1])
        #expect(host.store.settlingSyncs == before + 1)
    }

    @Test func eachCallThatAnswersFromWhatIsStoredSyncs() async throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let host = try Ledger(path: path, options: LedgerOptions(role: "app"))
        var expected = host.store.settlingSyncs
        let event = try extensionAppends(path, push)
        #expect(try await host.append(AppendRequest([event], expectingHead: 1)).sequences == [1], "a conditional append that finds its events")
        expected += 1
        #expect(host.store.settlingSyncs == expected)

        let second = try extensionAppends(path, #"{"type":"push.received","key":"push-4712","data":{"messageID":"m2","badge":2}}"#)
        #expect(try await host.append(AppendRequest([second])).sequences == [2], "the async API (the sync client's downlink call)")
        expected += 1
        #expect(host.store.settlingSyncs == expected)

        // A host in singleSync mode needs the pages on disk: the extension's singleSync commit
        // synced them, but this process cannot know that, so it syncs too.
        var weaker = LedgerOptions(role: "app")
        weaker.durability = .singleSync
        let third = try extensionAppends(path, #"{"type":"push.received","key":"push-4713","data":{"messageID":"m3","badge":3}}"#)
        let relaxed = try Ledger(path: path, options: weaker)
        #expect(try await relaxed.append(AppendRequest([third])).sequences == [3])
        #expect(relaxed.store.settlingSyncs == expected + 1)
        #expect(try await relaxed.append(AppendRequest([third])).sequences == [3])
        #expect(relaxed.store.settlingSyncs == expected + 1, "proven: once")
    }

    /// What was read and is handed on (the sync client's batches, a consumer another process
    /// registered) is made durable by `makeDurable()`: once, and only when not proven yet.
    @Test func whatWasReadIsMadeDurableBeforeItIsHandedOn() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let host = try Ledger(path: path, options: LedgerOptions(role: "app"))
        var expected = host.store.settlingSyncs
        try extensionAppends(path, push)
        #expect(try host.read({ try $0.events(after: 0, limit: 10) }).count == 1)
        try host.makeDurable()
        expected += 1
        #expect(host.store.settlingSyncs == expected, "read, then handed on: synced first")
        try host.makeDurable()
        #expect(host.store.settlingSyncs == expected, "proven: no second sync")

        let out = try Processes.run(cli, ["consume", path, "--name", "host-app", "--limit", "1"])
        #expect(out.status == 0, "\(out.stderr)")  // registers the consumer from another process
        try extensionAppends(path, #"{"type":"push.received","key":"push-4714","data":{"messageID":"m4"}}"#)
        _ = try host.consumers.consumer(named: "host-app")
        expected += 1
        #expect(host.store.settlingSyncs == expected, "an existing registration is made durable like a new one")
    }
}
