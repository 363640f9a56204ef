import Synchronization

/// This process's long polls (`GET /v1/down` with a wait): who waits for which user's feed,
/// and the wake-ups. It knows nothing of where the feed is kept: a ``SyncStore`` wakes it when a
/// user's feed moves (``PostgresStore`` also when another server process moved it, by
/// `LISTEN`; ``MemoryStore`` when it moved the feed itself).
///
/// A waiter is armed **before** the feed is read (``arm(_:)``), so a change between the read and
/// the wait is not missed: its wake-up marks the ticket signaled and ``wait(_:until:)`` returns
/// at once.
final class LongPolls: Sendable {
    /// One armed long poll.
    struct Waiter: Sendable {
        /// The user whose feed it waits for.
        var user: String
        /// Whether it was woken before (or while) it waited.
        var signaled = false
        /// The suspended waiter, while it waits.
        var continuation: CheckedContinuation<Void, Never>?
    }

    /// The armed long polls by ticket, and the next ticket.
    let waiters = Mutex<(next: Int, all: [Int: Waiter])>((0, [:]))
    /// Long polls ended because their client left (`/healthz`).
    let pollsLeft = Atomic<Int>(0)

    /// No long poll yet.
    init() {}

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

    /// Forgets `ticket` without waiting (the read found entries, or the poll was refused).
    func disarm(_ ticket: Int) { _ = waiters.withLock { $0.all.removeValue(forKey: ticket) } }

    /// Wakes every long poll of `user`: its feed moved.
    func wake(_ user: String) { signal { _, waiter in waiter.user == user } }

    /// Wakes every long poll (notifications may have been missed: each re-reads its feed).
    func wakeAll() { signal { _, _ in true } }

    /// Wakes the long poll `ticket` (its deadline passed, or its client left).
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
