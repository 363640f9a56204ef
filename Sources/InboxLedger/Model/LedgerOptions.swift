import Synchronization

/// What a commit costs and what it survives.
///
/// | mode | syncs per commit | process killed | OS crash / power loss |
/// |---|---|---|---|
/// | `durable` (default) | 2 | every committed event kept | every committed event kept |
/// | `singleSync` | 1 | kept | the last commit(s) may be undone; never corrupt |
/// | `none` | 0 | kept | the whole file may be corrupted, every process's events with it |
///
/// The processes of a ledger share one file, so a mode is not a private choice: under `none`
/// an OS crash can leave a meta page pointing at pages that never reached the disk. A ledger
/// therefore records a *durability floor* when it is created (``LedgerOptions/durabilityFloor``,
/// `singleSync` by default) and every process commits at least that strongly: asking for
/// `none` on a ledger whose floor is `singleSync` commits with one sync. docs/operations.md
/// says what each mode and each mix survives.
public enum LedgerDurability: String, Sendable, Hashable, CaseIterable {
    case durable
    case singleSync
    case none

    private var rank: Int {
        switch self {
        case .none: 0
        case .singleSync: 1
        case .durable: 2
        }
    }

    /// This mode, raised to `floor` if weaker.
    public func atLeast(_ floor: LedgerDurability) -> LedgerDurability { rank >= floor.rank ? self : floor }

    /// The stored byte of a ledger's durability floor (docs/format.md).
    var storedByte: UInt8 { UInt8(rank) }

    init?(storedByte: UInt8) {
        guard let mode = LedgerDurability.allCases.first(where: { $0.rank == Int(storedByte) }) else { return nil }
        self = mode
    }
}

/// How to open a ledger.
///
/// ```swift
/// var options = LedgerOptions(role: "widget")
/// options.readOnly = true
/// let ledger = try Ledger(path: sharedContainer + "/inbox", options: options)
/// ```
public struct LedgerOptions: Sendable {
    /// The role recorded as every appended event's origin: 1–64 bytes of printable UTF-8 (no
    /// control characters, no line breaks), e.g. `app`, `widget`, `notification-service`.
    /// Anything else fails the opening with ``LedgerError/invalidArgument(name:reason:)``.
    public var role: String
    /// Commit durability; see ``LedgerDurability``. Raised to the ledger's stored
    /// durability floor if weaker (``Ledger/durability`` tells the mode in force).
    public var durability: LedgerDurability = .durable
    /// The weakest durability any process may commit with, recorded in a ledger this handle
    /// creates (an existing ledger keeps the floor it was created with). `none` lets processes
    /// skip syncing altogether, accepting that an OS crash or power cut may corrupt the whole
    /// file: for caches and tests, never for data that must survive.
    public var durabilityFloor: LedgerDurability = .singleSync
    /// Open without write access: appends and other writes throw ``LedgerError/readOnly(path:)``,
    /// nothing is ever created or upgraded (a missing ledger is ``LedgerError/notALedger(path:reason:)``).
    /// Works in a directory the process cannot write to only if `lock.mdb` already exists and
    /// is writable, or the file system is read-only. `false` by default.
    public var readOnly: Bool = false
    /// Whether a writable opening may create the ledger: its directory when it is missing —
    /// **only the last path component**: a missing parent fails with
    /// ``LedgerError/notALedger(path:reason:)`` naming it, so a mistyped path never becomes an
    /// empty inbox — and the ledger's files in a missing or empty directory. `true` by default;
    /// `false` opens only an existing ledger (``LedgerError/notALedger(path:reason:)`` otherwise).
    ///
    /// ```swift
    /// var options = LedgerOptions(role: "widget")
    /// options.create = false   // the host app creates the ledger; the widget only opens it
    /// ```
    public var create: Bool = true
    /// Map size requested at open; it doubles on demand up to `maxMapSize`.
    public var initialMapSize: Int = 32 << 20
    /// The largest the map (and so the data file) may grow. Every process maps the largest map
    /// any process of the ledger has grown to (LMDB adopts it), so this must fit the smallest
    /// address space among them — an extension's — and be the same in every process: 1 GiB by
    /// default (docs/operations.md).
    public var maxMapSize: Int = 1 << 30
    /// The largest encoded event accepted (envelope included). Events under the 4 KiB page
    /// size are stored most efficiently.
    public var maxEventBytes: Int = 64 << 10
    /// The most events one group commit takes from concurrent appenders.
    public var maxGroupCommitEvents: Int = 8192
    /// How long an append (or any write) waits for another process's write transaction without
    /// seeing progress before failing with ``LedgerError/writerBusy(path:holder:waitedSeconds:)``,
    /// in seconds. A process stopped or suspended inside its write holds the lock until it runs
    /// again, and is given up on after this long; one that keeps committing, or (Linux) keeps
    /// running, only slowly, is waited for (docs/operations.md, "Bounded waits"). A killed one
    /// releases the lock at once.
    public var writeTimeout: Double = 5
    /// For extensions suspended without warning: close the ledger's files (every lock and reader
    /// slot) after this many seconds without a call; the next call reopens them transparently
    /// (docs/operations.md gives the cost). nil: stay open while a handle exists.
    public var closesWhenIdle: Double?
    /// The app's own projections (``LedgerProjection``), kept in the same transaction as every
    /// append of this handle. A version the ledger does not hold yet is built beside the old
    /// one, never inside the opening: see ``projectionBuilds`` (docs/apps.md, "Upgrading a
    /// projection"; docs/semantics.md, "App projections").
    ///
    /// ```swift
    /// options.projections = [TaskList.self]
    /// ```
    public var projections: [any LedgerProjection.Type] = []
    /// Who runs the builds of ``projections`` a writable handle finds due (a new version, a
    /// catch-up of events appended without them): a thread of the handle's own
    /// (`.inBackground`, the default), or only ``LedgerProjections/build()`` (`.whenAsked`).
    public var projectionBuilds: ProjectionBuilds = .inBackground
    /// The time source for commit timestamps and expiry (``LedgerClock``): the system clock
    /// unless a test injects one.
    public var clock: LedgerClock = .system
    /// Upgrades of app-defined event payloads applied as events are read (``EventUpcaster``).
    public var upcasters: [EventUpcaster] = []
    /// What a writable opening does when the projections were built by older rules and the
    /// log was trimmed (``ProjectionUpgrade``); with the whole log, it always rebuilds.
    public var projectionUpgrade: ProjectionUpgrade = .fromWholeLog

