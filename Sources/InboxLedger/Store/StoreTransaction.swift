import LMDB
import Synchronization

/// One transaction of the store, seen as the ledger's tables: the only way any folder reads or
/// writes a record. Each table is a type that owns its key and value encoding (docs/format.md),
/// so no folder above the store encodes a key, decodes a value or names LMDB.
///
/// Given to the closures of ``LedgerStore/read(_:_:)`` and ``LedgerStore/write(_:durability:_:)``;
/// valid only inside them (the LMDB transaction it wraps is invalidated when they return).
struct StoreTransaction {
    /// The LMDB transaction: the store's own, and the tests' way to damage a table behind the
    /// tables' back (`rawTransaction`). Nothing outside Store/ touches it.
    let rawTransaction: Transaction
    /// What every transaction of the store shares (one reference: a transaction is passed and
    /// copied on the append's path, and copying the schema itself costs retains and copies).
    let layout: StoreLayout

    /// Where this transaction finds the projection tables (``ProjectionPlacement``).
    let placement: ProjectionPlacement

    /// The tables of `rawTransaction`. A handle that opened a ledger of format 3 knows where
    /// the projection tables are. One that opened an older format (read-only, or refused
    /// writes) looks at `format-version`, since another process may upgrade the ledger while it
    /// is open — in each transaction until one sees format 3; from then on only a transaction
    /// whose snapshot is older than that one's looks again (a format never goes back, but a
    /// read begun on another thread just before may still see the old one).
    init(rawTransaction: Transaction, layout: StoreLayout) throws(LMDBError) {
        self.rawTransaction = rawTransaction
        self.layout = layout
        let twoTrees = ProjectionPlacement.twoTrees(meta: layout.schema.meta, rows: layout.schema.counters)
        let snapshot = rawTransaction.id
        if snapshot >= layout.twoTreesSince.load(ordering: .acquiring) {
            placement = twoTrees
        } else if let format = try MetaRecord(txn: rawTransaction, table: layout.schema.meta).get(Meta.format),
                  format >= Schema.projectionsInTwoTreesSince {
            layout.twoTreesSince.min(snapshot, ordering: .releasing)
            placement = twoTrees
        } else {
            placement = .ownTables(layout.schema.projections)
        }
    }

    /// The ledger's named databases.
    var schema: Schema { layout.schema }
    /// The ledger's directory, for the errors a malformed record is reported with.
    var path: String { layout.path }

    /// `meta`: the ledger's identity, head, counters and records, field by field.
    var meta: MetaRecord { MetaRecord(txn: rawTransaction, table: schema.meta) }
    /// `events`: the log, by sequence.
    var events: EventTable { EventTable(txn: rawTransaction, table: schema.events, path: path) }
    /// `keys`: the idempotency keys.
    var keys: KeyTable { KeyTable(txn: rawTransaction, table: schema.keys, path: path) }
    /// `consumers`: the consumers' cursors.
    var consumers: ConsumerTable { ConsumerTable(txn: rawTransaction, table: schema.consumers, path: path) }
    /// `snapshots`: the projections' snapshots.
    var snapshots: SnapshotTable { SnapshotTable(txn: rawTransaction, table: schema.snapshots, path: path) }
    /// The projection tables.
    var projections: TransactionStore { TransactionStore(txn: rawTransaction, placement: placement) }

    /// The last sequence ever assigned (0 for an empty ledger).
    func head() throws -> UInt64 { try meta.get(Meta.head) ?? 0 }

    /// The lowest sequence in the log (`head + 1` when the log is empty).
    func firstSequence() throws -> UInt64 {
        if let first = try events.firstSequence() { return first }
        return try head() + 1
    }

    /// The event counts by type and by origin role (``EventCounts/read(meta:legacy:in:)``).
    func eventCounts() throws -> (byType: [String: UInt64], byRole: [String: UInt64]) {
        try EventCounts.read(meta: schema.meta, legacy: schema.counters, in: rawTransaction)
    }
}

/// A store's tables and directory, made once when it opens and shared by its transactions.
final class StoreLayout: Sendable {
    let schema: Schema
    let path: String
    /// The oldest snapshot (transaction id) known to be of format 3 or later, whose projection
    /// tables are in two trees: 0 when the ledger was at opening; until then `Int.max`, and
    /// the snapshot of the first transaction that sees it (a format never goes back, so every
    /// later snapshot is too).
    let twoTreesSince: Atomic<Int>

    init(schema: Schema, path: String, formatVersion: UInt32) {
        self.schema = schema
        self.path = path
        twoTreesSince = Atomic(formatVersion >= Schema.projectionsInTwoTreesSince ? 0 : Int.max)
    }
}
