// What Core Data and GRDB users get underneath: SQLite in WAL mode through its C API, prepared
// statements, one transaction per append doing the ledger's job — the event row plus the
// projections (messages with a widget-order index, unread count and badge, pending actions).
import CSQLite
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// One connection. @unchecked Sendable: a connection is used by one thread at a time
/// (`handleForAnotherThread` opens another connection for another thread).
final class SQLiteStore: Store, @unchecked Sendable {
    private let db: OpaquePointer
    private let directory: String
    private let synchronous: String
    private var statements: [String: OpaquePointer] = [:]

    /// SQLITE_TRANSIENT: SQLite copies bound text and blobs.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    static let schema = """
        CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, type TEXT NOT NULL, payload BLOB NOT NULL);
        CREATE TABLE IF NOT EXISTS messages(id TEXT PRIMARY KEY, title TEXT NOT NULL, subheading TEXT,
            icon_url TEXT, sent_at INTEGER NOT NULL, read INTEGER NOT NULL, changed_seq INTEGER NOT NULL);
        CREATE INDEX IF NOT EXISTS messages_widget_order ON messages(sent_at DESC, id);
        CREATE TABLE IF NOT EXISTS state(k INTEGER PRIMARY KEY, unread INTEGER NOT NULL, badge INTEGER NOT NULL,
            version INTEGER NOT NULL);
        INSERT OR IGNORE INTO state VALUES(0, 0, 0, 0);
        CREATE TABLE IF NOT EXISTS pending_actions(action_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, kind TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS cursors(name TEXT PRIMARY KEY, seq INTEGER NOT NULL);
        """

    init(directory: String, synchronous: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.directory = directory
        self.synchronous = synchronous
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(directory + "/inbox.sqlite", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            sqlite3_close(db)
            throw BenchFailure("sqlite3_open_v2: \(String(cString: sqlite3_errstr(rc)))")
        }
        self.db = db
        sqlite3_busy_timeout(db, 30_000)
        do {
            try exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=\(synchronous);")
            try exec("BEGIN IMMEDIATE; \(Self.schema) COMMIT;")
        } catch {
            sqlite3_close(db)
            throw error
        }
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    private func failure(_ what: String) -> BenchFailure {
        BenchFailure("\(what): \(String(cString: sqlite3_errmsg(db)))")
    }

    private func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw failure("sqlite3_exec") }
    }

    /// A cached prepared statement, reset and with its bindings cleared.
    private func statement(_ sql: String) throws -> OpaquePointer {
        if let cached = statements[sql] {
            sqlite3_reset(cached)
            sqlite3_clear_bindings(cached)
            return cached
        }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK, let statement else {
            throw failure("prepare \(sql)")
        }
        statements[sql] = statement
        return statement
    }

    private func bind(_ s: OpaquePointer, _ i: Int32, _ text: String) {
        sqlite3_bind_text(s, i, text, -1, Self.transient)
    }

    private func step(_ s: OpaquePointer) throws -> Bool {
        switch sqlite3_step(s) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw failure("step")
        }
    }

    private func transaction<T>(_ begin: String, _ body: () throws -> T) throws -> T {
        try step(statement(begin)).ignore()
        do {
            let result = try body()
            // A statement left on a row keeps its read snapshot; the next BEGIN IMMEDIATE would
            // then fail with SQLITE_BUSY_SNAPSHOT. Reset every statement before committing.
            for statement in statements.values { sqlite3_reset(statement) }
            try step(statement("COMMIT")).ignore()
            return result
        } catch {
            for statement in statements.values { sqlite3_reset(statement) }
            try? exec("ROLLBACK")
            throw error
        }
    }

    /// The ledger's job for one delta: the event row, the message row (widget order is its
    /// index), unread count, badge and version kept in step.
    private func apply(_ delta: SyncDelta) throws {
        let m = delta.message
        let insertEvent = try statement("INSERT INTO events(type, payload) VALUES('inbox.synced', ?)")
        _ = delta.payload.withUnsafeBytes { sqlite3_bind_blob(insertEvent, 1, $0.baseAddress, Int32($0.count), Self.transient) }
        try step(insertEvent).ignore()
        let seq = sqlite3_last_insert_rowid(db)

        let previous = try statement("SELECT read FROM messages WHERE id = ?")
        bind(previous, 1, m.id)
        let wasUnread: Bool? = try step(previous) ? sqlite3_column_int(previous, 0) == 0 : nil

        let upsert = try statement("""
            INSERT INTO messages(id, title, subheading, icon_url, sent_at, read, changed_seq) VALUES(?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET title = excluded.title, subheading = excluded.subheading,
            icon_url = excluded.icon_url, sent_at = excluded.sent_at, read = excluded.read, changed_seq = excluded.changed_seq
            """)
        bind(upsert, 1, m.id)
        bind(upsert, 2, m.title)
        bind(upsert, 3, m.subheading)
        bind(upsert, 4, m.iconURL)
        sqlite3_bind_int64(upsert, 5, m.sentAt)
        sqlite3_bind_int(upsert, 6, m.read ? 1 : 0)
        sqlite3_bind_int64(upsert, 7, seq)
        try step(upsert).ignore()

        let unreadChange = (m.read ? 0 : 1) - ((wasUnread ?? false) ? 1 : 0)
        let state = try statement("UPDATE state SET unread = unread + ?1, badge = badge + ?1, version = ?2 WHERE k = 0")
        sqlite3_bind_int(state, 1, Int32(unreadChange))
        sqlite3_bind_int64(state, 2, seq)
        try step(state).ignore()
    }

    func appendBatch(_ deltas: ArraySlice<SyncDelta>) throws {
        try transaction("BEGIN IMMEDIATE") { for delta in deltas { try apply(delta) } }
    }

    func appendOne(_ delta: SyncDelta) throws {
        try transaction("BEGIN IMMEDIATE") { try apply(delta) }
    }

    func readWidget() throws -> Int {
        try transaction("BEGIN") {
            let rows = try statement("SELECT id, title, subheading, icon_url, sent_at, read FROM messages ORDER BY sent_at DESC, id DESC LIMIT 10")
            var items: [Message] = []
            while try step(rows) {
                items.append(Message(
                    id: String(cString: sqlite3_column_text(rows, 0)),
                    title: String(cString: sqlite3_column_text(rows, 1)),
                    subheading: sqlite3_column_text(rows, 2).map { String(cString: $0) } ?? "",
                    iconURL: sqlite3_column_text(rows, 3).map { String(cString: $0) } ?? "",
                    sentAt: sqlite3_column_int64(rows, 4),
                    read: sqlite3_column_int(rows, 5) != 0))
            }
            let state = try statement("SELECT unread, badge FROM state WHERE k = 0")
            guard try step(state) else { throw BenchFailure("no state row") }
            guard sqlite3_column_int(state, 1) >= 0 else { throw BenchFailure("negative badge") }
            return items.count
        }
    }

    func catchUp(consumer name: String, pageSize: Int) throws -> Int {
        let cursor = try statement("SELECT seq FROM cursors WHERE name = ?")
        bind(cursor, 1, name)
        var position = try step(cursor) ? sqlite3_column_int64(cursor, 0) : 0
        sqlite3_reset(cursor)
        var total = 0
        while true {
            let page: [(Int64, String, [UInt8])] = try transaction("BEGIN") {
                let select = try statement("SELECT seq, type, payload FROM events WHERE seq > ? ORDER BY seq LIMIT ?")
                sqlite3_bind_int64(select, 1, position)
                sqlite3_bind_int(select, 2, Int32(pageSize))
                var page: [(Int64, String, [UInt8])] = []
                page.reserveCapacity(pageSize)
                while try step(select) {
                    let count = Int(sqlite3_column_bytes(select, 2))
                    let payload = sqlite3_column_blob(select, 2).map { [UInt8](UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
                    page.append((sqlite3_column_int64(select, 0), String(cString: sqlite3_column_text(select, 1)), payload))
                }
                return page
            }
            guard let last = page.last else { return total }
            total += page.count
            position = last.0
            try transaction("BEGIN IMMEDIATE") {
                let save = try statement("INSERT INTO cursors(name, seq) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET seq = excluded.seq")
                bind(save, 1, name)
                sqlite3_bind_int64(save, 2, position)
                try step(save).ignore()
            }
        }
    }

    func trim(keepingLast keep: Int, chunk: Int) throws -> Int {
        var trimmed = 0
        while true {
            let deleted: Int = try transaction("BEGIN IMMEDIATE") {
                let delete = try statement("""
                    DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE seq <= (SELECT max(seq) FROM events) - ?
                    ORDER BY seq LIMIT ?)
                    """)
                sqlite3_bind_int64(delete, 1, Int64(keep))
                sqlite3_bind_int(delete, 2, Int32(chunk))
                try step(delete).ignore()
                return Int(sqlite3_changes(db))
            }
            if deleted == 0 { return trimmed }
            trimmed += deleted
            usleep(200)  // the same pause between chunks as the ledger's compactor
        }
    }

    func handleForAnotherThread() throws -> Store { try SQLiteStore(directory: directory, synchronous: synchronous) }
}

extension Bool {
    /// Discards a `step` result where a statement returns no rows.
    func ignore() {}
}

public func sqliteVersion() -> String { String(cString: sqlite3_libversion()) }
