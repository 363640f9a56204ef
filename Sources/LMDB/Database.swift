import CLMDB

/// A named database inside an ``Environment``: a sorted key/value table.
///
/// Handles are opened once, when the environment is opened, and stay valid until it closes
/// (docs/lmdb.md rule 7). Obtain one with ``Environment/database(_:)``.
public struct Database: Hashable, Sendable, CustomStringConvertible {
    /// The database's name in the environment.
    public let name: String
    let handle: MDB_dbi

    init(name: String, handle: MDB_dbi) {
        self.name = name
        self.handle = handle
    }

    /// `database 'name'`.
    public var description: String { "database '\(name)'" }
}

/// Statistics of one database (`mdb_stat`).
public struct DatabaseStatistics: Sendable, Hashable {
    /// Number of key/value pairs.
    public var entries: Int
    /// Height of the B-tree.
    public var depth: Int
    /// Branch (internal) pages.
    public var branchPages: Int
    /// Leaf pages.
    public var leafPages: Int
    /// Overflow pages (values larger than a page).
    public var overflowPages: Int
    /// Page size in bytes.
    public var pageSize: Int

    init(_ s: MDB_stat) {
        entries = Int(s.ms_entries)
        depth = Int(s.ms_depth)
        branchPages = Int(s.ms_branch_pages)
        leafPages = Int(s.ms_leaf_pages)
        overflowPages = Int(s.ms_overflow_pages)
        pageSize = Int(s.ms_psize)
    }

    /// Pages of every kind.
    public var totalPages: Int { branchPages + leafPages + overflowPages }
}
