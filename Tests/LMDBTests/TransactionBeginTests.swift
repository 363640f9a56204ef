import Foundation
import Synchronization
import Testing
import TestSupport
@testable import LMDB

#if canImport(Glibc)
import Glibc
#endif

/// Every transaction begins in one place (``SharedEnvironment/transaction(_:_:)``): a write —
/// the creation of missing tables included — takes this layer's writer lock first, so it waits
/// no longer than the write timeout behind a writer that stopped inside its transaction.
@Suite struct TransactionBeginTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test(.timeLimit(.minutes(10)))
    func creatingATableBehindAStoppedWriterTimesOutInsteadOfHanging() throws {
        let dir = TemporaryDirectory()
        var first = EnvironmentConfiguration()
        first.databases = ["a": []]
        _ = try Environment.open(directory: dir.path, configuration: first)  // released at once: this process keeps nothing open

        let staller = try Processes.start(agent, ["stall-in-write", dir.path, "60"])
        defer { staller.kill(); _ = try? staller.wait(timeout: 10) }
        #expect(staller.waitForOutput(containing: "in-txn"))
        kill(staller.pid, SIGSTOP)

        var second = EnvironmentConfiguration()
        second.databases = ["a": [], "b": []]  // "b" is missing: the opening creates it in a write
        second.writeTimeoutMilliseconds = 500
        let configuration = second
        let path = dir.path
        let outcome = Mutex<Result<Void, LMDBError>?>(nil)
        let opener = Thread {
            let result = Result { () throws(LMDBError) in _ = try Environment.open(directory: path, configuration: configuration) }
            outcome.withLock { $0 = result }
        }
        opener.start()
        // A hang guard, not a budget: the opening gives up after 0.5 s without progress.
        _ = waitUntil(timeout: 60) { outcome.withLock { $0 } != nil }
        let result = outcome.withLock { $0 }
        if result == nil {
            // The old code: waiting in LMDB's writer mutex with no timeout. Let it go, then fail.
            staller.kill()
            _ = waitUntil { outcome.withLock { $0 } != nil }
        }
        switch result {
        case .failure(let error)?: #expect(error == .writeLockTimeout)
        case .success?: Issue.record("the table was created while another process held the writer lock")
        case nil: Issue.record("the table's creation waited behind the stopped writer with no timeout")
        }
    }
}
