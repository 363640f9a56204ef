/// Decides which statuses ``SyncClient/statusUpdates()`` delivers, so that a view sees state
/// changes and not every batch (docs/sync.md, "Status"). Pure: the caller passes the time.
///
/// The rule:
/// - a change of a direction's phase or error is delivered at once — except `syncing → idle`,
///   delivered only once that direction has stayed idle for ``idleHold`` (1 s): a run of
///   batches shows as one `syncing` span, not a flicker;
/// - any other change (counters, lags, cursors, times) at most once per ``interval`` (250 ms:
///   4 a second), with the latest values;
/// - the last status is always delivered: a change held back comes at the time ``Decision/wakeAt`` says.
package struct StatusCoalescer: Sendable {
    package typealias Instant = ContinuousClock.Instant

    /// The shortest time between two deliveries of counters alone.
    package var interval: Duration
    /// How long a direction must stay idle before `idle` replaces `syncing`.
    package var idleHold: Duration
    /// The last status delivered.
    package private(set) var published: SyncStatus
    var lastDelivery: Instant?
    var upIdleSince: Instant?
    var downIdleSince: Instant?

    package init(initial: SyncStatus, interval: Duration = .milliseconds(250), idleHold: Duration = .seconds(1)) {
        published = initial
        self.interval = interval
        self.idleHold = idleHold
    }

    /// What to do with the status now.
    package struct Decision: Hashable, Sendable {
        /// Deliver this (the status as shown: a held-back `idle` still `syncing`).
        package var deliver: SyncStatus?
        /// Offer the current status again at this time (something is held back).
        package var wakeAt: Instant?

        package init(deliver: SyncStatus?, wakeAt: Instant?) {
            self.deliver = deliver
            self.wakeAt = wakeAt
        }
    }

    /// Offers the current status at `now`.
    package mutating func offer(_ current: SyncStatus, at now: Instant) -> Decision {
        upIdleSince = current.up.phase == .idle ? upIdleSince ?? now : nil
        downIdleSince = current.down.phase == .idle ? downIdleSince ?? now : nil
        var shown = current
        var wake: Instant?
        func hold(_ shownPhase: inout SyncStatus.Phase, was: SyncStatus.Phase, idleSince: Instant?) {
            guard was == .syncing, shownPhase == .idle, let idleSince, now - idleSince < idleHold else { return }
            shownPhase = .syncing
            wake = earliest(wake, idleSince + idleHold)
        }
        hold(&shown.up.phase, was: published.up.phase, idleSince: upIdleSince)
        hold(&shown.down.phase, was: published.down.phase, idleSince: downIdleSince)
        guard shown != published else { return Decision(deliver: nil, wakeAt: wake) }
        let stateChanged = shown.up.phase != published.up.phase || shown.down.phase != published.down.phase
            || shown.up.error != published.up.error || shown.down.error != published.down.error
        if stateChanged || lastDelivery.map({ now - $0 >= interval }) ?? true {
            published = shown
            lastDelivery = now
            return Decision(deliver: shown, wakeAt: wake)
        }
        return Decision(deliver: nil, wakeAt: earliest(wake, lastDelivery.map { $0 + interval }))
    }

    func earliest(_ a: Instant?, _ b: Instant?) -> Instant? {
        switch (a, b) {
        case let (a?, b?): min(a, b)
        case let (a, b): a ?? b
        }
    }
}
