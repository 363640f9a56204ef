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
    static let maxRowKeyBytes = 256
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

    static func checkRowKey(_ key: String, projection: String) throws(LedgerError) {
        let count = key.utf8.count
        guard (1...maxRowKeyBytes).contains(count) else {
            throw .invalidArgument(name: "row key of projection '\(projection)'", reason: "must be 1–\(maxRowKeyBytes) bytes of UTF-8, got \(count)")
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
        do { return try JSONDecoder().decode(AppProjectionMeta.self, from: Data(bytes)) } catch {
            throw .corruptStore(path: path, reason: "an app projection's record is not readable: \(error)")
        }
    }

    func encoded() throws(LedgerError) -> [UInt8] { try AppProjectionJSON.encode(self, projection: name) }
}

/// A stored row: `0x01 ‖ u16 BE order length ‖ order bytes ‖ JSON`.
struct AppProjectionRow {
    var order: [UInt8]
    var json: ArraySlice<UInt8>

    static func encode(order: [UInt8], json: [UInt8]) -> [UInt8] {
        [0x01, UInt8(order.count >> 8), UInt8(order.count & 0xFF)] + order + json
    }

    static func decode(_ bytes: [UInt8]) -> AppProjectionRow? {
        guard bytes.count >= 3, bytes[0] == 0x01 else { return nil }
        let length = Int(bytes[1]) << 8 | Int(bytes[2])
        guard bytes.count >= 3 + length else { return nil }
        return AppProjectionRow(order: Array(bytes[3..<(3 + length)]), json: bytes[(3 + length)...])
    }
}

/// JSON with sorted keys (the stored form: equal states give equal bytes).
enum AppProjectionJSON {
    static func encode(_ value: some Encodable, projection: String, sequence: UInt64? = nil, type: String? = nil) throws(LedgerError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do { return Array(try encoder.encode(value)) } catch {
            throw .projectionRejected(name: projection, sequence: sequence, type: type, reason: "its state cannot be encoded as JSON: \(error)")
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ bytes: some Collection<UInt8>, projection: String, what: String) throws(LedgerError) -> T {
        do { return try JSONDecoder().decode(T.self, from: Data(bytes)) } catch {
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

    func document<P: LedgerProjection>(_: P.Type) throws(LedgerError) -> P.Document? {
        guard let bytes = try get(AppProjectionKeys.document(name)) else { return nil }
        return try AppProjectionJSON.decode(P.Document.self, bytes, projection: name, what: "the document")
    }

    /// Whether the document is stored (not decoded).
    func hasDocument() throws(LedgerError) -> Bool { try get(AppProjectionKeys.document(name)) != nil }

    func row<P: LedgerProjection>(_: P.Type, _ key: String) throws(LedgerError) -> P.Row? {
        guard let bytes = try get(AppProjectionKeys.row(name, key)) else { return nil }
        guard let row = AppProjectionRow.decode(bytes) else {
            throw .corruptStore(path: path, reason: "app projection '\(name)': row '\(key)' is malformed")
        }
        return try AppProjectionJSON.decode(P.Row.self, row.json, projection: name, what: "row '\(key)'")
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

/// A registered projection without its generic types: what the engine needs.
struct AnyAppProjection: Sendable {
    let name: String
    let version: Int
    let eventTypes: Set<String>
    /// Applies `events` (those of ``eventTypes``) to the state `reader` reads, in memory;
    /// throws ``LedgerError/projectionRejected(name:sequence:type:reason:)`` and changes nothing
    /// when an apply throws or the state cannot be encoded.
    let stage: @Sendable (_ events: [Event], _ reader: AppProjectionReader) throws(LedgerError) -> AppProjectionChanges
    /// The type it was made from (two registrations of one name must be one type).
    let typeName: String
    /// The same as an identity (what every read compares: `String(reflecting:)` costs ~0.7 µs).
    let typeID: ObjectIdentifier
    /// The record this handle last decoded or wrote, with its bytes (reads and appends that
    /// find it unchanged skip its decoding).
    let metaCache = AppProjectionMetaCache()

    init<P: LedgerProjection>(_ projection: P.Type) {
        name = P.name
        version = P.version
        eventTypes = P.eventTypes
        typeName = String(reflecting: P.self)
        typeID = ObjectIdentifier(P.self)
        stage = { (events: [Event], reader: AppProjectionReader) throws(LedgerError) -> AppProjectionChanges in
            var update = try ProjectionUpdate<P>(stored: reader)
            let before = update.document
            var last: Event?
            for event in events where P.eventTypes.contains(event.baseType) {
                last = event
                do { try P.apply(event, to: &update) } catch {
                    throw .projectionRejected(name: P.name, sequence: event.sequence, type: event.type, reason: "\(error)")
                }
            }
            var changes = AppProjectionChanges()
            // The keys sorted as a [String], not the (key, row) pairs: a sort over a type that
            // depends on P runs unspecialized (value-witness copies per comparison), ~44,000
            // instructions an event in a batch of 1,000 (ledger-bench W9-B).
            var keys = Array(update.changed.keys)
            keys.sort()
            for key in keys {
                guard let row = update.changed[key] ?? nil else { changes.rows.append((key, nil)); continue }
                let order = P.order(of: row, key: key)?.bytes ?? []
                guard order.count <= AppProjectionKeys.maxOrderBytes else {
                    throw .projectionRejected(name: P.name, sequence: last?.sequence, type: last?.type,
                                              reason: "the order of row '\(key)' encodes to \(order.count) bytes, more than \(AppProjectionKeys.maxOrderBytes)")
                }
                let json = try AppProjectionJSON.encode(row, projection: P.name, sequence: last?.sequence, type: last?.type)
                changes.rows.append((key, AppProjectionRow.encode(order: order, json: json)))
            }
            // Whether a document is stored at all: its bytes, not a second decoding (~59,000
            // instructions a durable single append, ledger-bench W9-1).
            if last != nil, update.document != before ? true : try !reader.hasDocument() {
                changes.document = try AppProjectionJSON.encode(update.document, projection: P.name, sequence: last?.sequence, type: last?.type)
            }
            return changes
        }
    }
}

/// The last record a handle decoded or wrote, with its bytes: a read or an append that finds
/// the same bytes skips their JSON decoding.
final class AppProjectionMetaCache: Sendable {
    private let last = Mutex<(bytes: [UInt8], meta: AppProjectionMeta)?>(nil)

    func meta(_ bytes: [UInt8], path: String) throws(LedgerError) -> AppProjectionMeta {
        if let hit = last.withLock({ cached in cached.flatMap { $0.bytes == bytes ? $0.meta : nil } }) { return hit }
        let meta = try AppProjectionMeta.decode(bytes, path: path)
        remember(bytes, meta)
        return meta
    }

    /// Records that `bytes` decode to `meta` (a record just encoded and written).
    func remember(_ bytes: [UInt8], _ meta: AppProjectionMeta) {
        last.withLock { $0 = (bytes, meta) }
    }
}
