import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Wakes long polls when a user's feed moves, whichever server process wrote it, and watches the
/// database. Each process holds **one connection of its own** (not from the pool): it LISTENs on
/// `ledger_feed` and runs `SELECT 1` every second; when that connection fails or a probe takes
/// longer than ``probeTimeout`` the database is marked down (requests answer 503 at once, and
/// `/healthz` says why) until a new connection answers. A device batch or a publish notifies
/// right after its commit (``announce(_:)``). A long poll re-reads the feed only when woken: by a
/// notification for its user, by a reconnection (notifications may have been missed while
/// disconnected), by its deadline — and it ends when its client disconnects.
final class FeedNotifier: Service, Sendable {
    struct Waiter: Sendable {
        var user: String
        var signaled = false
        var continuation: CheckedContinuation<Void, Never>?
    }

    let database: Database
    let logger: Logger
    let waiters = Mutex<(next: Int, all: [Int: Waiter])>((0, [:]))
    /// Users whose feed moved and who are not yet announced, and whether a flush is under way.
    let pending = Mutex<(users: Set<String>, flushing: Bool)>(([], false))
    /// Long polls ended because their client left (`/healthz`).
    let pollsLeft = Atomic<Int>(0)
    let probeTimeout: Duration = .seconds(5)

    init(database: Database) {
        self.database = database
        self.logger = database.logger
    }

    func run() async throws {
        // Ends on SIGTERM/SIGINT (graceful shutdown) like the PostgreSQL client does.
        try await cancelWhenGracefulShutdown {
            var attempt = 0
            while !Task.isCancelled {
                do {
                    attempt += 1
                    let connection = try await PostgresConnection.connect(
                        configuration: self.database.connectionConfiguration, id: attempt, logger: self.logger)
                    try await self.serve(connection)
                } catch {
                    if Task.isCancelled { return }
                    self.database.markDown(error)
                    try await Task.sleep(for: .milliseconds(500))  // a pause before reconnecting
                }
            }
        }
    }

    /// LISTEN and probe on `connection` until either fails; closes it.
    private func serve(_ connection: PostgresConnection) async throws {
        let lastAnswer = LastAnswer()
        defer { Task { try? await connection.close() } }  // already closed when a probe timed out
        try await connection.listen(on: "ledger_feed") { notifications in
            database.markUp()
            wakeAll()  // notifications sent while this process was not listening are not replayed
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await notification in notifications { self.wake(notification.payload) }
                    throw ListenEnded()
                }
                group.addTask {
                    while true {
                        try await Task.sleep(for: .seconds(1))
                        try await connection.query("SELECT 1", logger: self.logger)
                        lastAnswer.instant.withLock { $0 = .now }
                    }
                }
                group.addTask {
                    // A database that hangs (no answer, no error): close the connection, which fails the probe.
                    while true {
                        try await Task.sleep(for: .seconds(1))
                        if ContinuousClock.now - lastAnswer.instant.withLock({ $0 }) > self.probeTimeout + .seconds(1) {
                            try? await connection.close()
                            throw ProbeTimeout(seconds: self.probeTimeout)
                        }
                    }
                }
                _ = try await group.next()
                group.cancelAll()
            }
        }
    }

    /// When the probe last answered.
    final class LastAnswer: Sendable {
        let instant = Mutex(ContinuousClock.now)
    }

    struct ListenEnded: Error, CustomStringConvertible {
        var description: String { "the listening connection ended" }
    }

    struct ProbeTimeout: Error, CustomStringConvertible {
        var seconds: Duration
        var description: String { "no answer to SELECT 1 within \(seconds)" }
    }

    /// `NOTIFY ledger_feed` for `user`, after the transaction that moved the feed has committed
    /// (a NOTIFY inside the transaction would hold PostgreSQL's notify lock through the commit's
    /// WAL flush and serialise all commits). Coalesced: one statement notifies every user that
    /// moved since the last one. Waiters of this process are woken at once; if the NOTIFY fails
    /// (the database went away), other processes' long polls re-read when their listening
    /// connection comes back, or at their deadline.
    func announce(_ user: String) {
        wake(user)
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
                let logger = self.logger
                _ = try await database.withConnection { c in
                    try await c.query("SELECT pg_notify('ledger_feed', u) FROM unnest(\(users)::text[]) AS u", logger: logger)
                    return true
                }
            } catch {
                logger.warning("NOTIFY for \(users.count) users failed (other processes' long polls re-read when they reconnect): \(error)")
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

    /// Long polls of `user` open now.
    func polls(of user: String) -> Int { waiters.withLock { $0.all.values.count { $0.user == user } } }

    /// Long polls open now.
    var openPolls: Int { waiters.withLock { $0.all.count } }

    /// Waits until `ticket` is signaled (a notification, a reconnection, `clientLeft`) or
    /// `deadline` passes, then forgets it.
    func wait(_ ticket: Int, until deadline: ContinuousClock.Instant) async {
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
                try? await Task.sleep(until: deadline)  // the poll's deadline, not I/O
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

    func wakeAll() { signal { _, _ in true } }

    func signal(_ ticket: Int) { signal { id, _ in id == ticket } }

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
