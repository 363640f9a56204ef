#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads
import Synchronization

/// How a projection build (a catch-up, a drop) shares the writer lock: in write transactions
/// of about ``stepNanoseconds`` each, never inside an opening (docs/apps.md, "Upgrading a
/// projection").
enum ProjectionBuildPacing {
    /// How long one build transaction applies events before it commits: other writers wait
    /// milliseconds for the lock, never the write timeout.
    static let stepNanoseconds: UInt64 = 10_000_000
    /// How many events are read from the log at a time inside a step.
    static let chunk = 500
    /// How many entries of state (rows, index entries) a step stages in memory before its
    /// write transaction writes them: ~6 ms of the writer lock a step on the benchmark VM
    /// (W9-U under perf: the commits are 9 % of a 200,000-event build of ~36 steps).
    static let stagedEntries = 8_192
    /// How many events a step stages at most (a projection whose events change few entries):
    /// its read transaction stays ~100 ms at most on the benchmark VM.
    static let stagedEvents = 20_000
    /// How many entries one drop transaction deletes.
    static let dropChunk = 2_000
    /// How long the builder an opening starts waits before its first step, in microseconds: a
    /// launch's first reads (a widget's timeline, the app's first screen) are not slowed by a
    /// build's reading the log beside them.
    static let openingDelayMicros: UInt32 = 200_000
    /// Pause between two steps, in microseconds: the writer lock is not fair (a waiting writer
    /// polls it, every 2 ms at most), so a builder committing step after step would keep other
    /// processes' writers out; with the pause, a waiting writer gets in between two steps.
    static let pauseMicros: UInt32 = 1_000
}

/// What one build step did (``AppProjectionBuild/step()``).
enum ProjectionBuildStep: Equatable {
    /// Nothing is due for this handle's projections.
    case idle
    /// A transaction did work; more may be due.
    case worked
}

/// Runs a handle's projection builds on a thread of its own (``LedgerOptions/projectionBuilds``
/// `.inBackground`): started by a writable opening with work due, by an append and a read left
/// behind; it stops when nothing is due, the handle is gone, or a step fails (the next opening,
/// append or read starts it again; ``lastError`` says why). What it runs is bound at the
/// handle's opening (`AppProjectionBuild.run()`, holding the handle's internals weakly: the
/// builder never keeps a ledger open).
final class ProjectionBuilder: Sendable {
    private struct State {
        var run: (@Sendable () throws(LedgerError) -> Bool)?
        var lastError: LedgerError?
    }
    private let state = Mutex(State())
    private let thread = DedicatedThread(lingerSeconds: 0)

    /// Binds the builder to its handle, once, at its opening: `run` runs the builds until
    /// nothing is due and returns true, or returns false once the handle is gone.
    func bind(_ run: @escaping @Sendable () throws(LedgerError) -> Bool) { state.withLock { $0.run = run } }

    /// Why the last background run stopped early (nil: it did not).
    var lastError: LedgerError? { state.withLock { $0.lastError } }

    /// Starts the thread (or wakes it for another round), if bound; `delayMicros`: it first
    /// waits that long (an opening's: a launch's first reads go before the build).
    func schedule(delayMicros: UInt32 = 0) {
        guard state.withLock({ $0.run != nil }) else { return }
        thread.wake { [weak self] thread in
            if delayMicros > 0 { usleep(delayMicros) }
            repeat {
                guard let self, let run = self.state.withLock({ $0.run }) else { return }
                do throws(LedgerError) {
                    guard try run() else { return }  // the handle is gone
                    self.state.withLock { $0.lastError = nil }
                } catch {
                    // Left for the next opening, append or read (a writer busy, a suspension, a full disk…).
                    self.state.withLock { $0.lastError = error }
                }
            } while !thread.stopUnlessWoken()
        }
    }
}
