// The physical limit: LMDB through its C API, the payload stored under the next sequence
// number (8-byte big-endian key, MDB_APPEND). No envelope, no checksum, no projections, no
// idempotency, no group commit. Same durability as the ledger's default (two syncs a commit).
import CLMDB
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

    init(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var env: OpaquePointer?
        try Self.check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw BenchFailure("mdb_env_create returned no environment") }
        self.env = env
        try Self.check(mdb_env_set_maxdbs(env, 4), "mdb_env_set_maxdbs")
        try Self.check(mdb_env_set_mapsize(env, 16 << 30), "mdb_env_set_mapsize")
        do {
            try Self.check(mdb_env_open(env, directory, UInt32(MDB_NOTLS), 0o644), "mdb_env_open \(directory)")
            try write { txn in
                try Self.check(mdb_dbi_open(txn, "events", UInt32(MDB_CREATE), &events), "mdb_dbi_open events")
                try Self.check(mdb_dbi_open(txn, "cursors", UInt32(MDB_CREATE), &cursors), "mdb_dbi_open cursors")
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
            for delta in deltas {
                seq += 1
                try put(txn, events, key: sequenceKey(seq), value: delta.payload, flags: MDB_APPEND)
            }
        }
    }

    func appendOne(_ delta: SyncDelta) throws { try appendBatch([delta][...]) }

    func readWidget() throws -> Int {
        // No projection to read: the floor of "ten rows", the ten newest records, copied out.
        try read { txn in
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
