import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Wakes long polls when a user's feed moves, whichever server process wrote it: every feed
/// append runs `pg_notify('ledger_feed', user)` in its transaction; each process LISTENs on one
/// connection. A poll also re-reads every second, so a lost notification only delays it.
final class FeedNotifier: Service, Sendable {
    struct Waiter: Sendable {
        var user: String
        var signaled = false
        var continuation: CheckedContinuation<Void, Never>?
    }

    let client: PostgresClient
    let logger: Logger
    let waiters = Mutex<(next: Int, all: [Int: Waiter])>((0, [:]))

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
