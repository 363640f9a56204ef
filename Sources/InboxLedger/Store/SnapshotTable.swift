import LMDB

/// The snapshot encoding (docs/format.md): rows `BE(S) ‖ tag ‖ key → value` copied from the
/// projection tables, and a header row `BE(S) ‖ 0x00` with version, sequence, time, row count
/// and a CRC-32C over every row.
enum SnapshotCodec {
    static let version: UInt8 = 1
    static let headerTag: UInt8 = 0

    static func tag(_ table: ProjectionTable) -> UInt8 {
        switch table {
        case .messages: 1
        case .widget: 2
        case .expiry: 3
        case .actions: 4
        case .actionIDs: 5
        case .state: 6
        case .local: 7
        case .apps: 8
        }
    }

    static func table(_ tag: UInt8) -> ProjectionTable? {
        ProjectionTable.allCases.first { self.tag($0) == tag }
    }

    static func rowKey(_ sequence: UInt64, _ tag: UInt8, _ key: [UInt8]) -> [UInt8] {
        SequenceKey.encode(sequence) + [tag] + key
    }

    /// Feeds one row into the running checksum.
    static func checksum(_ crc: UInt32, tag: UInt8, key: [UInt8], value: [UInt8]) -> UInt32 {
        var w = ByteWriter(capacity: 9 + key.count + value.count)
        w.u8(tag)
        w.u32le(UInt32(key.count))
        w.append(key)
        w.u32le(UInt32(value.count))
        w.append(value)
        return CRC32C.update(crc, w.bytes[...])
    }

    struct Header {
        var sequence: UInt64
        var createdAt: Int64
        var rows: UInt64
        var bytes: UInt64
        var checksum: UInt32

        func encode() -> [UInt8] {
            var w = ByteWriter(capacity: 37)
            w.u8(SnapshotCodec.version)
            w.u64be(sequence)
            w.u64be(UInt64(bitPattern: createdAt))
            w.u64be(rows)
            w.u64be(bytes)
            w.u32le(checksum)
            return w.bytes
        }

        static func decode(_ bytes: [UInt8]) -> Header? {
            var r = ByteReader(bytes)
            guard r.u8() == SnapshotCodec.version, let s = r.u64be(), let c = r.u64be(), let n = r.u64be(),
                  let b = r.u64be(), let k = r.u32le(), r.remaining == 0
            else { return nil }
            return Header(sequence: s, createdAt: Int64(bitPattern: c), rows: n, bytes: b, checksum: k)
        }
    }
}

/// The `snapshots` table: `BE(S) ‖ tag ‖ key` → a projection row of snapshot S, and
/// `BE(S) ‖ 0x00` → its header (``SnapshotCodec``).
struct SnapshotTable {
    let txn: Transaction
    let table: Database
    let path: String

    /// Every complete snapshot, oldest first.
    func headers() throws -> [SnapshotInfo] {
        try prefixes().compactMap(\.info)
    }

    /// Every snapshot sequence present in the table, with its header if it has one. A snapshot
    /// without a header is one whose deletion was interrupted: never used, removed by the next
    /// compaction.
    func prefixes() throws -> [(sequence: UInt64, info: SnapshotInfo?)] {
        var found: [(sequence: UInt64, info: SnapshotInfo?)] = []
        try txn.forEachEntry(table) { e in
            guard e.key.count >= 9, let s = SequenceKey.decode(Array(e.key.prefix(8))) else {
                throw LedgerError.corruptStore(path: path, reason: "malformed snapshot row")
            }
            var info: SnapshotInfo?
            // The header (tag 0) sorts first within its snapshot.
            if e.key[8] == SnapshotCodec.headerTag, let h = SnapshotCodec.Header.decode(e.value) {
                info = h.info
            }
            found.append((s, info))
            guard s < UInt64.max else { return .stop }
            return .seek(SequenceKey.encode(s + 1))
        }
        return found
    }

