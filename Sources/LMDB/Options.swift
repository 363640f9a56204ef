import CLMDB

/// Flags for opening an environment (`mdb_env_open`).
///
/// Only the flags that are safe and meaningful for a caller to choose are public
/// (``noReadAhead``, ``noMemoryInitialization``); ``EnvironmentConfiguration/flags`` honours
/// those alone. The others are set by the layer from a single source of truth each: read-only
/// from ``EnvironmentConfiguration/readOnly``, the sync flags from ``Durability``,
/// `MDB_NOTLS` always (docs/lmdb.md rule 2); `MDB_NOLOCK`, `MDB_WRITEMAP` and `MDB_MAPASYNC`
/// never. They are named (internally) so that every C constant is checked by a test.
public struct EnvironmentFlags: OptionSet, Sendable, Hashable {
    /// The C flag bits.
    public let rawValue: UInt32
    /// Flags from their C bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `MDB_FIXEDMAP`: map at a fixed address (experimental).
    static let fixedMap = EnvironmentFlags(rawValue: UInt32(MDB_FIXEDMAP))
    /// `MDB_NOSUBDIR`: the path is the data file itself, not a directory.
    static let noSubdirectory = EnvironmentFlags(rawValue: UInt32(MDB_NOSUBDIR))
    /// `MDB_NOSYNC`: do not sync on commit. Survives a process crash, not an OS crash.
    static let noSync = EnvironmentFlags(rawValue: UInt32(MDB_NOSYNC))
    /// `MDB_RDONLY`: open read-only.
    static let readOnly = EnvironmentFlags(rawValue: UInt32(MDB_RDONLY))
    /// `MDB_NOMETASYNC`: sync the data but not the meta page on commit (one sync per commit).
    static let noMetaSync = EnvironmentFlags(rawValue: UInt32(MDB_NOMETASYNC))
    /// `MDB_WRITEMAP`: write through a writable map. Never used here: a full disk becomes SIGBUS.
    static let writeMap = EnvironmentFlags(rawValue: UInt32(MDB_WRITEMAP))
    /// `MDB_MAPASYNC`: with `writeMap`, flush asynchronously.
    static let mapAsync = EnvironmentFlags(rawValue: UInt32(MDB_MAPASYNC))
    /// `MDB_NOTLS`: reader slots belong to transactions, not threads. Always set here.
    static let noThreadLocalStorage = EnvironmentFlags(rawValue: UInt32(MDB_NOTLS))
    /// `MDB_NOLOCK`: no locking at all. Never used here.
    static let noLock = EnvironmentFlags(rawValue: UInt32(MDB_NOLOCK))
    /// `MDB_NORDAHEAD`: turn off OS read-ahead.
    public static let noReadAhead = EnvironmentFlags(rawValue: UInt32(MDB_NORDAHEAD))
    /// `MDB_NOMEMINIT`: do not zero malloc'd pages before writing them.
    public static let noMemoryInitialization = EnvironmentFlags(rawValue: UInt32(MDB_NOMEMINIT))
}

/// Flags for opening a named database (`mdb_dbi_open`).
public struct DatabaseFlags: OptionSet, Sendable, Hashable {
    /// The C flag bits.
    public let rawValue: UInt32
    /// Flags from their C bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `MDB_REVERSEKEY`: compare keys from the end.
    public static let reverseKey = DatabaseFlags(rawValue: UInt32(MDB_REVERSEKEY))
    /// `MDB_DUPSORT`: several sorted values per key (each at most 511 bytes).
    public static let duplicateSort = DatabaseFlags(rawValue: UInt32(MDB_DUPSORT))
    /// `MDB_INTEGERKEY`: native-endian integer keys. Avoided here: keys are big-endian.
    public static let integerKey = DatabaseFlags(rawValue: UInt32(MDB_INTEGERKEY))
    /// `MDB_DUPFIXED`: with `duplicateSort`, values all of one size.
    public static let duplicateFixed = DatabaseFlags(rawValue: UInt32(MDB_DUPFIXED))
    /// `MDB_INTEGERDUP`: with `duplicateSort`, native-endian integer values.
    public static let integerDuplicate = DatabaseFlags(rawValue: UInt32(MDB_INTEGERDUP))
    /// `MDB_REVERSEDUP`: with `duplicateSort`, compare values from the end.
    public static let reverseDuplicate = DatabaseFlags(rawValue: UInt32(MDB_REVERSEDUP))
    /// `MDB_CREATE`: create the database if it does not exist.
    public static let create = DatabaseFlags(rawValue: UInt32(MDB_CREATE))
}

/// Flags for `mdb_put` and `mdb_cursor_put`.
public struct WriteFlags: OptionSet, Sendable, Hashable {
    /// The C flag bits.
    public let rawValue: UInt32
    /// Flags from their C bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `MDB_NOOVERWRITE`: fail with ``LMDBError/keyExists`` if the key exists.
    public static let noOverwrite = WriteFlags(rawValue: UInt32(MDB_NOOVERWRITE))
    /// `MDB_NODUPDATA`: with `duplicateSort`, fail if the pair exists.
    public static let noDuplicateData = WriteFlags(rawValue: UInt32(MDB_NODUPDATA))
    /// `MDB_CURRENT` (internal: `mdb_put` rejects it; it belongs to cursor puts).
    static let current = WriteFlags(rawValue: UInt32(MDB_CURRENT))
    /// `MDB_RESERVE` (internal: `put` would store reserved bytes instead of the value passed,
    /// and the pointer to them must not leave this layer).
    static let reserve = WriteFlags(rawValue: UInt32(MDB_RESERVE))
    /// `MDB_APPEND`: the key is greater than every existing key (fast path);
    /// ``LMDBError/keyExists`` otherwise.
    public static let append = WriteFlags(rawValue: UInt32(MDB_APPEND))
    /// `MDB_APPENDDUP`: as `append`, for sorted duplicates.
    public static let appendDuplicate = WriteFlags(rawValue: UInt32(MDB_APPENDDUP))
    /// `MDB_MULTIPLE` (internal: `mdb_put` rejects it; it belongs to cursor puts).
    static let multiple = WriteFlags(rawValue: UInt32(MDB_MULTIPLE))
}

/// Flags for ``Environment/copy(to:flags:)`` (`mdb_env_copy2`).
public struct CopyFlags: OptionSet, Sendable, Hashable {
    /// The C flag bits.
    public let rawValue: UInt32
    /// Flags from their C bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `MDB_CP_COMPACT`: omit free pages and renumber, producing a smaller file.
    public static let compact = CopyFlags(rawValue: UInt32(MDB_CP_COMPACT))
}

/// What a commit costs and what it survives (docs/lmdb.md rule 11).
///
/// | mode | syncs per commit | process crash | OS crash / power loss |
/// |---|---|---|---|
/// | `durable` | 2 (data `fdatasync` + meta page `O_DSYNC`) | kept | kept |
/// | `singleSync` | 1 (`MDB_NOMETASYNC`) | kept | the last transaction(s) may be undone; never corrupt |
/// | `none` | 0 (`MDB_NOSYNC`) | kept | recent transactions may be lost |
public enum Durability: String, Sendable, Hashable, CaseIterable {
    case durable
    case singleSync
    case none

    var flags: EnvironmentFlags {
        switch self {
        case .durable: []
        case .singleSync: .noMetaSync
        case .none: .noSync
        }
    }

    /// The stronger of two modes.
    public func strongest(_ other: Durability) -> Durability {
        func rank(_ d: Durability) -> Int { d == .durable ? 2 : d == .singleSync ? 1 : 0 }
        return rank(self) >= rank(other) ? self : other
    }
}
