import Foundation
import Testing
import TestSupport
@testable import LMDB

/// An acknowledgement in a mode holds for what it names, whoever wrote it (docs/lmdb.md rule 30):
/// a write that changed nothing syncs its snapshot unless this process proved it on disk — and
/// only then. The power-cut side is the crash-state explorer's `replay-*` scenarios (Benchmarks).
@Suite struct SettledDurabilityTests {
    /// The proof's rules, row by row: what each commit proves, and which answers need a sync.
    @Test func theProofFollowsWhatEachCommitSynced() {
        var proof = SyncProof()
        #expect(proof.needsSync(snapshot: 1, mode: .durable) && proof.needsSync(snapshot: 1, mode: .singleSync))
        #expect(!proof.needsSync(snapshot: 1, mode: .none))
        #expect(!proof.needsSync(snapshot: 0, mode: .durable), "an empty file needs nothing")

        proof.committed(5, mode: .none)
        #expect(proof == SyncProof(), "a commit without sync proves nothing")

        proof.committed(5, mode: .singleSync)  // data synced before its unsynced meta page
        #expect(proof == SyncProof(durable: 4, pages: 5))
        #expect(proof.needsSync(snapshot: 5, mode: .durable))
        #expect(!proof.needsSync(snapshot: 5, mode: .singleSync))
        #expect(!proof.needsSync(snapshot: 4, mode: .durable))

        proof.committed(7, mode: .durable)
        #expect(proof == SyncProof(durable: 7, pages: 7))
        proof.committed(6, mode: .singleSync)  // never moves back
        #expect(proof == SyncProof(durable: 7, pages: 7))

        proof.synced(through: 9)
        #expect(proof == SyncProof(durable: 9, pages: 9))
        #expect(proof.needsSync(snapshot: 10, mode: .singleSync))
    }

    /// A write that changed nothing after another mode's commit syncs once, then not again until
    /// something newer was committed without proof; a commit that wrote pages needs no extra sync.
    @Test func anEmptyDurableWriteSyncsOnlyWhatIsNotProvenOnDisk() throws {
        let dir = TemporaryDirectory()
        var c = config()
        c.durability = .durable
        let env = try Environment.open(directory: dir.path, configuration: c)
        let db = try env.database("data")
        let syncs = { env.shared.settlingSyncs.load(ordering: .relaxed) }
        let before = syncs()

        try env.write(durability: .singleSync) { try $0.put(db, key: be(1), value: [1]) }
        #expect(syncs() == before, "a commit that wrote pages syncs as its mode says")
        try env.write(durability: .singleSync) { _ = try $0.get(db, key: be(1)) }
        #expect(syncs() == before, "singleSync's standard (pages on disk) is already proven")

        #expect(try env.write(durability: .durable) { try $0.get(db, key: be(1)) } == [1])
        #expect(syncs() == before + 1, "the durable answer rests on a commit whose meta page was not synced")
        _ = try env.write(durability: .durable) { try $0.get(db, key: be(1)) }
        #expect(syncs() == before + 1, "proven now: no second sync")

        try env.write(durability: .durable) { try $0.put(db, key: be(2), value: [2]) }
        _ = try env.write(durability: .durable) { try $0.get(db, key: be(2)) }
        #expect(syncs() == before + 1, "a durable commit that wrote pages proved itself")

        try env.write(durability: Durability.none) { try $0.put(db, key: be(3), value: [3]) }
        _ = try env.write(durability: Durability.none) { try $0.get(db, key: be(3)) }
        #expect(syncs() == before + 1, "`none` promises nothing")
        _ = try env.write(durability: .singleSync) { try $0.get(db, key: be(3)) }
        #expect(syncs() == before + 2, "a singleSync answer needs the pages a `none` commit left unsynced")
        try env.write(durability: Durability.none) { try $0.put(db, key: be(4), value: [4]) }
        #expect(try env.write(durability: .durable) { try $0.delete(db, key: be(9)) } == false)
        #expect(syncs() == before + 3, "a delete that found nothing changed nothing: the snapshot needed a sync")
    }

    /// Another process's commit: this process cannot know how it was synced.
    @Test func anotherProcesssCommitIsSyncedBeforeADurableAnswer() throws {
        let dir = TemporaryDirectory()
        var c = config()
        c.durability = .durable
        let env = try Environment.open(directory: dir.path, configuration: c)
        let db = try env.database("data")
        try env.write { try $0.put(db, key: be(0), value: [0]) }
        let syncs = { env.shared.settlingSyncs.load(ordering: .relaxed) }
        let before = syncs()
        let out = try Processes.run(Processes.product("LedgerTestAgent"), ["lmdb-fill", dir.path, "1", "10", "16", String(1 << 20)])
        #expect(out.status == 0, "\(out.stderr)")
        #expect(try env.write { try $0.get(db, key: be(5)) }?.count == 16)
        #expect(syncs() == before + 1)
    }

    /// `makeDurable` syncs what another process committed, once; a read-only environment cannot.
    @Test func makeDurableSyncsOnlyWhatIsNotProven() throws {
        let dir = TemporaryDirectory()
        var c = config()
        c.durability = .durable
        let env = try Environment.open(directory: dir.path, configuration: c)
        let db = try env.database("data")
        try env.write { try $0.put(db, key: be(0), value: [0]) }
        let before = env.settlingSyncs
        try env.makeDurable()
        #expect(env.settlingSyncs == before, "this process's own durable commit proved it")
        try env.write(durability: .singleSync) { try $0.put(db, key: be(1), value: [1]) }
        try env.makeDurable(.singleSync)
        #expect(env.settlingSyncs == before, "singleSync's standard is proven by its own commit")
        try env.makeDurable()
        #expect(env.settlingSyncs == before + 1)
        try env.makeDurable()
        try env.makeDurable(Durability.none)
        #expect(env.settlingSyncs == before + 1)
    }
}
