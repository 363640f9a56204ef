import Foundation
import Testing
import TestSupport
@testable import LMDB

func config(_ names: [String] = ["data"], initialMap: Int = 1 << 20, maxMap: Int = 1 << 30) -> EnvironmentConfiguration {
    var c = EnvironmentConfiguration()
    c.databases = Dictionary(uniqueKeysWithValues: names.map { ($0, DatabaseFlags()) })
    c.initialMapSize = initialMap
    c.maxMapSize = maxMap
    c.durability = .none
    return c
}

func be(_ i: Int) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: UInt64(i) >> UInt64(56 - 8 * $0)) } }

@Suite struct EnvironmentTests {
    @Test func putGetDeleteAndCursor() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config())
        let db = try env.database("data")
        try env.write { txn in
            for i in [3, 1, 2] { try txn.put(db, key: be(i), value: Array("v\(i)".utf8)) }
        }
        #expect(try env.read { try $0.get(db, key: be(2)) } == Array("v2".utf8))
        #expect(try env.read { try $0.get(db, key: be(9)) } == nil)
        let keys = try env.read { txn in
            try txn.withCursor(db) { cursor -> [[UInt8]] in
                var keys: [[UInt8]] = []
                var entry = try cursor.first()
                while let e = entry { keys.append(e.key); entry = try cursor.next() }
                return keys
            }
        }
        #expect(keys == [be(1), be(2), be(3)])
        let seek = try env.read { txn in try txn.withCursor(db) { try $0.seek(atLeast: be(2))?.value } }
        #expect(seek == Array("v2".utf8))
        let last = try env.read { txn in try txn.withCursor(db) { try $0.last()?.key } }
        #expect(last == be(3))
        #expect(try env.write { try $0.delete(db, key: be(1)) })
        #expect(try env.write { try $0.delete(db, key: be(1)) } == false)
        #expect(try env.statistics(db).entries == 2)
    }

    @Test func throwingWriteRollsBack() throws {
        struct Boom: Error {}
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config())
        let db = try env.database("data")
        #expect(throws: Boom.self) {
            try env.write { txn in
                try txn.put(db, key: be(1), value: [1])
                throw Boom()
            }
        }
        #expect(try env.read { try $0.get(db, key: be(1)) } == nil)
    }

    @Test func appendFlagRejectsSmallerKey() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config())
        let db = try env.database("data")
        try env.write { try $0.put(db, key: be(5), value: [5], flags: .append) }
        #expect(throws: LMDBError.keyExists) {
            try env.write { try $0.put(db, key: be(4), value: [4], flags: .append) }
        }
        #expect(throws: LMDBError.keyExists) {
            try env.write { try $0.put(db, key: be(5), value: [6], flags: .noOverwrite) }
        }
    }

    @Test func transactionIsDeadOutsideItsClosure() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config())
        let db = try env.database("data")
        let escaped = try env.read { $0 }
        #expect(throws: LMDBError.badTransaction) { try escaped.get(db, key: be(1)) }
        #expect(throws: LMDBError.permissionDenied) {
            try env.read { txn in try txn.put(db, key: be(1), value: [1]) }
        }
    }

    @Test func oneEnvironmentPerDirectoryPerProcess() throws {
        let dir = TemporaryDirectory()
        let a = try Environment.open(directory: dir.path, configuration: config())
        // A different spelling of the same directory reaches the same MDB_env.
        let b = try Environment.open(directory: dir.path + "/./", configuration: config(["data", "other"]))
        #expect(a.shared === b.shared)
        #expect(a.hasDatabase("other"))
        let db = try a.database("data")
        try b.write { try $0.put(db, key: be(1), value: [42]) }
        #expect(try a.read { try $0.get(db, key: be(1)) } == [42])
    }

    @Test func environmentClosesWithItsLastHandle() throws {
        let dir = TemporaryDirectory()
        weak var shared: SharedEnvironment?
        do {
            let a = try Environment.open(directory: dir.path, configuration: config())
            shared = a.shared
            var b: Environment? = try Environment.open(directory: dir.path, configuration: config())
            #expect(b?.shared === a.shared)
            b = nil
            #expect(shared != nil)
            _ = a
        }
        #expect(shared == nil)
        // Reopening after the close works and sees the data file.
        let again = try Environment.open(directory: dir.path, configuration: config())
        #expect(again.hasDatabase("data"))
    }

    @Test func readOnlyHandleCannotWrite() throws {
        let dir = TemporaryDirectory()
        _ = try Environment.open(directory: dir.path, configuration: config())
        var ro = config()
        ro.readOnly = true
        let env = try Environment.open(directory: dir.path, configuration: ro)
        #expect(throws: LMDBError.permissionDenied) { try env.write { _ in } }
    }

    @Test func missingDirectoryIsATypedError() {
        #expect(throws: LMDBError.noSuchFile) {
            try Environment.open(directory: "/nonexistent/ledger-\(UUID().uuidString)", configuration: config())
        }
    }

    @Test func durabilityChangesAtRunTime() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config())
        #expect(env.durability == .none)
        for mode in [Durability.durable, .singleSync, .none, .durable] {
            try env.setDurability(mode)
            #expect(env.durability == mode)
            let db = try env.database("data")
            try env.write { try $0.put(db, key: be(1), value: [1]) }
        }
    }

    @Test func mapGrowsWhenFullInProcess() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config(initialMap: 256 << 10))
        let db = try env.database("data")
        let before = try env.info().mapSize
        // 4 MiB in 2 KiB values: far past the initial 256 KiB map, in transactions of 64 values.
        for chunk in 0..<32 {
            try env.write { txn in
                for i in 0..<64 { try txn.put(db, key: be(chunk * 64 + i), value: [UInt8](repeating: 7, count: 2048)) }
            }
        }
        #expect(try env.info().mapSize > before)
        #expect(try env.statistics(db).entries == 2048)
    }

    /// A write's body runs again after the map grows; the value returned is its last run's, and
    /// an optional result (nil included) comes back as the body returned it.
    @Test func aTransactionReturnsItsBodysValueAfterARetry() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config(initialMap: 64 << 10))
        let db = try env.database("data")
        var runs = 0
        for chunk in 0..<20 {
            let returned: Int = try env.write { txn in
                runs += 1
                for i in 0..<8 { try txn.put(db, key: be(chunk * 8 + i), value: [UInt8](repeating: 7, count: 2048)) }
                return runs
            }
            #expect(returned == runs, "a write returned the value of an earlier run of its body")
        }
        #expect(runs > 20, "the map never filled: no retry was tried")
        let none: Int? = try env.write { _ in nil }
        #expect(none == nil)
        let nested: Int?? = try env.read { txn in try env.read { _ in Int??.some(nil) } }
        #expect(nested == .some(nil))
        #expect(try env.read { txn in try txn.get(db, key: be(0)) } == [UInt8](repeating: 7, count: 2048))
    }

    @Test func mapFullAtTheLimitIsAnErrorAndLosesNothing() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config(initialMap: 256 << 10, maxMap: 512 << 10))
        let db = try env.database("data")
        var committed = 0
        #expect(throws: LMDBError.mapFull) {
            for chunk in 0..<1000 {
                try env.write { txn in
                    for i in 0..<8 { try txn.put(db, key: be(chunk * 8 + i), value: [UInt8](repeating: 1, count: 2048)) }
                }
                committed += 8
            }
        }
        #expect(committed > 0)
        #expect(try env.statistics(db).entries == committed)
    }

    @Test func commitFailingWithMapFullIsNotAbortedTwice() throws {
        // A write whose pages only overflow the map at commit time (MDB_MAP_FULL from
        // mdb_txn_commit) is retried after growth; the process must not crash (rule 8).
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config(initialMap: 64 << 10))
        let db = try env.database("data")
        for round in 0..<20 {
            try env.write { txn in
                for i in 0..<40 { try txn.put(db, key: be(round * 40 + i), value: [UInt8](repeating: 3, count: 1500)) }
            }
        }
        #expect(try env.statistics(db).entries == 800)
    }

    @Test func probeTellsFilesApart() throws {
        let dir = TemporaryDirectory()
        #expect(DataFileProbe.probe(directory: dir.path) == .missing)
        _ = try Environment.open(directory: dir.path, configuration: config())
        guard case .valid(let pageSize, _) = DataFileProbe.probe(directory: dir.path) else {
            Issue.record("expected a valid probe")
            return
        }
        #expect(pageSize == 4096)

        let junk = TemporaryDirectory()
        try Data(repeating: 0x41, count: 20000).write(to: URL(fileURLWithPath: junk.child("data.mdb")))
        #expect(DataFileProbe.probe(directory: junk.path) == .notLMDB)

        let short = TemporaryDirectory()
        let original = try Data(contentsOf: URL(fileURLWithPath: dir.child("data.mdb")))
        try original.prefix(5000).write(to: URL(fileURLWithPath: short.child("data.mdb")))
        guard case .truncated = DataFileProbe.probe(directory: short.path) else {
            Issue.record("expected truncated, got \(DataFileProbe.probe(directory: short.path))")
            return
        }
    }
}

