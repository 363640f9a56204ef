import Synchronization
import LedgerThreads

/// A dedicated thread that runs blocking ledger work, so that async callers never block a
/// thread of Swift's cooperative pool: one per environment for async reads, one per commit
/// queue to lead the async appends' commits. Jobs run in order; the thread exits after
/// ``lingerSeconds`` without work and is started again by the next job.
final class OffPoolWorker: Sendable {
    private struct Job {
        var id: UInt64
        var run: @Sendable () -> Void
        var cancelled: @Sendable () -> Void
    }

    private struct State {
        var jobs: [Job] = []
        var nextID: UInt64 = 0
    }

    static let lingerSeconds = 1.0
    private let state = Mutex(State())
    private let thread = DedicatedThread(lingerSeconds: lingerSeconds)

    /// Runs `body` on the worker thread and returns its result. A task cancelled before the
    /// job starts gets ``LedgerError/cancelled`` (nothing ran); once started, the job finishes
    /// and its result is returned.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws(LedgerError) -> T) async throws(LedgerError) -> T {
        let id = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, LedgerError>, Never>) in
                let job = Job(
                    id: id,
                    run: { continuation.resume(returning: Result { () throws(LedgerError) -> T in try body() }) },
                    cancelled: { continuation.resume(returning: .failure(.cancelled)) })
                if !enqueue(job, unless: { Task.isCancelled }) { job.cancelled() }
            }
        } onCancel: {
            let job = state.withLock { s -> Job? in
                guard let index = s.jobs.firstIndex(where: { $0.id == id }) else { return nil }
                return s.jobs.remove(at: index)
            }
            job?.cancelled()
        }
        return try result.get()
    }

    /// Runs `work` on the thread, after the jobs queued before it.
    func post(_ work: @escaping @Sendable () -> Void) {
        let id = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        _ = enqueue(Job(id: id, run: work, cancelled: {}), unless: { false })
    }

    /// Queues `job` (unless `refused()`, checked under the lock) and starts or wakes the thread.
    private func enqueue(_ job: Job, unless refused: () -> Bool) -> Bool {
        let queued = state.withLock { s -> Bool in
            if refused() { return false }
            s.jobs.append(job)
            return true
        }
        if queued { thread.wake { thread in self.work(on: thread) } }
        return queued
    }

    /// The thread's loop: runs the jobs in order, and returns once it idled long enough.
    private func work(on thread: DedicatedThread) {
        while true {
            if let job = state.withLock({ s in s.jobs.isEmpty ? nil : s.jobs.removeFirst() }) {
                job.run()
                thread.busy()
            } else if !thread.idle() {
                return
            }
        }
    }
}
