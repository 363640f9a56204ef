import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Wakes long polls when a user's feed moves, whichever server process wrote it, and watches the
/// database: ``PostgresStore``'s side of ``LongPolls``. Each process holds **one connection of
/// its own** (not from the pool): it LISTENs on `ledger_feed` and runs `SELECT 1` every second;
/// when that connection fails or a probe takes longer than ``probeTimeout`` the database is
/// marked down (requests answer 503 at once, and `/healthz` says why) until a new connection
/// answers. A device batch or a publish notifies right after its commit (``announce(_:)``). A
/// long poll re-reads the feed only when woken: by a notification for its user, by a
/// reconnection (notifications may have been missed while disconnected), by its deadline — and
/// it ends when its client disconnects.
final class FeedNotifier: Service, Sendable {
    /// The database it listens on and probes.
    let database: Database
    /// The long polls this notifier wakes.
    let longPolls: LongPolls
    /// The server's logger.
    let logger: Logger
    /// Users whose feed moved and who are not yet announced, and whether a flush is under way.
    let pending = Mutex<(users: Set<String>, flushing: Bool)>(([], false))
    /// How long the probe's `SELECT 1` may take before the database counts as down.
    let probeTimeout: Duration = .seconds(5)

    /// A notifier for `database`, waking `longPolls`.
    init(database: Database, longPolls: LongPolls) {
        self.database = database
        self.longPolls = longPolls
        self.logger = database.logger
    }

    /// Listens and probes until graceful shutdown, reconnecting after every failure.

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
            longPolls.wakeAll()  // notifications sent while this process was not listening are not replayed
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await notification in notifications { self.longPolls.wake(notification.payload) }
                    throw ListenEnded()
                }
                group.addTask {
                    while true {
                        try await Task.sleep(for: .seconds(1))
                        try await connection.query("SELECT 1", logger: self.logger)
                        lastAnswer.instant.withLock { $0 = .now }
                        self.database.markUp()  // a request that saw one connection fail marked it down
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
        longPolls.wake(user)
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
}
