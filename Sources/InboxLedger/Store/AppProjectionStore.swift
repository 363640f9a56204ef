import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#elseif canImport(Foundation)
import Foundation
#endif
import Synchronization

/// The keys of the `app-projections` table (docs/format.md, "App projections"):
///
/// | key | value |
/// |---|---|
/// | `0x00 ‖ name` | ``AppProjectionMeta`` (JSON) |
/// | `name ‖ 0x00 ‖ "D"` | the document (JSON) |
/// | `name ‖ 0x00 ‖ "R" ‖ key` | ``AppProjectionRow``: the row's order bytes and its JSON |
/// | `name ‖ 0x00 ‖ "O" ‖ order ‖ key` | the key (every row; the order is empty when the projection declares none) |
///
/// Names never start with `0x00`, so the meta records of every projection sort first and are
/// listed by one prefix scan.
enum AppProjectionKeys {
    static let maxNameBytes = 64
    static let maxRowKeyBytes = ProjectionRowKey.maxBytes
    static let maxOrderBytes = 160

    static func meta(_ name: String) -> [UInt8] { [0x00] + Array(name.utf8) }
    static let metaPrefix: [UInt8] = [0x00]
    static func prefix(_ name: String) -> [UInt8] { Array(name.utf8) + [0x00] }
    static func document(_ name: String) -> [UInt8] { prefix(name) + [UInt8(ascii: "D")] }
    static func rowPrefix(_ name: String) -> [UInt8] { prefix(name) + [UInt8(ascii: "R")] }
    static func row(_ name: String, _ key: String) -> [UInt8] { rowPrefix(name) + Array(key.utf8) }
    static func orderPrefix(_ name: String) -> [UInt8] { prefix(name) + [UInt8(ascii: "O")] }
    static func order(_ name: String, _ order: [UInt8], _ key: String) -> [UInt8] { orderPrefix(name) + order + Array(key.utf8) }

    /// 1–64 bytes of `a–z 0–9 . - _`.
    static func checkName(_ name: String) throws(LedgerError) {
        let bytes = Array(name.utf8)
        let allowed = bytes.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F }
        guard (1...maxNameBytes).contains(bytes.count), allowed else {
            throw .invalidArgument(name: "projection name", reason: "\(String(reflecting: name)) must be 1–\(maxNameBytes) bytes of lowercase letters, digits, '.', '-' and '_'")
        }
    }
}

/// A projection's record: its version, how far it has applied the log, and its state.
struct AppProjectionMeta: Codable, Hashable, Sendable {
    enum Status: String, Codable, Sendable {
        /// The rows of an earlier version are being deleted (a build starts after).
        case clearing
        /// Built from the log: ``appliedThrough`` is how far.
        case building
        /// Up to date through ``appliedThrough``; kept in every append's transaction by the
        /// processes that register this version.
        case ready
        /// An event it had to apply after the fact (written by a process without this
        /// version) made ``LedgerProjection/apply(_:to:)`` throw: ``failure`` says which. A new
        /// version rebuilds it.
        case failed
    }

    var name: String
    var version: Int
    var status: Status
    /// Every event up to this sequence is applied (events appended later by processes that
    /// do not register this version are applied by the next one that does, and by reads).
    var appliedThrough: UInt64
    /// The build read the log after this sequence (events before it were trimmed already).
    var builtFrom: UInt64
    var rows: Int
    var eventTypes: [String]
    var failure: String?

    static func decode(_ bytes: [UInt8], path: String) throws(LedgerError) -> AppProjectionMeta {
        do { return try LedgerJSONDecoder.decode(AppProjectionMeta.self, from: bytes) } catch {
            throw .corruptStore(path: path, reason: "an app projection's record is not readable: \(error)")
        }
    }

    func encoded() throws(LedgerError) -> [UInt8] { try AppProjectionJSON.encode(self, projection: name) }

    /// The `failure` recorded for an event in the log that `apply` refused (nil: `error` is not a refusal).
    static func failure(_ error: LedgerError) -> String? {
        guard case .projectionRejected(_, let sequence, let type, let reason) = error else { return nil }
        return "event \(sequence.map(String.init) ?? "?") (\(type ?? "?")), appended by a process that does not keep this version, cannot be applied: \(reason)"
    }
}

