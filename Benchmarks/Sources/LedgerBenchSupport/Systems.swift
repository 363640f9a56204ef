// The systems compared, behind one small interface: each does the same job on the same data.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import InboxLedger
import Dispatch
import Synchronization

public enum SystemKind: String, CaseIterable, Sendable {
    /// This project, default durability (LMDB's two syncs per commit), given typed events
    /// (`append(.inboxSynced(…))`, what an app calls; SQLite is given parsed fields too).
    case ledger
    /// The same given the JSON bytes (what the CLI and a server payload give).
    case ledgerJSON = "ledger-json"
    /// This project with `LedgerDurability.singleSync` (one sync per commit, `MDB_NOMETASYNC`).
    case ledgerSingleSync = "ledger-single-sync"
    /// This project's async API (tasks awaiting `append`), default durability: W2-64 only.
    case ledgerAsync = "ledger-async"
    /// LMDB through its C API doing the ledger's job for an inbox sync from parsed fields: the
    /// event, the message row, the widget-order row and the state record in one transaction; no
    /// envelope, checksum, validation, idempotency or group commit. The overhead the ledger adds.
    case lmdbSameJob = "lmdb-same-job"
    /// Raw LMDB: the payload under the next sequence number. No envelope, no projections.
    case lmdb
    /// SQLite, WAL, `synchronous=FULL`: events table plus projection tables, one transaction.
    case sqliteFull = "sqlite-full"
    /// The same with `synchronous=NORMAL` (a WAL commit is not synced; a checkpoint is).
    case sqliteNormal = "sqlite-normal"
    /// The usual approach without a database: the whole message list serialised and written atomically per change.
    case rewrite
    /// W9: this project with an app projection registered (the task list of docs/apps.md, `TaskList`).
    case ledgerProjection = "ledger+projection"
    /// W9 warm reads: one row of the task projection (`projectionRow`).
    case projectionRow = "projection-row"
    /// W9 warm reads: the task projection's document and first 10 rows (`projectionContents(limit: 10)`).
    case projectionTop10 = "projection-top10"
    /// W9 cold read: the task list folded from the whole log at launch (`events(after:)` in pages).
    case ledgerFoldLog = "ledger-fold-log"
    /// W9-O: a cold widget process opening writable with the task projection registered while a
    /// build of it is due (the opening applies nothing; the read says it is being built).
    case ledgerBuildDue = "ledger+build-due"
    /// W9-L: a read-only widget's read of the task projection 40,000 events behind the log.
    case projectionBehind = "projection-behind"
}

/// What every system can be asked to do. A workload that does not apply to a system is not
/// asked of it (see `Workload.systems`).
public protocol Store: AnyObject {
    /// Appends the deltas in one transaction, projections included.
    func appendBatch(_ deltas: ArraySlice<SyncDelta>) throws
    /// Appends one delta in its own durable transaction.
    func appendOne(_ delta: SyncDelta) throws
    /// Reads what the widget shows: the 10 newest rows and the badge (checked, so that it is
    /// really read); returns the row count.
    func readWidget() throws -> Int
    /// A consumer catching up from its persisted cursor, `pageSize` events a page, persisting the
    /// cursor after each page; returns the events read.
    func catchUp(consumer: String, pageSize: Int) throws -> Int
    /// Trims the log to its last `keep` events in chunks of `chunk`; returns the events trimmed.
    func trim(keepingLast keep: Int, chunk: Int) throws -> Int
    /// A handle another thread of this process can use at the same time as this one.
    func handleForAnotherThread() throws -> Store
}

public func openStore(_ kind: SystemKind, directory: String) throws -> Store {
    switch kind {
    case .ledger: try LedgerStore(directory: directory, durability: .durable, typed: true)
    case .ledgerJSON: try LedgerStore(directory: directory, durability: .durable)
    case .lmdbSameJob: try RawLMDBStore(directory: directory, sameJob: true)
    case .ledgerSingleSync: try LedgerStore(directory: directory, durability: .singleSync)
    case .ledgerAsync: try LedgerStore(directory: directory, durability: .durable)
    case .lmdb: try RawLMDBStore(directory: directory)
    case .sqliteFull: try SQLiteStore(directory: directory, synchronous: "FULL")
    case .sqliteNormal: try SQLiteStore(directory: directory, synchronous: "NORMAL")
    case .rewrite: try RewriteStore(directory: directory)
    case .ledgerProjection: try LedgerStore(directory: directory, durability: .durable, typed: true, projections: [TaskList.self])
    case .projectionRow, .projectionTop10, .ledgerFoldLog, .ledgerBuildDue, .projectionBehind: throw BenchFailure("\(kind.rawValue) is a W9 read, not a store")
    }
}

public struct BenchFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

// MARK: - The ledger

final class LedgerStore: Store {
    let ledger: Ledger

    /// Appends typed events (built from the parsed fields) rather than JSON bytes.
    let typed: Bool

    init(directory: String, durability: LedgerDurability, typed: Bool = false, projections: [any LedgerProjection.Type] = []) throws {
        self.typed = typed
        var options = LedgerOptions(role: "bench")
        options.durability = durability
        options.projections = projections
        options.maxMapSize = 8 << 30  // W7 holds a million events before compaction: more than an extension's default
        ledger = try Ledger(path: directory, options: options)
    }

    private func event(_ delta: SyncDelta) -> NewEvent {
        NewEvent(type: DomainEvent.inboxSyncedType, payload: delta.payload)
    }

