// The physical limit: LMDB through its C API, the payload stored under the next sequence
// number (8-byte big-endian key, MDB_APPEND). No envelope, no checksum, no projections, no
// idempotency, no group commit. Same durability as the ledger's default (two syncs a commit).
import CLMDBBaseline
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// @unchecked Sendable: the environment is opened with MDB_NOTLS and every transaction is begun
/// and ended inside one call on the calling thread; LMDB serialises writers itself.
final class RawLMDBStore: Store, @unchecked Sendable {
    private let env: OpaquePointer
    private var events: MDB_dbi = 0
    private var cursors: MDB_dbi = 0
    /// `lmdb-same-job`: the ledger's projection work too, from parsed fields.
    private let sameJob: Bool
    private var messages: MDB_dbi = 0
    private var widget: MDB_dbi = 0
    private var state: MDB_dbi = 0

    init(directory: String, sameJob: Bool = false) throws {
        self.sameJob = sameJob
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var env: OpaquePointer?
        try Self.check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw BenchFailure("mdb_env_create returned no environment") }
        self.env = env
        try Self.check(mdb_env_set_maxdbs(env, 8), "mdb_env_set_maxdbs")
        try Self.check(mdb_env_set_mapsize(env, 16 << 30), "mdb_env_set_mapsize")
        do {
            try Self.check(mdb_env_open(env, directory, UInt32(MDB_NOTLS), 0o644), "mdb_env_open \(directory)")
            try write { txn in
                try Self.check(mdb_dbi_open(txn, "events", UInt32(MDB_CREATE), &events), "mdb_dbi_open events")
                try Self.check(mdb_dbi_open(txn, "cursors", UInt32(MDB_CREATE), &cursors), "mdb_dbi_open cursors")
                if sameJob {
                    try Self.check(mdb_dbi_open(txn, "messages", UInt32(MDB_CREATE), &messages), "mdb_dbi_open messages")
                    try Self.check(mdb_dbi_open(txn, "widget", UInt32(MDB_CREATE), &widget), "mdb_dbi_open widget")
                    try Self.check(mdb_dbi_open(txn, "state", UInt32(MDB_CREATE), &state), "mdb_dbi_open state")
                }
            }
        } catch {
            mdb_env_close(env)
            throw error
        }
    }

    deinit { mdb_env_close(env) }

    private static func check(_ rc: Int32, _ what: String) throws {
        guard rc == 0 else { throw BenchFailure("\(what): \(String(cString: mdb_strerror(rc)))") }
    }

    private func write<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        var txn: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        guard let txn else { throw BenchFailure("mdb_txn_begin returned no transaction") }
        let result: T
        do { result = try body(txn) } catch { mdb_txn_abort(txn); throw error }
        try Self.check(mdb_txn_commit(txn), "mdb_txn_commit")
        return result
    }

    private func read<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        var txn: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin (read)")
        guard let txn else { throw BenchFailure("mdb_txn_begin returned no transaction") }
        defer { mdb_txn_abort(txn) }
        return try body(txn)
    }

    private func withCursor<T>(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ body: (OpaquePointer) throws -> T) throws -> T {
        var cursor: OpaquePointer?
        try Self.check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open")
        guard let cursor else { throw BenchFailure("mdb_cursor_open returned no cursor") }
        defer { mdb_cursor_close(cursor) }
        return try body(cursor)
    }

    /// Moves the cursor; returns the entry's sequence and a copy of its value, or nil at the end.
    private func move(_ cursor: OpaquePointer, _ op: MDB_cursor_op, seek: UInt64? = nil) throws -> (UInt64, [UInt8])? {
        var keyBytes = (seek ?? 0).bigEndian
        return try withUnsafeMutableBytes(of: &keyBytes) { raw in
            var key = MDB_val(mv_size: 8, mv_data: raw.baseAddress)
            var value = MDB_val()
            let rc = mdb_cursor_get(cursor, &key, &value, op)
            if rc == MDB_NOTFOUND { return nil }
            try Self.check(rc, "mdb_cursor_get")
            guard key.mv_size == 8, let k = key.mv_data else { throw BenchFailure("malformed key") }
            let seq = UInt64(bigEndian: k.loadUnaligned(as: UInt64.self))
            let bytes = value.mv_data.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: value.mv_size)) } ?? []
            return (seq, bytes)
        }
    }

    private func put(_ txn: OpaquePointer, _ dbi: MDB_dbi, key: [UInt8], value: [UInt8], flags: Int32 = 0) throws {
        var key = key, value = value
        try key.withUnsafeMutableBytes { k in
            try value.withUnsafeMutableBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                try Self.check(mdb_put(txn, dbi, &kv, &vv, UInt32(flags)), "mdb_put")
            }
        }
    }

    private func sequenceKey(_ seq: UInt64) -> [UInt8] { withUnsafeBytes(of: seq.bigEndian) { Array($0) } }

    func appendBatch(_ deltas: ArraySlice<SyncDelta>) throws {
        try write { txn in
            var seq = try withCursor(txn, events) { try move($0, MDB_LAST)?.0 } ?? 0
            var counters: (unread: Int64, version: UInt64) = sameJob ? try get(txn, state, key: [0]).map(Self.decodeState) ?? (0, 0) : (0, 0)
            for delta in deltas {
                seq += 1
                try put(txn, events, key: sequenceKey(seq), value: delta.payload, flags: MDB_APPEND)
                guard sameJob else { continue }
                // The ledger's projection of an inbox sync: the message row, its widget-order
                // row (the old one removed when the date moved), unread count and version.
                let m = delta.message
                let id = Array(m.id.utf8)
                if let old = try get(txn, messages, key: id) {
                    let oldSentAt = old.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                    if old[8] == 0 { counters.unread -= 1 }
                    try delete(txn, widget, key: Self.widgetKey(Int64(bitPattern: oldSentAt), id))
                }
                let record = Self.record(m)
                try put(txn, messages, key: id, value: record)
                try put(txn, widget, key: Self.widgetKey(m.sentAt, id), value: record)
                if !m.read { counters.unread += 1 }
                counters.version = seq
            }
            if sameJob { try put(txn, state, key: [0], value: sequenceKey(UInt64(bitPattern: counters.unread)) + sequenceKey(counters.version)) }
        }
    }

    private static func decodeState(_ bytes: [UInt8]) -> (unread: Int64, version: UInt64) {
        let unread = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let version = bytes.dropFirst(8).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return (Int64(bitPattern: unread), version)
    }

    /// Newest first: the inverted date, then the id.
    private static func widgetKey(_ sentAt: Int64, _ id: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: (UInt64.max - UInt64(bitPattern: sentAt)).bigEndian) { Array($0) } + id
    }

    /// date (8 B BE), read (1 B), then title, subheading, icon URL and id, each with a 2-byte length.
    private static func record(_ m: Message) -> [UInt8] {
        var out = withUnsafeBytes(of: UInt64(bitPattern: m.sentAt).bigEndian) { Array($0) }
        out.append(m.read ? 1 : 0)
        for field in [m.title, m.subheading, m.iconURL, m.id] {
            let bytes = Array(field.utf8)
            out += [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        }
        return out
    }

    private func get(_ txn: OpaquePointer, _ dbi: MDB_dbi, key: [UInt8]) throws -> [UInt8]? {
        var key = key
        return try key.withUnsafeMutableBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var value = MDB_val()
            let rc = mdb_get(txn, dbi, &kv, &value)
            if rc == MDB_NOTFOUND { return nil }
            try Self.check(rc, "mdb_get")
            return value.mv_data.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: value.mv_size)) } ?? []
        }
    }

    private func delete(_ txn: OpaquePointer, _ dbi: MDB_dbi, key: [UInt8]) throws {
        var key = key
        try key.withUnsafeMutableBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            let rc = mdb_del(txn, dbi, &kv, nil)
            if rc != MDB_NOTFOUND { try Self.check(rc, "mdb_del") }
        }
    }

    func appendOne(_ delta: SyncDelta) throws { try appendBatch([delta][...]) }

    func readWidget() throws -> Int {
        if sameJob {
            return try read { txn in
                try withCursor(txn, widget) { cursor in
                    var rows = 0
                    var key = MDB_val(), value = MDB_val()
                    var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
                    while rc == 0, rows < 10 {
                        rows += 1
                        rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
                    }
                    return rows
                }
            }
        }
        // No projection to read: the floor of "ten rows", the ten newest records, copied out.
        return try read { txn in
            try withCursor(txn, events) { cursor in
                var rows: [[UInt8]] = []
                var entry = try move(cursor, MDB_LAST)
                while let (_, bytes) = entry, rows.count < 10 {
                    rows.append(bytes)
                    entry = try move(cursor, MDB_PREV)
                }
                return rows.count
            }
        }
    }

    func catchUp(consumer name: String, pageSize: Int) throws -> Int {
        let cursorKey = Array(name.utf8)
        var position: UInt64 = try read { txn in
            var key = cursorKey
            return try key.withUnsafeMutableBytes { k in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var value = MDB_val()
                let rc = mdb_get(txn, cursors, &kv, &value)
                if rc == MDB_NOTFOUND { return 0 }
                try Self.check(rc, "mdb_get cursor")
                guard value.mv_size == 8, let v = value.mv_data else { throw BenchFailure("malformed cursor") }
                return UInt64(bigEndian: v.loadUnaligned(as: UInt64.self))
            }
        }
        var total = 0
        while true {
            let page: [(UInt64, [UInt8])] = try read { txn in
                try withCursor(txn, events) { cursor in
                    var page: [(UInt64, [UInt8])] = []
                    page.reserveCapacity(pageSize)
                    var entry = try move(cursor, MDB_SET_RANGE, seek: position + 1)
                    while let e = entry, page.count < pageSize {
                        page.append(e)
                        entry = try move(cursor, MDB_NEXT)
                    }
                    return page
                }
            }
            guard let last = page.last else { return total }
            total += page.count
            position = last.0
            try write { txn in try put(txn, cursors, key: cursorKey, value: sequenceKey(position)) }
        }
    }

    func trim(keepingLast keep: Int, chunk: Int) throws -> Int {
        var trimmed = 0
        while true {
            let deleted: Int = try write { txn in
                try withCursor(txn, events) { cursor in
                    guard let head = try move(cursor, MDB_LAST)?.0, head > UInt64(keep) else { return 0 }
                    var deleted = 0
                    var entry = try move(cursor, MDB_FIRST)
                    while let (seq, _) = entry, seq <= head - UInt64(keep), deleted < chunk {
                        try Self.check(mdb_cursor_del(cursor, 0), "mdb_cursor_del")
                        deleted += 1
                        entry = try move(cursor, MDB_FIRST)
                    }
                    return deleted
                }
            }
            if deleted == 0 { return trimmed }
            trimmed += deleted
            usleep(200)  // the same pause between chunks as the ledger's compactor
        }
    }

    func handleForAnotherThread() throws -> Store { self }
}

public func lmdbVersion() -> String { String(cString: mdb_version(nil, nil, nil)) }
