import LMDB

/// The tables the inline projections maintain (docs/format.md).
enum ProjectionTable: String, CaseIterable, Sendable {
    /// message id → ``MessageRecord``
    case messages
    /// inverted sentAt (8 B) + id → ``MessageRecord`` (the widget's order: newest first, ties by id)
    case widget
    /// sortable expiresAt (8 B) + id → empty
    case expiry
    /// sequence of the `widget.action` (8 B BE) → ``ActionRecord``, while pending
    case actions
    /// action id → ``ActionStatus``
    case actionIDs = "action-ids"
    /// `projection` → ``ProjectionState`` (unread, badge adjustment, version, …)
    case state
    /// message id → ``LocalMessageRecord``: what this device did or heard of a message that the
    /// server's listing does not reflect yet (a local removal, a push announcing it)
    case local
    /// The projections apps define (``LedgerProjection``): every registered projection's
    /// record, rows, order index and document (``AppProjectionKeys``)
    case apps = "app-projections"

    /// Whether the table came with projection rules after the first (a ledger an older library
    /// wrote may lack it; it is read as empty until a writable opening creates it).
    var addedByNewerRules: Bool {
        switch self {
        case .messages, .widget, .expiry, .actions, .actionIDs, .state: false
        case .local, .apps: true
        }
    }
}

extension ProjectionTable {
    /// What the table's keys start with from format 3 (docs/format.md, "The projection tables in
    /// two trees"): the projection state in `meta` under `head ‖ 0x00`, so that it sorts right
    /// after `head` and the leaf an append dirties for the head and the counters holds it too;
    /// every other table in the row tree (``Schema/countersName``) under `0x00 ‖ tag`, apart
    /// from one another and from format 1's counters (ASCII `t:`/`o:`).
    var storedPrefix: [UInt8] {
        switch self {
        case .messages: [0x00, 0x01]
        case .widget: [0x00, 0x02]
        case .expiry: [0x00, 0x03]
        case .actions: [0x00, 0x04]
        case .actionIDs: [0x00, 0x05]
        case .state: Array("head".utf8) + [0x00]
        case .local: [0x00, 0x07]
        case .apps: [0x00, 0x08]
        }
    }
}

/// Where projections live: the LMDB tables inside the append's write transaction, or an
/// in-memory copy for rebuilding and comparing (``Ledger/verifyProjections()``).
protocol ProjectionStore {
    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]?
    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws
    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws
    /// Visits entries in ascending key order from the first key ≥ `start` while `body` returns true.
    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws
}

/// Where a transaction finds the projection tables: from format 3 the state in `meta` and every
/// other table in the row tree, each under its ``ProjectionTable/storedPrefix``; in formats 1
/// and 2 each in its own named database (read as they are by a handle that may not upgrade them).
enum ProjectionPlacement {
    case twoTrees(meta: Database, rows: Database)
    case ownTables([ProjectionTable: Database])
}

/// The LMDB-backed store: one transaction's view of the projection tables.
struct TransactionStore: ProjectionStore {
    let txn: Transaction
    let placement: ProjectionPlacement

    /// The table's database and what its keys start with there; nil for a table that newer
    /// rules added and an older ledger this handle may not write lacks (read as empty).
    private func place(_ table: ProjectionTable) throws -> (Database, [UInt8])? {
        switch placement {
        case .twoTrees(let meta, let rows): return (table == .state ? meta : rows, table.storedPrefix)
        case .ownTables(let tables):
            if let db = tables[table] { return (db, []) }
            guard table.addedByNewerRules else { throw LMDBError.badDatabase }
            return nil
        }
    }

    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? {
        guard let (db, prefix) = try place(table) else { return nil }
        return try txn.get(db, key: prefix.isEmpty ? key : prefix + key)
    }

    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        guard let (db, prefix) = try place(table) else { throw LMDBError.badDatabase }
        try txn.put(db, key: prefix.isEmpty ? key : prefix + key, value: value)
    }

    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws {
        guard let (db, prefix) = try place(table) else { throw LMDBError.badDatabase }
        _ = try txn.delete(db, key: prefix.isEmpty ? key : prefix + key)
    }

    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        guard let (db, prefix) = try place(table) else { return }
        try txn.forEachEntry(db, from: prefix + start, prefix: prefix) { e in
            try body(prefix.isEmpty ? e.key : Array(e.key[prefix.count...]), e.value) ? .next : .stop
        }
    }

    /// Removes every row of `table`.
    func removeAll(_ table: ProjectionTable) throws {
        guard let (db, prefix) = try place(table) else { return }
        guard !prefix.isEmpty else { return try txn.removeAll(db) }
        try txn.withCursor(db) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let e = entry, e.key.starts(with: prefix) {
                try cursor.deleteCurrent()
                entry = try cursor.seek(atLeast: prefix)
            }
        }
    }

    /// Empties every built-in projection table (a rebuild by other rules; the app projections
    /// are the apps' own, rebuilt by their versions).
    func removeAll() throws {
        for table in ProjectionTable.allCases where table != .apps { try removeAll(table) }
    }
}

/// An in-memory store with the same semantics, for rebuilds and comparisons.
final class MemoryStore: ProjectionStore {
    var tables: [ProjectionTable: [[UInt8]: [UInt8]]] = [:]

    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? { tables[table]?[key] }
    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws { tables[table, default: [:]][key] = value }
    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws { tables[table]?[key] = nil }

    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        for (key, value) in sorted(table) where !key.lexicographicallyPrecedes(start) {
            if try !body(key, value) { return }
        }
    }

    /// A table's entries in key order.
    func sorted(_ table: ProjectionTable) -> [(key: [UInt8], value: [UInt8])] {
        (tables[table] ?? [:]).sorted { $0.key.lexicographicallyPrecedes($1.key) }.map { (key: $0.key, value: $0.value) }
    }
}

/// A projection row that cannot be decoded (damage behind the ledger's back).
enum ProjectionError: Error, CustomStringConvertible {
    case malformed(table: ProjectionTable, key: String)

    var description: String {
        switch self {
        case .malformed(let table, let key): "projection table '\(table.rawValue)' has a malformed row '\(key)'"
        }
    }
}
