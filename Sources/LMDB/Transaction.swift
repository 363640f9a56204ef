import CLMDB

/// A read or write transaction, valid only inside the closure given to
/// ``Environment/read(_:)`` or ``Environment/write(_:)``.
///
/// Every value it returns is a copy: no pointer into the map outlives the transaction.
/// Using a transaction after its closure returned throws ``LMDBError/badTransaction``.
///
/// ```swift
/// let value = try environment.read { txn in try txn.get(db, key: Array("greeting".utf8)) }
/// ```
public final class Transaction {
    let pointer: OpaquePointer
    /// Whether this transaction can only read.
    public let isReadOnly: Bool
    var isLive = true
    /// Set when an operation failed with `MDB_MAP_FULL`, even if the caller's closure
    /// caught the error: the transaction is dead and the write must be retried after growth.
    var sawMapFull = false
    /// Set when a change succeeded: the commit writes pages (and syncs as its mode says). A
    /// write transaction without it commits nothing and syncs nothing (docs/lmdb.md rule 30).
    var changed = false

    init(pointer: OpaquePointer, isReadOnly: Bool) {
        self.pointer = pointer
        self.isReadOnly = isReadOnly
    }

    /// The transaction's ID (`mdb_txn_id`).
    public var id: Int { isLive ? Int(mdb_txn_id(pointer)) : 0 }

    @inline(__always)
    func ensureLive() throws(LMDBError) {
        if !isLive { throw .badTransaction }
    }

    @inline(__always)
    func ensureWritable() throws(LMDBError) {
        if !isLive { throw .badTransaction }
        if isReadOnly { throw LMDBError.permissionDenied }
    }

    /// The outcome of a change (put, delete, drop): a failure is thrown, a success marks the
    /// transaction ``changed``.
    func note(_ code: Int32) throws(LMDBError) {
        if code == MDB_MAP_FULL { sawMapFull = true }
        try check(code)
        changed = true
    }

    // Every operation has a `[UInt8]` form that does the work and a generic form that copies
    // its collection into an array and calls it: callers with arrays (all of the ledger's) get
    // the concrete, specialised call instead of a generic one through witness tables.

    /// The value stored under `key`, copied out, or `nil`.
    public func get(_ database: Database, key: [UInt8]) throws(LMDBError) -> [UInt8]? {
        try ensureLive()
        return try withValue(database, key: key) { $0.map { Array($0) } }
    }

    /// The value stored under `key`, copied out, or `nil`.
    public func get(_ database: Database, key: some Collection<UInt8>) throws(LMDBError) -> [UInt8]? {
        try get(database, key: Array(key))
    }

    /// Runs `body` with a view of the stored value (or `nil`), valid only during `body`.
    /// Use it to decode without an intermediate copy.
    func withValue<T>(
        _ database: Database, key keyBytes: [UInt8],
        _ body: (UnsafeRawBufferPointer?) throws(LMDBError) -> T
    ) throws(LMDBError) -> T {
        try ensureLive()
        var data = MDB_val()
        let code = keyBytes.withUnsafeBytes { k -> Int32 in
            var keyValue = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            return mdb_get(pointer, database.handle, &keyValue, &data)
        }
        if code == MDB_NOTFOUND { return try body(nil) }
        try check(code)
        return try body(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size))
    }

    /// Stores `value` under `key`.
    public func put(_ database: Database, key keyBytes: [UInt8], value valueBytes: [UInt8], flags: WriteFlags = []) throws(LMDBError) {
        try ensureWritable()
        let code = keyBytes.withUnsafeBytes { k in
            valueBytes.withUnsafeBytes { v in
                var keyValue = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var dataValue = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                return mdb_put(pointer, database.handle, &keyValue, &dataValue, UInt32(flags.rawValue))
            }
        }
        try note(code)
    }

    /// Stores `value` under `key`.
    public func put(
        _ database: Database, key: some Collection<UInt8>, value: some Collection<UInt8>,
        flags: WriteFlags = []
    ) throws(LMDBError) {
        try put(database, key: Array(key), value: Array(value), flags: flags)
    }

    /// Deletes `key`. Returns whether it existed.
    @discardableResult
    public func delete(_ database: Database, key: some Collection<UInt8>) throws(LMDBError) -> Bool {
        try delete(database, key: Array(key))
    }

    /// Deletes `key`. Returns whether it existed.
    @discardableResult
    public func delete(_ database: Database, key keyBytes: [UInt8]) throws(LMDBError) -> Bool {
        try ensureWritable()
        let code = keyBytes.withUnsafeBytes { k in
            var keyValue = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            return mdb_del(pointer, database.handle, &keyValue, nil)
        }
        if code == MDB_NOTFOUND { return false }
        try note(code)
        return true
    }

    /// Removes every entry of `database` (the database itself stays).
    public func removeAll(_ database: Database) throws(LMDBError) {
        try ensureWritable()
        try note(mdb_drop(pointer, database.handle, 0))
    }

    /// Statistics of `database` as seen by this transaction.
    public func statistics(_ database: Database) throws(LMDBError) -> DatabaseStatistics {
        try ensureLive()
        var stat = MDB_stat()
        try check(mdb_stat(pointer, database.handle, &stat))
        return DatabaseStatistics(stat)
    }

    /// Runs `body` with a cursor over `database`; the cursor is closed when `body` returns.
    public func withCursor<T>(_ database: Database, _ body: (Cursor) throws -> T) throws -> T {
        try ensureLive()
        var cursorPointer: OpaquePointer?
        try check(mdb_cursor_open(pointer, database.handle, &cursorPointer))
        guard let cursorPointer else { throw LMDBError.badTransaction }
        let cursor = Cursor(pointer: cursorPointer, transaction: self)
        defer {
            cursor.isLive = false
            mdb_cursor_close(cursorPointer)
        }
        return try body(cursor)
    }
}

