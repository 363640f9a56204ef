/// What a commit costs and what it survives.
///
/// | mode | syncs per commit | process killed | OS crash / power loss |
/// |---|---|---|---|
/// | `durable` (default) | 2 | every committed event kept | every committed event kept |
/// | `singleSync` | 1 | kept | the last commit(s) may be undone; never corrupt |
/// | `none` | 0 | kept | recent commits may be lost |
public enum LedgerDurability: String, Sendable, Hashable, CaseIterable {
    case durable
    case singleSync
    case none
}

/// How to open a ledger.
///
/// ```swift
/// var options = LedgerOptions(role: "widget")
/// options.readOnly = true
/// let ledger = try Ledger(path: sharedContainer + "/inbox", options: options)
/// ```
public struct LedgerOptions: Sendable {
    /// The role recorded as every appended event's origin (1–64 bytes).
    public var role: String
    /// Commit durability; see ``LedgerDurability``.
    public var durability: LedgerDurability = .durable
    /// Open without write access (works in a directory the process cannot write to only if
    /// `lock.mdb` already exists and is writable, or the file system is read-only).
    public var readOnly: Bool = false
    /// Create the directory and an empty ledger when none exists.
    public var create: Bool = true
    /// Map size requested at open; it doubles on demand up to `maxMapSize`.
    public var initialMapSize: Int = 32 << 20
    /// The largest the map (and so the data file) may grow.
    public var maxMapSize: Int = 64 << 30
    /// The largest encoded event accepted (envelope included). Events under the 4 KiB page
    /// size are stored most efficiently.
    public var maxEventBytes: Int = 64 << 10
    /// The most events one group commit takes from concurrent appenders.
    public var maxGroupCommitEvents: Int = 8192

    public init(role: String = "app") {
        self.role = role
    }
}