/// A stored row: `0x01 ‖ u16 BE order length ‖ order bytes ‖ JSON`.
struct AppProjectionRow {
    var order: [UInt8]
    var json: ArraySlice<UInt8>
    /// The whole stored value (what the decoded-value cache compares).
    var stored: [UInt8] = []

    static func encode(order: [UInt8], json: [UInt8]) -> [UInt8] {
        [0x01, UInt8(order.count >> 8), UInt8(order.count & 0xFF)] + order + json
    }

    static func decode(_ bytes: [UInt8]) -> AppProjectionRow? {
        guard bytes.count >= 3, bytes[0] == 0x01 else { return nil }
        let length = Int(bytes[1]) << 8 | Int(bytes[2])
        guard bytes.count >= 3 + length else { return nil }
        return AppProjectionRow(order: Array(bytes[3..<(3 + length)]), json: bytes[(3 + length)...], stored: bytes)
    }
}

/// The stored form of records, rows and documents: canonical JSON (``LedgerJSONEncoder``; equal
/// states give equal bytes), with numbers the canonical form cannot keep (a `UInt64` beyond
/// `Int64.max`) written as `JSONEncoder` writes them. Earlier versions stored `JSONEncoder`'s
/// output with sorted keys: it reads the same, and verifies as equal (canonically).
enum AppProjectionJSON {
    static func encode(_ value: some Encodable, projection: String, sequence: UInt64? = nil, type: String? = nil) throws(LedgerError) -> [UInt8] {
        do { return try LedgerJSONEncoder.encode(value, numbers: .asWritten) } catch {
            throw .projectionRejected(name: projection, sequence: sequence, type: type, reason: "its state cannot be encoded as JSON: \(error)")
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ bytes: ArraySlice<UInt8>, projection: String, what: String) throws(LedgerError) -> T {
        do { return try LedgerJSONDecoder.decode(T.self, from: bytes) } catch {
            throw .projectionUnavailable(name: projection, reason: "\(what) does not decode as \(T.self) (was it written by another version?): \(error)")
        }
    }
}

/// Reads one projection's stored state from a ``ProjectionStore`` (a transaction's tables, or
/// an overlay of changes not written yet).
struct AppProjectionReader {
    let store: any ProjectionStore
    let name: String
    /// The ledger's directory, for errors.
    let path: String
    /// Decoded values of the handle's earlier reads (reads only; nil while writing).
    var cache: AppProjectionCache? = nil

    /// Whether a document is stored (without decoding it).
    func hasDocument() throws(LedgerError) -> Bool { try get(AppProjectionKeys.document(name)) != nil }

    func document<P: LedgerProjection>(_: P.Type) throws(LedgerError) -> P.Document? {
        guard let bytes = try get(AppProjectionKeys.document(name)) else { return nil }
        if let cached: P.Document = cache?.value(name, "", bytes) { return cached }
        let document = try AppProjectionJSON.decode(P.Document.self, bytes[...], projection: name, what: "the document")
        cache?.store(name, "", bytes, document)
        return document
    }


    func row<P: LedgerProjection>(_: P.Type, _ key: String) throws(LedgerError) -> P.Row? {
        guard let bytes = try get(AppProjectionKeys.row(name, key)) else { return nil }
        if let cached: P.Row = cache?.value(name, key, bytes) { return cached }
        guard let row = AppProjectionRow.decode(bytes) else {
            throw .corruptStore(path: path, reason: "app projection '\(name)': row '\(key)' is malformed")
        }
        let decoded = try AppProjectionJSON.decode(P.Row.self, row.json, projection: name, what: "row '\(key)'")
        cache?.store(name, key, bytes, decoded)
        return decoded
    }

