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
    /// What the table's keys start with in `meta`, where format 3 keeps every projection table
    /// (docs/format.md, "Format 3"): `0x00 ‖ tag` for the row tables (no field name of `meta`
    /// starts with `0x00`, so they sort before every field and apart from one another), and
    /// `head ‖ 0x00` for the projection state, so that it sorts right after `head`: the leaf an
    /// append dirties for the head and the counters holds the state too.
    var metaPrefix: [UInt8] {
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

/// Where a transaction finds the projection tables: in `meta` under each table's prefix
/// (format 3), or each in its own named database (formats 1 and 2, read as they are by a handle
/// that may not upgrade them).
enum ProjectionPlacement {
    case inMeta(Database)
    case ownTables([ProjectionTable: Database])
}

/// The LMDB-backed store: one transaction's view of the projection tables.
struct TransactionStore: ProjectionStore {
    let txn: Transaction
    let placement: ProjectionPlacement

    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? {
        switch placement {
        case .inMeta(let meta): return try txn.get(meta, key: table.metaPrefix + key)
        case .ownTables(let tables):
            guard let db = tables[table] else { return try absent(table) }
            return try txn.get(db, key: key)
        }
    }

    /// Reading a table this handle did not find: one that newer rules added reads as empty.
    private func absent(_ table: ProjectionTable) throws -> [UInt8]? {
        guard table.addedByNewerRules else { throw LMDBError.badDatabase }
        return nil
    }

    /// The table's database and what its keys start with there.
    private func place(_ table: ProjectionTable) throws -> (Database, [UInt8]) {
        switch placement {
        case .inMeta(let meta): return (meta, table.metaPrefix)
        case .ownTables(let tables):
            guard let db = tables[table] else { throw LMDBError.badDatabase }
            return (db, [])
        }
    }

    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        let (db, prefix) = try place(table)
        try txn.put(db, key: prefix.isEmpty ? key : prefix + key, value: value)
    }

    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws {
        let (db, prefix) = try place(table)
        _ = try txn.delete(db, key: prefix.isEmpty ? key : prefix + key)
    }

    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        switch placement {
        case .inMeta(let meta):
            let prefix = table.metaPrefix
            try txn.forEachEntry(meta, from: prefix + start, prefix: prefix) { e in
                try body(Array(e.key[prefix.count...]), e.value) ? .next : .stop
            }
        case .ownTables(let tables):
            guard let db = tables[table] else { _ = try absent(table); return }
            try txn.forEachEntry(db, from: start) { e in try body(e.key, e.value) ? .next : .stop }
        }
    }

    /// Removes every row of `table`.
    func removeAll(_ table: ProjectionTable) throws {
        switch placement {
        case .inMeta(let meta):
            let prefix = table.metaPrefix
            try txn.withCursor(meta) { cursor in
                var entry = try cursor.seek(atLeast: prefix)
                while let e = entry, e.key.starts(with: prefix) {
                    try cursor.deleteCurrent()
                    entry = try cursor.seek(atLeast: prefix)
                }
            }
        case .ownTables(let tables):
            guard let db = tables[table] else { return }
            try txn.removeAll(db)
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