/// Behaviour that needs a second real process.
@Suite(.serialized) struct EnvironmentMultiProcessTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test func mapGrowthIsAdoptedAcrossProcesses() throws {
        let dir = TemporaryDirectory()
        // This process maps 256 KiB and keeps its environment open.
        let env = try Environment.open(directory: dir.path, configuration: config(initialMap: 256 << 10))
        let db = try env.database("data")
        let mine = try env.info().mapSize
        // Another process writes 6 MiB, growing the map many times over.
        let out = try Processes.run(agent, ["lmdb-fill", dir.path, "0", "3000", "2048", String(256 << 10)])
        #expect(out.status == 0, "\(out.stderr)")
        // Reading needs the bigger map: MDB_MAP_RESIZED is adopted, not surfaced.
        #expect(try env.statistics(db).entries == 3000)
        #expect(try env.read { try $0.get(db, key: be(2999)) } == [UInt8](repeating: UInt8(2999 % 251), count: 2048))
        #expect(try env.info().mapSize > mine)
        // And this process can write on top of the grown map, growing it further itself.
        for chunk in 0..<40 {
            try env.write { txn in
                for i in 0..<50 { try txn.put(db, key: be(3000 + chunk * 50 + i), value: [UInt8](repeating: 9, count: 2048)) }
            }
        }
        // The other process, started again with a small map, sees everything.
        let again = try Processes.run(agent, ["lmdb-fill", dir.path, "5000", "10", "16", String(256 << 10)])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try env.statistics(db).entries == 5010)
    }

    @Test func staleReaderSlotOfAKilledProcessIsCleared() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config())
        let holder = try Processes.start(agent, ["hold-reader", dir.path])
        // Wait until it holds its read transaction.
        _ = holder.waitForOutput(containing: "holding")
        #expect(holder.stdoutSoFar.contains("holding"))
        #expect(try env.readers().contains { $0.pid == holder.pid && $0.transactionID != nil })
        holder.kill()
        _ = try? holder.wait(timeout: 10)
        #expect(try env.readers().contains { $0.pid == holder.pid })
        #expect(try env.clearStaleReaders() >= 1)
        #expect(try env.readers().contains { $0.pid == holder.pid } == false)
    }
}

/// A write begun inside another on the same thread would wait forever for LMDB's writer mutex
/// (which that thread holds): the layer traps instead, loudly.
@Suite struct NestedWriteTests {
    @Test func aNestedWriteOnTheSameThreadTrapsInsteadOfHanging() async {
        await #expect(processExitsWith: .failure) {
            nestedWrite()
        }
    }
}

/// Opens an environment and nests two writes; exits 0 if that neither trapped nor hung.
func nestedWrite() {
    let dir = TemporaryDirectory()
    var config = EnvironmentConfiguration()
    config.databases = ["d": []]
    do {
        let env = try Environment.open(directory: dir.path, configuration: config)
        try env.write { _ in try env.write { _ in } }
    } catch {}
    exit(0)
}