    /// Visits rows in the projection's order (every row has an index entry: its order bytes,
    /// empty when it declares none, then its key) while `body` returns true.
    func forEachRow(from start: [UInt8] = [], _ body: (_ key: String, _ row: AppProjectionRow) throws -> Bool) throws(LedgerError) {
        do {
            let prefix = AppProjectionKeys.orderPrefix(name)
            try store.scan(.apps, from: prefix + start) { key, value in
                guard key.starts(with: prefix) else { return false }
                let rowKey = String(decoding: value, as: UTF8.self)
                guard let bytes = try store.get(.apps, AppProjectionKeys.row(name, rowKey)), let row = AppProjectionRow.decode(bytes) else {
                    throw LedgerError.corruptStore(path: path, reason: "app projection '\(name)': the order index names row '\(rowKey)', which is missing or malformed")
                }
                return try body(rowKey, row)
            }
        } catch let error as LedgerError {
            throw error
        } catch {
            throw .unexpected(path: path, operation: "read projection '\(name)'", reason: "\(error)")
        }
    }

    private func get(_ key: [UInt8]) throws(LedgerError) -> [UInt8]? {
        do { return try store.get(.apps, key) } catch let error as LedgerError { throw error } catch {
            throw .unexpected(path: path, operation: "read projection '\(name)'", reason: "\(error)")
        }
    }
}

/// What applying events to one projection changes, encoded and ready to write.
struct AppProjectionChanges {
    var rows: [(key: String, value: [UInt8]?)] = []
    var document: [UInt8]?

    var isEmpty: Bool { rows.isEmpty && document == nil }
}

/// What a handle decoded on its earlier reads, by the stored bytes it decoded: a read that
/// finds the same bytes returns the decoded value without decoding again (a widget's warm
/// read). Bounded; cleared when full.
final class AppProjectionCache: Sendable {
    private struct Entry: @unchecked Sendable {
        // @unchecked: `value` holds a projection's Row, Document or record, all Sendable; the
        // existential only hides which.
        var bytes: [UInt8]
        var value: Any
    }
    /// Where an entry is: its projection and row key ("" for the document); the records apart.
    private struct Slot: Hashable {
        var name: String
        var key: String
    }
    private struct State {
        var entries: [Slot: Entry] = [:]
        var metas: [String: (bytes: [UInt8], meta: AppProjectionMeta)] = [:]
    }
    private let state = Mutex(State())
    static let capacity = 1024

    func value<T>(_ name: String, _ key: String, _ bytes: [UInt8]) -> T? {
        state.withLock { state in
            guard let entry = state.entries[Slot(name: name, key: key)], entry.bytes == bytes else { return nil }
            return entry.value as? T
        }
    }

    func store<T: Sendable>(_ name: String, _ key: String, _ bytes: [UInt8], _ value: T) {
        state.withLock { state in
            if state.entries.count >= Self.capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[Slot(name: name, key: key)] = Entry(bytes: bytes, value: value)
        }
    }

    /// The record stored as `bytes`, decoded once.
    func meta(_ name: String, _ bytes: [UInt8], path: String) throws(LedgerError) -> AppProjectionMeta {
        let cached = state.withLock { state in state.metas[name].flatMap { $0.bytes == bytes ? $0.meta : nil } }
        if let cached { return cached }
        let meta = try AppProjectionMeta.decode(bytes, path: path)
        remember(name, bytes, meta)
        return meta
    }

    /// Records that `bytes` decode to `meta` (a record just encoded and written: the next
    /// append or read of the handle finds it without decoding).
    func remember(_ name: String, _ bytes: [UInt8], _ meta: AppProjectionMeta) {
        state.withLock { $0.metas[name] = (bytes, meta) }
    }
}

/// Reading and writing the `app-projections` table through any ``ProjectionStore``.
enum AppProjectionTable {
    static func meta(_ name: String, in store: some ProjectionStore, path: String) throws -> AppProjectionMeta? {
        try store.get(.apps, AppProjectionKeys.meta(name)).map { bytes throws(LedgerError) in try AppProjectionMeta.decode(bytes, path: path) }
    }

    static func putMeta(_ meta: AppProjectionMeta, in store: some ProjectionStore) throws {
        try store.put(.apps, AppProjectionKeys.meta(meta.name), meta.encoded())
    }

