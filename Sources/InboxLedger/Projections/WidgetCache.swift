import Synchronization

/// The last widget list read in this process (one per environment, shared by every handle).
final class WidgetCache: Sendable {
    private struct Entry {
        var state: ProjectionState
        var limit: Int
        var now: Int64
        var list: WidgetList
    }

    private let entry = Mutex<Entry?>(nil)

    /// The kept list, if it is what a fresh read at `now` of `state` would return: same state
    /// (every append changes it), same limit, and no expiry passed since it was read.
    func list(state: ProjectionState, limit: Int, now: Int64) -> WidgetList? {
        entry.withLock { e in
            guard let e, e.state == state, e.limit == limit, e.now <= now else { return nil }
            if let next = e.list.nextExpiry, now >= next.micros { return nil }
            return e.list
        }
    }

    /// Drops the kept list (the projections were rebuilt).
    func forget() { entry.withLock { $0 = nil } }

    func keep(_ list: WidgetList, state: ProjectionState, limit: Int, now: Int64) {
        entry.withLock { $0 = Entry(state: state, limit: limit, now: now, list: list) }
    }
}