    /// Options for a process that records its events as `role` (1–64 bytes), with every other option at its default.
    public init(role: String = "app") {
        self.role = role
    }
}

/// Where a ledger takes the time from: the commit timestamp of every event it appends, the
/// times it records (consumer leases, idempotency keys) and the "now" against which messages
/// expire and consumer leases lapse. The system clock by default; a test injects its own to
/// make expiry deterministic:
///
/// ```swift
/// let clock = ManualClock(Timestamp(iso8601: "2026-11-22T08:00:00Z")!)
/// var options = LedgerOptions(role: "test")
/// options.clock = clock.ledgerClock
/// let ledger = try Ledger.temporary(options: options)
/// clock.advance(seconds: 3600)   // an hour later, without waiting
/// ```
///
/// Only this process sees an injected clock; other processes stamp their commits with theirs.
/// The compactor's mutual-exclusion lease always uses the system clock.
public struct LedgerClock: Sendable {
    private let read: @Sendable () -> Timestamp

    /// A clock that asks `now` for the current time.
    public init(_ now: @escaping @Sendable () -> Timestamp) { self.read = now }

    /// The current time by this clock.
    public func now() -> Timestamp { read() }

    /// The system's real-time clock.
    public static let system = LedgerClock { Timestamp(micros: currentMicros()) }

    /// A clock stopped at `instant`.
    public static func fixed(_ instant: Timestamp) -> LedgerClock { LedgerClock { instant } }
}

/// A clock a test moves by hand (``LedgerOptions/clock``): `ledgerClock` reads it.
///
/// ```swift
/// let clock = ManualClock(Timestamp(micros: 0))
/// clock.advance(seconds: 90)
/// #expect(clock.now == Timestamp(micros: 90_000_000))
/// ```
public final class ManualClock: Sendable {
    private let current: Mutex<Timestamp>

    /// A clock showing `start`.
    public init(_ start: Timestamp) { current = Mutex(start) }

    /// The time it shows.
    public var now: Timestamp { current.withLock { $0 } }

    /// Sets the time it shows (earlier times are allowed: a device's clock can go back).
    public func set(_ instant: Timestamp) { current.withLock { $0 = instant } }

    /// Moves it `seconds` forward (backward if negative), to the microsecond.
    public func advance(seconds: Double) {
        current.withLock { $0 = Timestamp(micros: $0.micros + Int64((seconds * 1_000_000).rounded())) }
    }

    /// A ``LedgerClock`` reading this clock.
    public var ledgerClock: LedgerClock { LedgerClock { [self] in now } }
}

/// Who builds a writable handle's app projections (``LedgerOptions/projectionBuilds``): each
/// build runs in steps — events applied in memory without a lock, then a write transaction of
/// a few milliseconds — each recording its progress, never inside an opening.
public enum ProjectionBuilds: Sendable, Hashable {
    /// A thread of the handle's own, started by its opening and by an append that left a
    /// projection behind, running steps until nothing is due (a step that fails is retried by
    /// the next opening or append).
    case inBackground
    /// Only the app's calls to ``LedgerProjections/build()`` (a host app that builds in a
    /// background task of its own, with the time the system gives it).
    case whenAsked
}

/// What a writable opening does when the ledger's projections were built by older rules and the
/// log was trimmed, so that the events before the newest snapshot cannot be replayed.
public enum ProjectionUpgrade: Sendable, Hashable {
    /// Refuse with ``LedgerError/projectionUpgradeNeeded(path:stored:supported:reason:)``,
    /// writing nothing (the default: never mix rules silently).
    case fromWholeLog
    /// Rebuild from the newest snapshot (state built by the old rules up to it) plus the
    /// events after it replayed by the new rules: the documented way out.
    case fromNewestSnapshot
}
