import InboxLedger

/// An app's three moments as a pure state machine: what entering the foreground, entering the
/// background, and a background refresh starting or ending must do (docs/sync.md, "In an app").
///
/// | event | in the background | in the foreground |
/// |---|---|---|
/// | enter the foreground | resume the ledgers, start a run | nothing |
/// | enter the background | cancel the run, suspend the ledgers (unless a refresh runs) | the same |
/// | a refresh starts | resume the ledgers (the first refresh) | nothing: the run goes on |
/// | a refresh ends | suspend the ledgers (the last refresh) | nothing |
package struct LifecycleStateMachine: Hashable, Sendable {
    /// What the client does for a moment, in order.
    package enum Action: Hashable, Sendable {
        /// `Ledger.resume()`: calls may reopen the files.
        case resumeLedgers
        /// Start ``SyncClient/run()`` (after the previous run has returned).
        case startRun
        /// Cancel the run: it returns within milliseconds, a batch sent and not acknowledged
        /// is sent again next time.
        case cancelRun
        /// `Ledger.suspend()`: no file lock is held while the app is suspended.
        case suspendLedgers
    }

    /// Whether the app is in the foreground (a run is wanted).
    package private(set) var inForeground = false
    /// Background refreshes in progress.
    package private(set) var refreshes = 0

    package init() {}

    package mutating func enterForeground() -> [Action] {
        guard !inForeground else { return [] }
        inForeground = true
        return refreshes > 0 ? [.startRun] : [.resumeLedgers, .startRun]
    }

    package mutating func enterBackground() -> [Action] {
        inForeground = false
        return refreshes > 0 ? [.cancelRun] : [.cancelRun, .suspendLedgers]
    }

    package mutating func refreshStarted() -> [Action] {
        refreshes += 1
        return inForeground || refreshes > 1 ? [] : [.resumeLedgers]
    }

    package mutating func refreshEnded() -> [Action] {
        refreshes = max(0, refreshes - 1)
        return inForeground || refreshes > 0 ? [] : [.suspendLedgers]
    }
}

/// How the lifecycle suspends and resumes the ledgers: the process's (``Ledger/suspend(waitingUpTo:)``,
/// ``Ledger/resume()``) in an app; tests that share a process with others substitute their own.
package struct LedgerSuspension: Sendable {
    package var suspend: @Sendable () throws(LedgerError) -> Void
    package var resume: @Sendable () -> Void

    package init(suspend: @escaping @Sendable () throws(LedgerError) -> Void, resume: @escaping @Sendable () -> Void) {
        self.suspend = suspend
        self.resume = resume
    }

    /// Every ledger of the process.
    package static let process = LedgerSuspension(suspend: { () throws(LedgerError) in try Ledger.suspend() }, resume: { Ledger.resume() })
}

extension SyncClient {
    /// The lifecycle's state: its machine, the run it started, how it suspends.
    struct Lifecycle: Sendable {
        var machine = LifecycleStateMachine()
        var run: Task<Void, Never>?
        var suspension = LedgerSuspension.process
    }

    /// The app came to the foreground (`scenePhase == .active`, `didBecomeActive`): resumes
    /// the process's ledgers (``Ledger/resume()``) and starts ``run()`` in a task of the
    /// client's own, once the previous run has returned. Calling it again while in the
    /// foreground does nothing. Any number of foreground/background cycles may follow.
    ///
    /// ```swift
    /// switch phase {
    /// case .active: sync.enterForeground()
    /// case .background: try? sync.enterBackground()   // nothing to undo if it throws
    /// default: break
    /// }
    /// ```
    public func enterForeground() {
        lifecycle.withLock { l in
            do {
                try perform(l.machine.enterForeground(), &l)
            } catch {
                // enterForeground has no suspension to perform (its actions resume and start).
                assertionFailure("enterForeground: \(error)")
            }
        }
    }

    /// The app goes to the background (`scenePhase == .background`): cancels the run
    /// ``enterForeground()`` started — it returns within milliseconds, `stopped`, never
    /// `failed`; a batch sent and not yet acknowledged is sent again next time (duplicates,
    /// applied once) — and suspends the process's ledgers (``Ledger/suspend(waitingUpTo:)``)
    /// so that no file lock is held while the app is suspended, unless a
    /// ``backgroundRefresh()`` is running (it suspends them when it ends). Throws what
    /// `Ledger.suspend()` throws: a transaction that did not end in 2 s (calls stay refused
    /// until the next resume; nothing to undo).
    public func enterBackground() throws(LedgerError) {
        try lifecycle.withLock { l throws(LedgerError) in try perform(l.machine.enterBackground(), &l) }
    }

    /// A background refresh (`BGAppRefreshTask`): resumes the ledgers, runs ``syncOnce()``,
    /// and suspends the ledgers again — unless the app came to the foreground meanwhile.
    /// Cancel the task that calls it from the refresh's expiration handler: it then returns
    /// at once, with nothing lost (a batch not acknowledged is sent again next time) and the
    /// status `stopped`. Returns whether everything pending was sent and everything available
    /// applied (the error, if any, is in ``status``).
    ///
    /// ```swift
    /// let refresh = Task { await sync.backgroundRefresh() }
    /// task.expirationHandler = { refresh.cancel() }   // returns at once; nothing is lost
    /// ```
    @discardableResult
    public func backgroundRefresh() async -> Bool {
        lifecycle.withLock { l in
            do {
                try perform(l.machine.refreshStarted(), &l)
            } catch {
                assertionFailure("refreshStarted: \(error)")  // it only resumes
            }
        }
        var synced: Bool
        do {
            _ = try await syncOnce()
            synced = true
        } catch {
            synced = false
        }
        let suspended: Result<Void, LedgerError> = lifecycle.withLock { l in
            do throws(LedgerError) {
                try perform(l.machine.refreshEnded(), &l)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        if case .failure(let error) = suspended {
            update { $0.up.error = .ledger(error) }  // the ledgers could not be suspended in time
            synced = false
        }
        return synced
    }

    /// Uses `suspension` instead of the process's `Ledger.suspend()` / `resume()` (tests).
    package func useSuspension(_ suspension: LedgerSuspension) {
        lifecycle.withLock { $0.suspension = suspension }
    }

    /// The run the lifecycle started, to wait for its end (tests).
    package var lifecycleRun: Task<Void, Never>? { lifecycle.withLock { $0.run } }

    func perform(_ actions: [LifecycleStateMachine.Action], _ l: inout Lifecycle) throws(LedgerError) {
        for action in actions {
            switch action {
            case .resumeLedgers:
                l.suspension.resume()
            case .startRun:
                let previous = l.run
                l.run = Task { [weak self] in
                    await previous?.value
                    await self?.run()
                }
            case .cancelRun:
                l.run?.cancel()
            case .suspendLedgers:
                try l.suspension.suspend()
            }
        }
    }
}