/// A key and value copied out of the map.
public struct Entry: Hashable, Sendable {
    /// The key, copied out of the map.
    public var key: [UInt8]
    /// The value, copied out of the map.
    public var value: [UInt8]

    /// An entry of `key` and `value`.
    public init(key: [UInt8], value: [UInt8]) {
        self.key = key
        self.value = value
    }
}

/// A position in a database, valid inside ``Transaction/withCursor(_:_:)``.
///
/// ```swift
/// try txn.withCursor(events) { cursor in
///     var entry = try cursor.seek(atLeast: start)
///     while let e = entry { print(e.key); entry = try cursor.next() }
/// }
/// ```
public final class Cursor {
    let pointer: OpaquePointer
    unowned let transaction: Transaction
    var isLive = true

    init(pointer: OpaquePointer, transaction: Transaction) {
        self.pointer = pointer
        self.transaction = transaction
    }

    private func move(_ op: MDB_cursor_op, key: [UInt8]? = nil) throws(LMDBError) -> Entry? {
        guard isLive, transaction.isLive else { throw .badTransaction }
        var keyValue = MDB_val()
        var dataValue = MDB_val()
        let code: Int32
        if let key {
            code = key.withUnsafeBytes { k in
                keyValue = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                return mdb_cursor_get(pointer, &keyValue, &dataValue, op)
            }
        } else {
            code = mdb_cursor_get(pointer, &keyValue, &dataValue, op)
        }
        if code == MDB_NOTFOUND { return nil }
        try check(code)
        return Entry(
            key: Array(UnsafeRawBufferPointer(start: keyValue.mv_data, count: keyValue.mv_size)),
            value: Array(UnsafeRawBufferPointer(start: dataValue.mv_data, count: dataValue.mv_size)))
    }

    /// Visits the entries from the first key ≥ `start` on, in order, while `body` returns true,
    /// handing it views of LMDB's own memory: nothing is copied. The views are non-escapable
    /// spans, valid only during the call: code that stores one outside it does not compile
    /// ("lifetime-dependent value escapes its scope"). For reads that decode records in place.
    public func scan(from start: [UInt8], _ body: (_ key: RawSpan, _ value: RawSpan) throws -> Bool) throws {
        guard isLive, transaction.isLive else { throw LMDBError.badTransaction }
        var keyValue = MDB_val()
        var dataValue = MDB_val()
        var code = start.withUnsafeBytes { k -> Int32 in
            keyValue = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            return mdb_cursor_get(pointer, &keyValue, &dataValue, MDB_SET_RANGE)
        }
        while code == 0 {
            let keyBytes = UnsafeRawBufferPointer(start: keyValue.mv_data, count: keyValue.mv_size)
            let valueBytes = UnsafeRawBufferPointer(start: dataValue.mv_data, count: dataValue.mv_size)
            guard try body(RawSpan(_unsafeBytes: keyBytes), RawSpan(_unsafeBytes: valueBytes)) else { return }
            code = mdb_cursor_get(pointer, &keyValue, &dataValue, MDB_NEXT)
        }
        if code != MDB_NOTFOUND { try check(code) }
    }

    /// The first entry, or `nil` if the database is empty.
    public func first() throws(LMDBError) -> Entry? { try move(MDB_FIRST) }
    /// The last entry, or `nil` if the database is empty.
    public func last() throws(LMDBError) -> Entry? { try move(MDB_LAST) }
    /// The entry after the current one.
    public func next() throws(LMDBError) -> Entry? { try move(MDB_NEXT) }
    /// The entry before the current one.
    public func previous() throws(LMDBError) -> Entry? { try move(MDB_PREV) }
    /// The first entry whose key is greater than or equal to `key`.
    public func seek(atLeast key: [UInt8]) throws(LMDBError) -> Entry? { try move(MDB_SET_RANGE, key: key) }
    /// The entry whose key equals `key`.
    public func seek(exactly key: [UInt8]) throws(LMDBError) -> Entry? { try move(MDB_SET_KEY, key: key) }

    /// Deletes the entry at the cursor's position.
    public func deleteCurrent() throws(LMDBError) {
        guard isLive else { throw .badTransaction }
        try transaction.ensureWritable()
        try transaction.note(mdb_cursor_del(pointer, 0))
    }
}