    /// Every stored projection's record, by name.
    static func metas(in store: some ProjectionStore, path: String) throws -> [AppProjectionMeta] {
        var found: [AppProjectionMeta] = []
        try store.scan(.apps, from: AppProjectionKeys.metaPrefix) { key, value in
            guard key.first == 0x00 else { return false }
            found.append(try AppProjectionMeta.decode(value, path: path))
            return true
        }
        return found
    }

    /// Writes `changes`: each row and its order-index entry (the old entry removed), the document.
    static func write(_ changes: AppProjectionChanges, name: String, into store: some ProjectionStore, rows: inout Int) throws {
        for (key, value) in changes.rows {
            let rowKey = AppProjectionKeys.row(name, key)
            if let old = try store.get(.apps, rowKey) {
                if let decoded = AppProjectionRow.decode(old) { try store.delete(.apps, AppProjectionKeys.order(name, decoded.order, key)) }
                if value == nil {
                    try store.delete(.apps, rowKey)
                    rows -= 1
                }
            } else if value != nil {
                rows += 1
            }
            guard let value, let row = AppProjectionRow.decode(value) else { continue }
            try store.put(.apps, rowKey, value)
            try store.put(.apps, AppProjectionKeys.order(name, row.order, key), Array(key.utf8))
        }
        if let document = changes.document { try store.put(.apps, AppProjectionKeys.document(name), document) }
    }

    /// Deletes up to `limit` entries of `name`'s state (rows, index, document; not its record);
    /// returns how many.
    static func clear(_ name: String, in store: some ProjectionStore, limit: Int) throws -> Int {
        let prefix = AppProjectionKeys.prefix(name)
        var keys: [[UInt8]] = []
        try store.scan(.apps, from: prefix) { key, _ in
            guard key.starts(with: prefix), keys.count < limit else { return false }
            keys.append(key)
            return true
        }
        for key in keys { try store.delete(.apps, key) }
        return keys.count
    }
}

/// An in-memory layer of changes over a store: a read that finds events not applied yet
/// applies them here, never in the file.
final class OverlayStore: ProjectionStore {
    let base: any ProjectionStore
    /// Changed entries of `.apps` (nil: deleted).
    private var changes: [[UInt8]: [UInt8]?] = [:]

    init(base: any ProjectionStore) { self.base = base }

    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? {
        if table == .apps, let change = changes[key] { return change }
        return try base.get(table, key)
    }

    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        guard table == .apps else { throw LMDBOverlayRefusal() }
        changes[key] = .some(value)
    }

    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws {
        guard table == .apps else { throw LMDBOverlayRefusal() }
        changes[key] = .some(nil)
    }

    /// The base's entries merged with the changes, in key order.
    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        guard table == .apps, !changes.isEmpty else { return try base.scan(table, from: start, body) }
        let pending = changes.keys.filter { !$0.lexicographicallyPrecedes(start) }.sorted { $0.lexicographicallyPrecedes($1) }
        var next = 0
        var stopped = false
        try base.scan(table, from: start) { key, value in
            while next < pending.count, pending[next].lexicographicallyPrecedes(key) {
                if let changed = changes[pending[next]] ?? nil, try !body(pending[next], changed) { stopped = true; return false }
                next += 1
            }
            if next < pending.count, pending[next] == key {
                next += 1
                guard let changed = changes[key] ?? nil else { return true }  // deleted
                if try !body(key, changed) { stopped = true; return false }
                return true
            }
            if try !body(key, value) { stopped = true; return false }
            return true
        }
        guard !stopped else { return }
        while next < pending.count {
            if let changed = changes[pending[next]] ?? nil, try !body(pending[next], changed) { return }
            next += 1
        }
    }
}

/// Only the app projections' table is ever changed in an overlay.
struct LMDBOverlayRefusal: Error {}

extension ProjectionInfo {
    init(_ meta: AppProjectionMeta) {
        self.init(name: meta.name, version: meta.version, status: meta.status.rawValue, appliedThrough: meta.appliedThrough,
                  builtFrom: meta.builtFrom, rows: meta.rows, eventTypes: meta.eventTypes, failure: meta.failure)
    }
}

extension AppProjectionReader: ProjectionRowSource {}
