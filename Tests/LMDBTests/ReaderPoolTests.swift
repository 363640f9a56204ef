import Foundation
import Synchronization
import Testing
import TestSupport
@testable import LMDB

/// Read transactions are reset and renewed instead of begun and aborted each time.
@Suite struct ReaderPoolTests {
    /// Slots of this process in the reader table.
    func ourSlots(_ env: Environment) throws -> Int {
        try env.readers().filter { $0.pid == getpid() }.count
    }

    @Test func readsFromManyThreadsSeeEveryCommitAndKeepFewSlots() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config())
        let db = try env.database("data")
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<200 {
                do {
                    if t == 0 { try env.write { try $0.put(db, key: be(i), value: be(i)) } }
                    let seen = try env.read { txn in try txn.statistics(db).entries }
                    if seen > 200 { failures.withLock { $0.append("thread \(t) saw \(seen) entries") } }
                } catch {
                    failures.withLock { $0.append("thread \(t): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(try env.read { try $0.statistics(db).entries } == 200)
        // A reset transaction keeps its slot; at most the pool's limit stays behind.
        #expect(try ourSlots(env) <= ReaderPool.limit)
        // A renewed transaction reads the newest commit, not the snapshot it had before reset.
        try env.write { try $0.put(db, key: be(1_000), value: []) }
        #expect(try env.read { try $0.get(db, key: be(1_000)) } == [])
    }

    @Test func pooledReadersSurviveMapGrowth() throws {
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config(initialMap: 64 << 10))
        let db = try env.database("data")
        _ = try env.read { try $0.get(db, key: be(0)) }  // leaves a reset reader in the pool
        let before = try env.info().mapSize
        let value = [UInt8](repeating: 7, count: 2048)
        for i in 0..<200 { try env.write { try $0.put(db, key: be(i), value: value) } }
        #expect(try env.info().mapSize > before)
        #expect(try env.read { try $0.get(db, key: be(199)) } == value)
    }

    @Test func closingTheEnvironmentFreesPooledReaders() throws {
        let dir = TemporaryDirectory()
        do {
            let env = try Environment.open(directory: dir.path, configuration: config())
            let db = try env.database("data")
            try env.write { try $0.put(db, key: be(1), value: be(1)) }
            _ = try env.read { try $0.get(db, key: be(1)) }
        }
        let env = try Environment.open(directory: dir.path, configuration: config())
        #expect(try ourSlots(env) == 0)
        #expect(try env.read { try $0.get(env.database("data"), key: be(1)) } == be(1))
    }
}
