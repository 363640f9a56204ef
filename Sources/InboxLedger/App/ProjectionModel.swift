// An app projection as an `@Observable` model: what a SwiftUI view (or any Observation
// client) reads to stay current as any process appends — the ledger's counterpart of
// GRDBQuery's `@Query` and sqlite-data's `@FetchAll`. The Observation module ships with every
// Swift 5.9+ toolchain, Linux included; SwiftUI is needed only by the views (docs/apps.md).

#if canImport(Observation)
import Observation
import Synchronization

/// The state of one app projection, kept current on the main actor by
/// a ``LedgerObservation`` of the projection: the stored state at once, then every distinct new
/// state after a commit by any process (coalesced; a commit that leaves the state as it was
/// changes nothing, so views are not invalidated for it).
///
/// Follow it for as long as a view shows it — `.task { await model.run() }` ends with the
/// view — or between ``start()`` and ``stop()`` (also stopped when the model goes away).
/// Reads run off the main actor; only the assignment of ``contents`` runs on it.
///
/// ```swift
/// @MainActor func followTasks(_ ledger: Ledger) async {
///     let tasks = ProjectionModel(TaskList.self, in: ledger, limit: 20)
///     await tasks.run()                       // until the calling task is cancelled
///     print(tasks.rows.map(\.row.title), tasks.document.open, tasks.error as Any)
/// }
/// ```
@MainActor @Observable
public final class ProjectionModel<P: LedgerProjection> {
    /// The last state read (nil until the first read; kept when a later read fails).
    public private(set) var contents: ProjectionContents<P>?
    /// Why following stopped — `LedgerError.projectionUnavailable` when this process
    /// registers another version than the ledger holds, for example; nil while it runs or
    /// after it was cancelled.
    public private(set) var error: (any Error)?
    /// Whether it is following the projection now.
    public private(set) var isRunning = false

    /// The ledger it reads (opened with `P` in `LedgerOptions.projections`).
    public let ledger: Ledger
    /// At most this many rows are read, in the projection's order.
    public let limit: Int
    /// The task ``start()`` made; a lock so that `deinit` (nonisolated) can cancel it.
    private let started = Mutex<Task<Void, Never>?>(nil)
    /// Which ``start()`` the running task belongs to: a task ending after ``stop()`` and a new
    /// ``start()`` leaves the new one alone.
    @ObservationIgnored private var generation = 0

    /// A model of `projection` in `ledger`, showing at most `limit` rows. Nothing is read
    /// until ``run()`` or ``start()``.
    public init(_ projection: P.Type, in ledger: Ledger, limit: Int = .max) {
        self.ledger = ledger
        self.limit = limit
    }

    deinit {
        started.withLock { $0?.cancel() }
    }

    /// The rows shown, in the projection's order (empty before the first read).
    public var rows: [ProjectionRow<P>] { contents?.rows ?? [] }

    /// The projection's document (``LedgerProjection/initialDocument`` before the first read).
    public var document: P.Document { contents?.document ?? P.initialDocument }

    /// Follows the projection until the calling task is cancelled (it then returns, ``error``
    /// nil) or the observation fails (``error`` says why). Call it from a view's
    /// `.task { await model.run() }`.
    public func run() async {
        isRunning = true
        error = nil
        defer { isRunning = false }
        do {
            for try await state in Self.observation(limit: limit).values(in: ledger) {
                contents = state
            }
        } catch {
            self.error = error
        }
    }

    /// Starts following in a task of its own, if it is not already; ``stop()`` or the model's
    /// release ends it. (Use either this or ``run()``, not both at once.)
    public func start() {
        guard started.withLock({ $0 == nil }) else { return }
        generation += 1
        let current = generation
        let updates = Self.observation(limit: limit).values(in: ledger)
        isRunning = true
        error = nil
        let task = Task { [weak self] in
            do {
                for try await state in updates {
                    guard let self else { return }
                    self.contents = state
                }
                self?.ended(current, nil)
            } catch {
                self?.ended(current, error)
            }
        }
        started.withLock { $0 = task }
    }

    /// Stops following (``contents`` keeps the last state); ``start()`` follows again.
    public func stop() {
        started.withLock { $0?.cancel() }
        ended(generation, nil)
    }

    /// The projection's contents, followed whatever the head (see ``ProjectionContents/sameState(as:)``).
    private static func observation(limit: Int) -> LedgerObservation<ProjectionContents<P>> {
        LedgerObservation.tracking { snapshot in try snapshot.projection(P.self).contents(limit: limit) }
            .removingDuplicates { $0.sameState(as: $1) }
    }

    private func ended(_ run: Int, _ failure: (any Error)?) {
        guard run == generation else { return }  // a task of an earlier start(), stopped
        generation += 1
        started.withLock { $0 = nil }
        isRunning = false
        if let failure { error = failure }
    }
}
#endif