    private func domainEvent(_ delta: SyncDelta) -> DomainEvent {
        let m = delta.message
        return .inboxSynced(InboxSync(mode: .delta, messages: [
            InboxMessage(id: m.id, title: m.title, subheading: m.subheading, iconURL: m.iconURL, sentAt: Timestamp(micros: m.sentAt), read: m.read),
        ]))
    }

    func appendBatch(_ deltas: ArraySlice<SyncDelta>) throws {
        if typed { _ = try ledger.append(AppendRequest(deltas.map(domainEvent))) } else { _ = try ledger.append(contentsOf: deltas.map(event)) }
    }

    func appendOne(_ delta: SyncDelta) throws {
        if typed { _ = try ledger.append(domainEvent(delta)) } else { _ = try ledger.append(event(delta)) }
    }

    func readWidget() throws -> Int {
        let list = try ledger.read({ try $0.widgetList(limit: 10) })
        guard list.badge >= 0 else { throw BenchFailure("negative badge") }
        return list.items.count
    }

    func catchUp(consumer name: String, pageSize: Int) throws -> Int {
        let consumer = try ledger.consumers.consumer(named: name)
        var read = 0
        while true {
            let batch = try consumer.next(limit: pageSize)
            if batch.events.isEmpty { return read }
            read += batch.events.count
            _ = try consumer.commit(batch)
        }
    }

    func trim(keepingLast keep: Int, chunk: Int) throws -> Int {
        var policy = CompactionPolicy()
        policy.retainedTail = keep
        policy.chunkSize = chunk
        return try Compactor(ledger: ledger, policy: policy).runOnce().eventsTrimmed
    }

    func handleForAnotherThread() throws -> Store { self }
}

/// W2-64 for `ledger-async`: one task per element of `perCaller`, each awaiting its appends one
/// by one (one event a commit, grouped by the ledger with the other tasks'). Returns every
/// append's latency in µs. The calling thread waits; the tasks run on the cooperative pool.
public func appendFromTasks(_ store: Store, perCaller: [[SyncDelta]]) throws -> [Double] {
    guard let ledger = (store as? LedgerStore)?.ledger else { throw BenchFailure("ledger-async needs the ledger") }
    let outcome = Mutex<Result<[Double], any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        let result: Result<[Double], any Error>
        do {
            result = .success(try await withThrowingTaskGroup(of: [Double].self) { group in
                for deltas in perCaller {
                    group.addTask {
                        var latencies: [Double] = []
                        for delta in deltas {
                            let started = ContinuousClock.now
                            _ = try await ledger.append(AppendRequest([NewEvent(type: DomainEvent.inboxSyncedType, payload: delta.payload)]))
                            let elapsed = ContinuousClock.now - started
                            latencies.append(Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12)
                        }
                        return latencies
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            })
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    guard let result = outcome.withLock({ $0 }) else { throw BenchFailure("async appends did not finish") }
    return try result.get()
}

// MARK: - Whole-file rewrite (shared user defaults)

/// The message list and badge, serialised whole (JSON) and replaced atomically on every change
/// (temporary file, `fsync`, `rename`), under an exclusive `flock` so several processes do not
/// lose each other's updates. Readers read and decode the whole file.
final class RewriteStore: Store {
    struct State: Codable {
        var messages: [Message] = []
        var unread = 0
        var badge = 0
    }

    let file: String
    let lockFile: String

    init(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        file = directory + "/inbox.json"
        lockFile = directory + "/inbox.lock"
    }

    private func load() throws -> State {
        guard let data = FileManager.default.contents(atPath: file) else { return State() }
        return try JSONDecoder().decode(State.self, from: data)
    }

    private func update(_ deltas: some Collection<SyncDelta>) throws {
        let fd = open(lockFile, O_CREAT | O_RDWR, 0o644)
        guard fd >= 0 else { throw BenchFailure("cannot open \(lockFile): errno \(errno)") }
        defer { close(fd) }
        guard flock(fd, LOCK_EX) == 0 else { throw BenchFailure("flock failed: errno \(errno)") }
        var state = try load()
        var index = Dictionary(uniqueKeysWithValues: state.messages.enumerated().map { ($1.id, $0) })
        for delta in deltas {
            if let at = index[delta.message.id] {
                state.messages[at] = delta.message
            } else {
                index[delta.message.id] = state.messages.count
                state.messages.append(delta.message)
            }
        }
        state.messages.sort { ($0.sentAt, $0.id) > ($1.sentAt, $1.id) }
        state.unread = state.messages.count { !$0.read }
        state.badge = state.unread
        let data = try JSONEncoder().encode(state)
        let temporary = file + ".tmp-\(getpid())"
        let out = open(temporary, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        guard out >= 0 else { throw BenchFailure("cannot create \(temporary): errno \(errno)") }
        let written = data.withUnsafeBytes { write(out, $0.baseAddress, $0.count) }
        let synced = fsync(out)
        close(out)
        guard written == data.count, synced == 0, rename(temporary, file) == 0 else {
            throw BenchFailure("cannot replace \(file): errno \(errno)")
        }
    }

    func appendBatch(_ deltas: ArraySlice<SyncDelta>) throws { try update(deltas) }
    func appendOne(_ delta: SyncDelta) throws { try update(CollectionOfOne(delta)) }

    func readWidget() throws -> Int {
        let state = try load()
        guard state.badge >= 0 else { throw BenchFailure("negative badge") }
        return state.messages.prefix(10).count
    }

    func catchUp(consumer: String, pageSize: Int) throws -> Int { throw BenchFailure("rewrite keeps no log") }
    func trim(keepingLast keep: Int, chunk: Int) throws -> Int { throw BenchFailure("rewrite keeps no log") }
    func handleForAnotherThread() throws -> Store { self }
}
