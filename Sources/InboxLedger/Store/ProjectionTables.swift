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

/// Where projections live: the LMDB tables inside the append's write transaction, or an
/// in-memory copy for rebuilding and comparing (``Ledger/verifyProjections()``).
protocol ProjectionStore {
    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]?
    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws
    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws
    /// Visits entries in ascending key order from the first key ≥ `start` while `body` returns true.
    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws
}

/// The LMDB-backed store: one transaction's view of the projection tables.
struct TransactionStore: ProjectionStore {
    let txn: Transaction
    let tables: [ProjectionTable: Database]

    func db(_ table: ProjectionTable) throws -> Database {
        guard let db = tables[table] else { throw LMDBError.badDatabase }
        return db
    }

    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? {
        guard let db = tables[table] else { return try absent(table) }
        return try txn.get(db, key: key)
    }

    /// Reading a table this handle did not find: one that newer rules added reads as empty.
    private func absent(_ table: ProjectionTable) throws -> [UInt8]? {
        guard table.addedByNewerRules else { throw LMDBError.badDatabase }
        return nil
    }
    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws { try txn.put(db(table), key: key, value: value) }
    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws { try txn.delete(db(table), key: key) }

    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        guard let db = tables[table] else { _ = try absent(table); return }
        try txn.forEachEntry(db, from: start) { e in try body(e.key, e.value) ? .next : .stop }
    }

    /// Empties every built-in projection table this handle found (a rebuild by other rules;
    /// the app projections are the apps' own, rebuilt by their versions).
    func removeAll() throws {
        for table in ProjectionTable.allCases where table != .apps {
            guard let db = tables[table] else { continue }
            try txn.removeAll(db)
        }
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