    /// The header of snapshot `sequence`, if it has a readable one.
    func header(_ sequence: UInt64) throws -> SnapshotCodec.Header? {
        try txn.get(table, key: SnapshotCodec.rowKey(sequence, SnapshotCodec.headerTag, [])).flatMap(SnapshotCodec.Header.decode)
    }

    /// Copies every row of `projections` into a snapshot at `head`, closed by its header.
    func write(at head: UInt64, from projections: TransactionStore, now: Int64) throws -> SnapshotInfo {
        var crc: UInt32 = 0
        var rows: UInt64 = 0
        var bytes: UInt64 = 0
        for projectionTable in ProjectionTable.allCases {
            let tag = SnapshotCodec.tag(projectionTable)
            var copied: [(key: [UInt8], value: [UInt8])] = []
            try projections.scan(projectionTable, from: []) { key, value in
                copied.append((key, value))
                return true
            }
            for row in copied {
                try txn.put(table, key: SnapshotCodec.rowKey(head, tag, row.key), value: row.value)
                crc = SnapshotCodec.checksum(crc, tag: tag, key: row.key, value: row.value)
                rows += 1
                bytes += UInt64(row.key.count + row.value.count)
            }
        }
        let header = SnapshotCodec.Header(sequence: head, createdAt: now, rows: rows, bytes: bytes, checksum: crc)
        try txn.put(table, key: SnapshotCodec.rowKey(head, SnapshotCodec.headerTag, []), value: header.encode())
        return header.info
    }

    /// Loads snapshot `sequence` into `store`, checking its row count and checksum: the
    /// built-in projections' rows, and the app projections' when `apps` is true (a rebuild of
    /// the built-in projections leaves the apps' live state alone).
    func load(_ sequence: UInt64, into store: some ProjectionStore, apps: Bool = false) throws {
        guard let header = try header(sequence) else {
            throw LedgerError.corruptStore(path: path, reason: "snapshot \(sequence) has no readable header")
        }
        var crc: UInt32 = 0
        var rows: UInt64 = 0
        let prefix = SequenceKey.encode(sequence)
        try txn.forEachEntry(table, from: prefix + [1], prefix: prefix) { e in
            guard let projectionTable = SnapshotCodec.table(e.key[8]) else {
                throw LedgerError.corruptStore(path: path, reason: "snapshot \(sequence) has a row of unknown table \(e.key[8])")
            }
            let key = Array(e.key.dropFirst(9))
            if projectionTable != .apps || apps { try store.put(projectionTable, key, e.value) }
            crc = SnapshotCodec.checksum(crc, tag: e.key[8], key: key, value: e.value)
            rows += 1
            return .next
        }
        guard rows == header.rows, crc == header.checksum else {
            throw LedgerError.corruptStore(path: path, reason: "snapshot \(sequence) fails its checksum (\(rows) of \(header.rows) rows)")
        }
    }

    /// Deletes up to `limit` rows of snapshot `sequence`, its header first (so a snapshot whose
    /// deletion is interrupted is never taken for a complete one); returns how many.
    func deleteRows(_ sequence: UInt64, limit: Int) throws -> Int {
        var deleted = try txn.delete(table, key: SnapshotCodec.rowKey(sequence, SnapshotCodec.headerTag, [])) ? 1 : 0
        let prefix = SequenceKey.encode(sequence)
        var keys: [[UInt8]] = []
        try txn.forEachEntry(table, from: prefix, prefix: prefix) { e in
            guard keys.count < limit else { return .stop }
            keys.append(e.key)
            return .next
        }
        for key in keys { try txn.delete(table, key: key) }
        deleted += keys.count
        return deleted
    }
}

extension SnapshotCodec.Header {
    var info: SnapshotInfo {
        SnapshotInfo(sequence: sequence, createdAt: Timestamp(micros: createdAt), rows: Int(rows), bytes: Int(bytes))
    }
}

extension StoreTransaction {
    /// Copies every projection row into a snapshot at the current head. Idempotent.
    func writeSnapshot(now: Int64) throws -> SnapshotInfo {
        let head = try head()
        if let existing = try snapshots.header(head) { return existing.info }
        return try snapshots.write(at: head, from: projections, now: now)
    }
}
