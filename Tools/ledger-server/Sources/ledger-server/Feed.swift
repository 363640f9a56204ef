import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Wakes long polls when a user's feed moves, whichever server process wrote it: a publish runs
/// `pg_notify('ledger_feed', user)` in its transaction, a device batch right after its commit
/// (`announce`); each process LISTENs on one connection. A poll also re-reads every second, so a
/// lost notification only delays it.
final class FeedNotifier: Service, Sendable {
    struct Waiter: Sendable {
        var user: String
        var signaled = false
        var continuation: CheckedContinuation<Void, Never>?
    }

    let client: PostgresClient
    let logger: Logger
    let waiters = Mutex<(next: Int, all: [Int: Waiter])>((0, [:]))
    /// Users whose feed moved and who are not yet announced, and whether a flush is under way.
    let pending = Mutex<(users: Set<String>, flushing: Bool)>(([], false))

    init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    func run() async throws {
        // Ends on SIGTERM/SIGINT (graceful shutdown) like the PostgreSQL client does.
        try await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await self.client.withConnection { connection in
                        try await connection.listen(on: "ledger_feed") { notifications in
                            for try await notification in notifications { self.wake(notification.payload) }
                        }
                    }
                } catch {
                    if Task.isCancelled { return }
                    self.logger.warning("LISTEN connection lost, reconnecting: \(error)")
                    try await Task.sleep(for: .milliseconds(500))  // a pause before reconnecting
                }
            }
        }
    }

    /// `NOTIFY ledger_feed` for `user`, after the transaction that moved the feed has committed
    /// (`POST /v1/up`: a NOTIFY inside the transaction would hold PostgreSQL's notify lock through
    /// the commit's WAL flush and serialise all commits). Coalesced: one statement notifies every
    /// user that moved since the last one. A notification lost here (the process dies first)
    /// only delays a long poll by its one-second re-read.
    func announce(_ user: String) {
        let start = pending.withLock { p -> Bool in
            p.users.insert(user)
            if p.flushing { return false }
            p.flushing = true
            return true
        }
        if start { Task { await self.flush() } }
    }

    private func flush() async {
        while true {
            let users: [String] = pending.withLock { p in
                let users = Array(p.users)
                p.users = []
                if users.isEmpty { p.flushing = false }
                return users
            }
            if users.isEmpty { return }
            do {
                for try await _ in try await client.query("SELECT pg_notify('ledger_feed', u) FROM unnest(\(users)::text[]) AS u", logger: logger) {}
            } catch {
                logger.warning("NOTIFY for \(users.count) users failed (their long polls re-read within a second): \(error)")
            }
        }
    }

    /// Registers interest in `user`'s feed before the caller reads it (no lost wake-up).
    func arm(_ user: String) -> Int {
        waiters.withLock { w in
            let id = w.next
            w.next += 1
            w.all[id] = Waiter(user: user)
            return id
        }
    }

    /// Waits until `ticket` is signaled or `timeout` passes, then forgets it.
    func wait(_ ticket: Int, timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let resumeNow = self.waiters.withLock { w -> Bool in
                        guard var waiter = w.all[ticket], !waiter.signaled else { return true }
                        waiter.continuation = c
                        w.all[ticket] = waiter
                        return false
                    }
                    if resumeNow { c.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)  // the poll's deadline, not I/O
                self.signal(ticket)
            }
            await group.next()
            group.cancelAll()
            self.signal(ticket)
            await group.waitForAll()
        }
        _ = waiters.withLock { $0.all.removeValue(forKey: ticket) }
    }

    func disarm(_ ticket: Int) { _ = waiters.withLock { $0.all.removeValue(forKey: ticket) } }

    func wake(_ user: String) { signal { _, waiter in waiter.user == user } }

    private func signal(_ ticket: Int) { signal { id, _ in id == ticket } }

    private func signal(_ matches: (Int, Waiter) -> Bool) {
        let resumed: [CheckedContinuation<Void, Never>] = waiters.withLock { w in
            var out: [CheckedContinuation<Void, Never>] = []
            for (id, var waiter) in w.all where matches(id, waiter) {
                waiter.signaled = true
                if let c = waiter.continuation { out.append(c) }
                waiter.continuation = nil
                w.all[id] = waiter
            }
            return out
        }
        for c in resumed { c.resume() }
    }
}
