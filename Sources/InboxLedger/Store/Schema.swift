import LMDB

/// The named databases of a ledger and the keys of its metadata record (docs/format.md).
struct Schema: Sendable {
    /// The ledger format this library writes and the newest it reads. Format 1 kept the event
    /// counters in their own table, formats 1 and 2 each projection table in its own; a
    /// writable opening moves the counters into `meta`, the projection tables into two trees,
    /// and writes the current one (``Ledger/upgradeFormat()``); a read-only handle reads formats
    /// 1 and 2 as they are. Format 4 adds event records with flag bits 1 and 2 (shared, from the
    /// feed: docs/format.md), which a library of format 3 would take for damage; it moves
    /// nothing, so a format-3 ledger is format 4 as it is.
    static let formatVersion: UInt32 = 4
    /// The first format that keeps the projection tables in two trees (``ProjectionPlacement``).
    static let projectionsInTwoTreesSince: UInt32 = 3

    static let metaName = "meta"
    static let eventsName = "events"
    static let keysName = "keys"
    /// Format 1's event counters; empty in format 2 (the counts live in `meta`); from format 3
    /// the **row tree**: every projection table's rows but the state's, each under its
    /// ``ProjectionTable/storedPrefix`` (a database every ledger already has, so no table appears
    /// under a handle that is open while another process upgrades the ledger, and the opening's
    /// check of `meta`'s pages stays as small as `meta`).
    static let countersName = "counters"
    static let consumersName = "consumers"
    static let snapshotsName = "snapshots"
    static let allNames = [metaName, eventsName, keysName, countersName, consumersName, snapshotsName]
        + ProjectionTable.allCases.map(\.rawValue)

    enum MetaKey {
        static let format = Array("format-version".utf8)
        static let ledgerID = Array("ledger-id".utf8)
        static let createdAt = Array("created-at".utf8)
        static let head = Array("head".utf8)
        static let lastCompaction = Array("last-compaction".utf8)
        static let compactorLease = Array("compactor-lease".utf8)
        static let durabilityFloor = Array("durability-floor".utf8)
        static let projectionVersion = Array("projection-version".utf8)
    }

    let meta: Database
    let events: Database
    let keys: Database
    let counters: Database
    let consumers: Database
    let snapshots: Database
    let projections: [ProjectionTable: Database]

    init(_ environment: Environment) throws(LMDBError) {
        meta = try environment.database(Schema.metaName)
        events = try environment.database(Schema.eventsName)
        keys = try environment.database(Schema.keysName)
        counters = try environment.database(Schema.countersName)
        consumers = try environment.database(Schema.consumersName)
        snapshots = try environment.database(Schema.snapshotsName)
        var projections: [ProjectionTable: Database] = [:]
        for table in ProjectionTable.allCases {
            // A table added by newer rules is absent from a ledger an older library wrote until a
            // writable opening creates it; a read-only handle reads it as empty.
            if table.addedByNewerRules, !environment.hasDatabase(table.rawValue) { continue }
            projections[table] = try environment.database(table.rawValue)
        }
        self.projections = projections
    }
}

/// A random (version 4) UUID string, without Foundation.
func randomUUIDString() -> String {
    var generator = SystemRandomNumberGenerator()
    var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
    bytes[6] = (bytes[6] & 0x0F) | 0x40
    bytes[8] = (bytes[8] & 0x3F) | 0x80
    let hex = bytes.map { b in String(b, radix: 16).count == 1 ? "0" + String(b, radix: 16) : String(b, radix: 16) }
    return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(separator: "-")
}
