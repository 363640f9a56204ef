import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#elseif canImport(Foundation)
import Foundation
#endif
import Synchronization

/// The keys of the `app-projections` table (docs/format.md, "App projections"). Each version
/// of a projection has a record and a state of its own (its *space*), so that a new version is
/// built beside the old one, which its processes keep reading and applying meanwhile:
///
/// | key | value |
/// |---|---|
/// | `0x00 ‖ name ‖ 0x01 ‖ version` | ``AppProjectionMeta`` (JSON) of that version |
/// | `name ‖ 0x01 ‖ version ‖ 0x00 ‖ "D"` | the document (JSON) |
/// | `name ‖ 0x01 ‖ version ‖ 0x00 ‖ "R" ‖ key` | ``AppProjectionRow``: the row's order bytes and its JSON |
/// | `name ‖ 0x01 ‖ version ‖ 0x00 ‖ "O" ‖ order ‖ key` | the key (every row; the order is empty when the projection declares none) |
/// | `name ‖ 0x01 ‖ version ‖ 0x00 ‖ "U" ‖ key` | while shared events are pending: the row before them (``AppProjectionRow``, or `0x00`: absent) |
/// | `name ‖ 0x01 ‖ version ‖ 0x00 ‖ "u"` | while shared events are pending: the document before them (JSON) |
///
/// `version` is its decimal digits. A ledger written before versions had spaces of their own
/// may still hold one *legacy* projection per name: its record under `0x00 ‖ name` and its
/// state under `name ‖ 0x00 ‖ …`; it is read and kept exactly like the others (its record says
/// so) until a new version replaces it. Names never hold `0x00` or `0x01`, so the records of
/// every projection sort first (listed by one prefix scan) and no space is a prefix of another.
enum AppProjectionKeys {
    static let maxNameBytes = 64
    static let maxRowKeyBytes = ProjectionRowKey.maxBytes
    static let maxOrderBytes = 160
    /// The largest row, in bytes of its JSON (as an event's payload: docs/format.md).
    static let maxRowBytes = 65_536
    /// The largest document, in bytes of its JSON: it is decoded at every append that applies
    /// an event, so it stays small.
    static let maxDocumentBytes = 65_536

    static let metaPrefix: [UInt8] = [0x00]

    /// The records of every version of `name` (and the legacy one) start with this.
    static func records(_ name: String) -> [UInt8] { [0x00] + Array(name.utf8) }

    /// 1–64 bytes of `a–z 0–9 . - _`.
    static func checkName(_ name: String) throws(LedgerError) {
        let bytes = Array(name.utf8)
        let allowed = bytes.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F }
        guard (1...maxNameBytes).contains(bytes.count), allowed else {
            throw .invalidArgument(name: "projection name", reason: "\(String(reflecting: name)) must be 1–\(maxNameBytes) bytes of lowercase letters, digits, '.', '-' and '_'")
        }
    }
}

/// Where one version of a projection is stored: its record's key and its state's prefix
/// (``AppProjectionKeys``).
struct AppProjectionSpace: Hashable, Sendable, CustomStringConvertible {
    let name: String
    /// Its version; nil for a legacy space (`name ‖ 0x00 ‖ …`, whatever version its record holds).
    let version: Int?
    /// Its record's key.
    let record: [UInt8]
    /// What every key of its state starts with.
    let prefix: [UInt8]
    /// `name` or `name@version`: how findings name it, and what an append's records are kept by.
    let description: String

    init(name: String, version: Int?) {
        self.name = name
        self.version = version
        description = version.map { "\(name)@\($0)" } ?? name
        if let version {
            let digits = Array(String(version).utf8)
            record = [0x00] + Array(name.utf8) + [0x01] + digits
            prefix = Array(name.utf8) + [0x01] + digits + [0x00]
        } else {
            record = [0x00] + Array(name.utf8)
            prefix = Array(name.utf8) + [0x00]
        }
    }

    /// The space of `P`'s registered version.
    init<P: LedgerProjection>(_: P.Type) { self.init(name: P.name, version: P.version) }

    /// The space `meta` names.
    init(_ meta: AppProjectionMeta) { self.init(name: meta.name, version: meta.legacyKeys == true ? nil : meta.version) }

    /// The space `meta` names, `registered` when it is that one (no key is built again).
    static func of(_ meta: AppProjectionMeta, registered: AppProjectionSpace) -> AppProjectionSpace {
        meta.legacyKeys != true && meta.version == registered.version && meta.name == registered.name ? registered : AppProjectionSpace(meta)
    }

    var document: [UInt8] { prefix + [UInt8(ascii: "D")] }
    var rowPrefix: [UInt8] { prefix + [UInt8(ascii: "R")] }
    func row(_ key: String) -> [UInt8] { self.key(UInt8(ascii: "R"), EmptyCollection(), key) }
    var orderPrefix: [UInt8] { prefix + [UInt8(ascii: "O")] }
    /// A row's value before the pending shared events (``ProjectionUndo``).
    func undoRow(_ key: String) -> [UInt8] { self.key(UInt8(ascii: "U"), EmptyCollection(), key) }
    var undoRowPrefix: [UInt8] { prefix + [UInt8(ascii: "U")] }
    /// The document before the pending shared events.
    var undoDocument: [UInt8] { prefix + [UInt8(ascii: "u")] }
    func order(_ order: some Collection<UInt8>, _ key: String) -> [UInt8] { self.key(UInt8(ascii: "O"), order, key) }

    /// `prefix ‖ tag ‖ middle ‖ key`, in one allocation (an append builds several a row).
    private func key(_ tag: UInt8, _ middle: some Collection<UInt8>, _ key: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(prefix.count + 1 + middle.count + key.utf8.count)
        bytes += prefix
        bytes.append(tag)
        bytes += middle
        bytes += key.utf8
        return bytes
    }


    /// The space a state entry's key belongs to and the rest of the key after its prefix (its
    /// kind and what follows); nil when the key belongs to none.
    static func parse(stateKey key: [UInt8]) -> (space: AppProjectionSpace, rest: ArraySlice<UInt8>)? {
        guard let end = key.firstIndex(where: { $0 <= 0x01 }), end > 0 else { return nil }
        let name = String(decoding: key[..<end], as: UTF8.self)
        if key[end] == 0x00 { return (AppProjectionSpace(name: name, version: nil), key[(end + 1)...]) }
        guard let zero = key[(end + 1)...].firstIndex(of: 0x00), zero > end + 1,
              let version = Int(String(decoding: key[(end + 1)..<zero], as: UTF8.self)), String(version).utf8.count == zero - end - 1
        else { return nil }
        return (AppProjectionSpace(name: name, version: version), key[(zero + 1)...])
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
    /// Stored in the legacy space (``AppProjectionSpace``); nil for a space of its own.
    var legacyKeys: Bool? = nil
    /// How many events already in the log ``LedgerProjection/apply(_:to:)`` refused: each
    /// was skipped (docs/semantics.md, "App projections"); nil: none.
    var skipped: Int? = nil
    /// The last one skipped: its sequence, type and the reason.
    var lastSkipped: String? = nil
    /// This ledger's shared events of its types that the user's feed has not settled yet, in
    /// log order: applied on top of the confirmed state (``AppProjectionFold``); nil: none.
    var pending: [UInt64]? = nil
    /// A newer version of the projection is stored (being built, or ready): this one is kept
    /// while a live process registers it, then dropped.
    var successor: Int? = nil
    /// When (microseconds since 1970, the ledger's clock) ``successor`` was first set: the
    /// version is dropped no sooner than ``AppProjectionMeta/dropGraceMicros`` after, so that
    /// the live processes that register it have time to say so.
    var replacedAt: Int64? = nil
    /// How long a replaced version is kept at least (2 s).
    static let dropGraceMicros: Int64 = 2_000_000
    /// The processes (pids) that registered this version writable while another version was
    /// stored; the version is dropped once a newer one is ready and none of them lives.
    var registrants: [Int32]? = nil
    /// Set by ``LedgerProjections/drop(named:)`` while it deletes this version (ledger clock,
    /// µs since 1970; each of its transactions moves it ``AppProjectionMeta/dropLeaseMicros``
    /// ahead): until then no build step continues the clearing (and rebuilds the version under
    /// the drop). A drop that stopped half-way (its process killed, an error) lets the next
    /// build clear and rebuild the version once it has passed.
    var droppingUntil: Int64? = nil
    /// How long a drop's transaction keeps build steps off the version (5 s; the drop's
    /// transactions are milliseconds apart).
    static let dropLeaseMicros: Int64 = 5_000_000
    /// A lease ending further ahead than this was written by a clock that has since jumped back
    /// (or by a process whose clock was wrong): it is not honoured, so such a drop stopped
    /// half-way holds the version `clearing` for at most a minute, not until the clock catches up.
    static let dropLeaseHorizonMicros: Int64 = 60_000_000

    /// Whether a drop's lease keeps build steps off this version at `now` (ledger clock, µs).
    func dropLeaseHolds(at now: Int64) -> Bool {
        guard let until = droppingUntil, until > now else { return false }
        let (ahead, overflow) = until.subtractingReportingOverflow(now)
        return !overflow && ahead <= Self.dropLeaseHorizonMicros
    }

    /// The record stored under `key`: one under a name alone is in the legacy space.
    static func decode(_ bytes: [UInt8], key: [UInt8]? = nil, path: String) throws(LedgerError) -> AppProjectionMeta {
        var meta: AppProjectionMeta
        do { meta = try LedgerJSONDecoder.decode(AppProjectionMeta.self, from: bytes) } catch {
            throw .corruptStore(path: path, reason: "an app projection's record is not readable: \(error)")
        }
        if let key, !key.contains(0x01) { meta.legacyKeys = true }
        return meta
    }

    /// Whether this version is being built with at most the catch-up bound left before `head`
    /// (and no newer version replaces it): a read answers it with the rest replayed, and a
    /// registering append finishes it (docs/semantics.md, "Versions").
    func buildEndsWithin(bound: Int, of head: UInt64) -> Bool {
        status == .building && successor == nil && (appliedThrough >= head || head - appliedThrough <= UInt64(bound))
    }

    /// Records an event already in the log that `apply` refused (`error`), skipped.
    mutating func recordSkipped(_ error: LedgerError) {
        skipped = (skipped ?? 0) + 1
        lastSkipped = Self.failure(error) ?? "\(error)"
    }

    func encoded() throws(LedgerError) -> [UInt8] { try AppProjectionJSON.encode(self, projection: name) }

    /// What is recorded of an event in the log that `apply` refused (nil: `error` is not a refusal).
    static func failure(_ error: LedgerError) -> String? {
        guard case .projectionRejected(_, let sequence, let type, let reason) = error else { return nil }
        return "event \(sequence.map(String.init) ?? "?") (\(type ?? "?")): \(reason)"
    }
}

/// A stored row: `0x01 ‖ u16 BE order length ‖ order bytes ‖ JSON`.
struct AppProjectionRow {
    /// Slices of ``stored``: a row read is not copied again.
    var order: ArraySlice<UInt8>
    var json: ArraySlice<UInt8>
    /// The whole stored value (what the decoded-value cache compares).
    var stored: [UInt8] = []

    static func encode(order: some Collection<UInt8>, json: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(3 + order.count + json.count)
        bytes += [0x01, UInt8(order.count >> 8), UInt8(order.count & 0xFF)]
        bytes += order
        bytes += json
        return bytes
    }

    static func decode(_ bytes: [UInt8]) -> AppProjectionRow? {
        guard let order = order(in: bytes) else { return nil }
        return AppProjectionRow(order: order, json: bytes[order.endIndex...], stored: bytes)
    }

    /// The order bytes of the stored row `bytes` (nil: malformed), without copying them.
    static func order(in bytes: [UInt8]) -> ArraySlice<UInt8>? {
        guard bytes.count >= 3, bytes[0] == 0x01 else { return nil }
        let length = Int(bytes[1]) << 8 | Int(bytes[2])
        guard bytes.count >= 3 + length else { return nil }
        return bytes[3..<(3 + length)]
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
    let space: AppProjectionSpace
    var name: String { space.name }
    /// The ledger's directory, for errors.
    let path: String
    /// Decoded values of the handle's earlier reads (reads only; nil while writing).
    var cache: AppProjectionCache? = nil

    /// Whether a document is stored (without decoding it).
    func hasDocument() throws(LedgerError) -> Bool { try get(space.document) != nil }

    func document<P: LedgerProjection>(_: P.Type) throws(LedgerError) -> P.Document? {
        let at = space.document
        guard let bytes = try get(at) else { return nil }
        if let cached: P.Document = cache?.value(at: at, bytes) { return cached }
        let document = try AppProjectionJSON.decode(P.Document.self, bytes[...], projection: name, what: "the document")
        cache?.store(at: at, bytes, document)
        return document
    }

    func row<P: LedgerProjection>(_: P.Type, _ key: String) throws(LedgerError) -> P.Row? {
        let at = space.row(key)
        guard let bytes = try get(at) else { return nil }
        if let cached: P.Row = cache?.value(at: at, bytes) { return cached }
        guard let row = AppProjectionRow.decode(bytes) else {
            throw .corruptStore(path: path, reason: "app projection '\(name)': row '\(key)' is malformed")
        }
        let decoded = try AppProjectionJSON.decode(P.Row.self, row.json, projection: name, what: "row '\(key)'")
        cache?.store(at: at, bytes, decoded)
        return decoded
    }

    /// Visits rows in the projection's order (every row has an index entry: its order bytes,
    /// empty when it declares none, then its key) while `body` returns true; `at` is the row's
    /// key in the table (what the cache keeps it by).
    func forEachRow(from start: [UInt8] = [], _ body: (_ key: String, _ at: [UInt8], _ row: AppProjectionRow) throws -> Bool) throws(LedgerError) {
        do {
            let prefix = space.orderPrefix
            try store.scan(.apps, from: prefix + start) { key, value in
                guard key.starts(with: prefix) else { return false }
                let rowKey = String(decoding: value, as: UTF8.self)
                let at = space.row(rowKey)
                guard let bytes = try store.get(.apps, at), let row = AppProjectionRow.decode(bytes) else {
                    throw LedgerError.corruptStore(path: path, reason: "app projection '\(name)': the order index names row '\(rowKey)', which is missing or malformed")
                }
                return try body(rowKey, at, row)
            }
        } catch let error as LedgerError {
            throw error
        } catch {
            throw .unexpected(path: path, operation: "read projection '\(name)'", reason: "\(error)")
        }
    }

    /// The stored bytes under `key` of the table (an undo entry).
    func raw(_ key: [UInt8]) throws(LedgerError) -> [UInt8]? { try get(key) }

    /// Every entry under `prefix`, with the rest of its key after the prefix as text.
    func scanRaw(from prefix: [UInt8], _ body: (String, [UInt8]) throws(LedgerError) -> Void) throws(LedgerError) {
        do {
            try store.scan(.apps, from: prefix) { key, value in
                guard key.starts(with: prefix) else { return false }
                try body(String(decoding: key[prefix.count...], as: UTF8.self), value)
                return true
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

/// The undo entries a stage writes (``AppProjectionFold``).
struct AppProjectionUndoWrite {
    /// Delete every stored undo entry first.
    var clearStored: Bool
    var rows: [(key: String, value: [UInt8])] = []
    var document: [UInt8]?
}

/// What applying events to one projection changes, encoded and ready to write.
struct AppProjectionChanges {
    /// Each changed row by key: its stored value and its order bytes; nil: removed.
    var rows: [(key: String, row: (value: [UInt8], order: [UInt8])?)] = []
    var document: [UInt8]?
    /// The undo entries to write (``AppProjectionFold``); nil: unchanged.
    var undo: AppProjectionUndoWrite?
    /// The pending list when it changed (empty: none left).
    var pending: [UInt64]?
    /// Events already in the log that `apply` refused while pending events were applied again
    /// (or a settled one at its feed position): skipped, counted in the record.
    var skipped: [LedgerError] = []

    var isEmpty: Bool { rows.isEmpty && document == nil && undo == nil && pending == nil && skipped.isEmpty }

    /// Records in `meta` what the changes say of it besides the state: the pending list, the skipped events.
    func record(in meta: inout AppProjectionMeta) {
        if let pending { meta.pending = pending.isEmpty ? nil : pending }
        for error in skipped { meta.recordSkipped(error) }
    }
}

/// What a handle decoded on its earlier reads, by the stored bytes it decoded: a read that
/// finds the same bytes returns the decoded value without decoding again (a widget's warm
/// read). Bounded; cleared when full.
final class AppProjectionCache: Sendable {
    /// A decoded value and the bytes it was decoded from (a class: a hit takes one reference
    /// out of the lock, and compares and casts outside it).
    private final class Entry: @unchecked Sendable {
        // @unchecked: immutable; `value` holds a projection's Row, Document or contents, all
        // Sendable; the existential only hides which.
        let bytes: [UInt8]
        let value: Any
        init(bytes: [UInt8], value: Any) {
            self.bytes = bytes
            self.value = value
        }
    }
    private struct State {
        /// By the row's or document's key in the table (its space's prefix, so each version
        /// apart): hashed and compared as one byte string (a pair of strings cost a warm row read
        /// ~15 %: two string hashes, and string comparisons at every probe).
        var entries: [StateKey: Entry] = [:]
        /// Each version's record, by its key in the table.
        var metas: [StateKey: (bytes: [UInt8], meta: AppProjectionMeta)] = [:]
        /// The last `contents(limit:)` of each version, by its record's key; the entry's bytes
        /// are the record it was read under.
        var contents: [StateKey: (limit: Int, entry: Entry)] = [:]
    }
    private let state = Mutex(State())
    static let capacity = 1024
    /// An apply that changes more rows than this keeps none of them (a batch's rows would push
    /// the rows a widget reads out of the cache).
    static let rowsKeptPerApply = 64

    /// The value decoded from `bytes` stored at `at`, if it was the last stored there.
    func value<T>(at: [UInt8], _ bytes: [UInt8]) -> T? {
        guard let entry = state.withLock({ $0.entries[StateKey(bytes: at)] }), entry.bytes.sameBytes(as: bytes) else { return nil }
        return entry.value as? T
    }

    /// Records that `bytes`, stored at `at`, decode to `value`.
    func store<T: Sendable>(at: [UInt8], _ bytes: [UInt8], _ value: T) {
        let entry = Entry(bytes: bytes, value: value)
        state.withLock { state in
            if state.entries.count >= Self.capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[StateKey(bytes: at)] = entry
        }
    }

    /// The contents last read with `limit` rows of the version whose record is stored at `at`,
    /// if its state was the one the record `record` describes (every change of a state
    /// rewrites its record: equal record bytes, equal state — a widget's warm read is then a
    /// record read and a comparison).
    func contents<T>(at: [UInt8], record: [UInt8], limit: Int) -> T? {
        guard let last = state.withLock({ $0.contents[StateKey(bytes: at)] }), last.limit == limit,
              last.entry.bytes.sameBytes(as: record) else { return nil }
        return last.entry.value as? T
    }

    func storeContents<T: Sendable>(at: [UInt8], record: [UInt8], limit: Int, _ value: T) {
        let entry = Entry(bytes: record, value: value)
        state.withLock { $0.contents[StateKey(bytes: at)] = (limit, entry) }
    }

    /// The record stored as `bytes` at `at`, decoded once.
    func meta(at: [UInt8], _ bytes: [UInt8], path: String) throws(LedgerError) -> AppProjectionMeta {
        let cached = state.withLock { state in state.metas[StateKey(bytes: at)].flatMap { $0.bytes.sameBytes(as: bytes) ? $0.meta : nil } }
        if let cached { return cached }
        let meta = try AppProjectionMeta.decode(bytes, key: at, path: path)
        remember(at: at, bytes, meta)
        return meta
    }

    /// Records that `bytes`, stored at `at`, decode to `meta` (a record just encoded and
    /// written: the next append or read of the handle finds it without decoding).
    func remember(at: [UInt8], _ bytes: [UInt8], _ meta: AppProjectionMeta) {
        state.withLock { $0.metas[StateKey(bytes: at)] = (bytes, meta) }
    }
}

/// Reading and writing the `app-projections` table through any ``ProjectionStore``.
enum AppProjectionTable {
    /// The record of version `version` of `name`: in its own space, else the legacy one if it
    /// holds that version (decoded through `cache` when there is one: a handle's appends and
    /// reads find the record they wrote last without decoding it).
    static func meta(_ name: String, version: Int, in store: some ProjectionStore, path: String,
                     cache: AppProjectionCache? = nil) throws -> AppProjectionMeta? {
        try meta(AppProjectionSpace(name: name, version: version), in: store, path: path, cache: cache)
    }

    /// The record of `space`'s version (a versioned space), else of the legacy space if it holds that version.
    static func meta(_ space: AppProjectionSpace, in store: some ProjectionStore, path: String,
                     cache: AppProjectionCache? = nil) throws -> AppProjectionMeta? {
        try record(space, in: store, path: path, cache: cache)?.meta
    }

    /// ``meta(_:in:path:cache:)`` with the record's stored bytes.
    static func record(_ space: AppProjectionSpace, in store: some ProjectionStore, path: String,
                       cache: AppProjectionCache? = nil) throws -> (meta: AppProjectionMeta, bytes: [UInt8])? {
        if let bytes = try store.get(.apps, space.record) {
            return (try cache?.meta(at: space.record, bytes, path: path) ?? AppProjectionMeta.decode(bytes, key: space.record, path: path), bytes)
        }
        let legacy = [0x00] + Array(space.name.utf8)
        guard space.version != nil, let bytes = try store.get(.apps, legacy) else { return nil }
        let meta = try cache?.meta(at: legacy, bytes, path: path) ?? AppProjectionMeta.decode(bytes, key: legacy, path: path)
        return meta.version == space.version ? (meta, bytes) : nil
    }

    static func putMeta(_ meta: AppProjectionMeta, in store: some ProjectionStore) throws {
        try store.put(.apps, AppProjectionSpace(meta).record, meta.encoded())
    }

    /// Every stored projection's record, by name then version.
    static func metas(in store: some ProjectionStore, path: String) throws -> [AppProjectionMeta] {
        try records(from: AppProjectionKeys.metaPrefix, in: store, path: path)
    }

    /// The records of every stored version of `name`, oldest first.
    static func versions(of name: String, in store: some ProjectionStore, path: String) throws -> [AppProjectionMeta] {
        try records(from: AppProjectionKeys.records(name), in: store, path: path).filter { $0.name == name }.sorted { $0.version < $1.version }
    }

    private static func records(from prefix: [UInt8], in store: some ProjectionStore, path: String) throws -> [AppProjectionMeta] {
        var found: [AppProjectionMeta] = []
        try store.scan(.apps, from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            found.append(try AppProjectionMeta.decode(value, key: key, path: path))
            return true
        }
        return found.sorted { ($0.name, $0.version) < ($1.name, $1.version) }
    }

    /// Writes `changes`: each row and its order-index entry (the old entry removed), the document.
    static func write(_ changes: AppProjectionChanges, space: AppProjectionSpace, into store: some ProjectionStore, rows: inout Int) throws {
        for (key, row) in changes.rows {
            let rowKey = space.row(key)
            if let old = try store.get(.apps, rowKey) {
                if let oldOrder = AppProjectionRow.order(in: old) {
                    if let row, oldOrder.elementsEqual(row.order) {
                        try store.put(.apps, rowKey, row.value)  // same order: its index entry stays
                        continue
                    }
                    try store.delete(.apps, space.order(oldOrder, key))
                }
                if row == nil {
                    try store.delete(.apps, rowKey)
                    rows -= 1
                }
            } else if row != nil {
                rows += 1
            }
            guard let row else { continue }
            try store.put(.apps, rowKey, row.value)
            try store.put(.apps, space.order(row.order, key), Array(key.utf8))
        }
        if let document = changes.document { try store.put(.apps, space.document, document) }
        if let undo = changes.undo {
            if undo.clearStored {
                _ = try clear(prefix: space.undoRowPrefix, in: store, limit: .max)
                try store.delete(.apps, space.undoDocument)
            }
            for (key, value) in undo.rows { try store.put(.apps, space.undoRow(key), value) }
            if let document = undo.document { try store.put(.apps, space.undoDocument, document) }
        }
    }

    /// Whether any entry of `space`'s state is stored.
    static func holdsState(_ space: AppProjectionSpace, in store: some ProjectionStore) throws -> Bool {
        var found = false
        try store.scan(.apps, from: space.prefix) { key, _ in
            found = key.starts(with: space.prefix)
            return false
        }
        return found
    }

    /// Deletes up to `limit` entries of `space`'s state (rows, index, document; not its
    /// record); returns how many.
    static func clear(_ space: AppProjectionSpace, in store: some ProjectionStore, limit: Int) throws -> Int {
        try clear(prefix: space.prefix, in: store, limit: limit)
    }

    /// Deletes up to `limit` entries whose key starts with `prefix`; returns how many.
    static func clear(prefix: [UInt8], in store: some ProjectionStore, limit: Int) throws -> Int {
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

/// A key of the app projections' table in memory: hashed and compared as whole byte strings
/// (`[UInt8]`'s own `Hashable` feeds the hasher a byte at a time, a fifth of a build's time).
struct StateKey: Hashable, Comparable {
    let bytes: [UInt8]

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (a: StateKey, b: StateKey) -> Bool { a.bytes.sameBytes(as: b.bytes) }

    static func < (a: StateKey, b: StateKey) -> Bool { a.bytes.bytesPrecede(b.bytes) }
}

/// An in-memory layer of changes over a store: a read that finds events not applied yet
/// applies them here, never in the file; a build step stages its changes here before its
/// write transaction.
final class OverlayStore: ProjectionStore {
    let base: any ProjectionStore
    /// Changed entries of `.apps` (nil: deleted).
    private var changes: [StateKey: [UInt8]?] = [:]

    init(base: any ProjectionStore) { self.base = base }

    /// How many entries the changes put or delete.
    var changedEntries: Int { changes.count }

    /// Writes the changes into `store`, in key order (neighbouring keys share pages).
    func replay(into store: some ProjectionStore) throws {
        for key in changes.keys.sorted() {
            if let value = changes[key] ?? nil { try store.put(.apps, key.bytes, value) } else { try store.delete(.apps, key.bytes) }
        }
    }

    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? {
        if table == .apps, let change = changes[StateKey(bytes: key)] { return change }
        return try base.get(table, key)
    }

    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        guard table == .apps else { throw LMDBOverlayRefusal() }
        changes[StateKey(bytes: key)] = .some(value)
    }

    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws {
        guard table == .apps else { throw LMDBOverlayRefusal() }
        changes[StateKey(bytes: key)] = .some(nil)
    }

    /// The base's entries merged with the changes, in key order.
    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        guard table == .apps, !changes.isEmpty else { return try base.scan(table, from: start, body) }
        let first = StateKey(bytes: start)
        let pending = changes.keys.filter { !($0 < first) }.sorted()
        var next = 0
        var stopped = false
        try base.scan(table, from: start) { key, value in
            let stored = StateKey(bytes: key)
            while next < pending.count, pending[next] < stored {
                if let changed = changes[pending[next]] ?? nil, try !body(pending[next].bytes, changed) { stopped = true; return false }
                next += 1
            }
            if next < pending.count, pending[next] == stored {
                next += 1
                guard let changed = changes[stored] ?? nil else { return true }  // deleted
                if try !body(key, changed) { stopped = true; return false }
                return true
            }
            if try !body(key, value) { stopped = true; return false }
            return true
        }
        guard !stopped else { return }
        while next < pending.count {
            if let changed = changes[pending[next]] ?? nil, try !body(pending[next].bytes, changed) { return }
            next += 1
        }
    }
}

/// Only the app projections' table is ever changed in an overlay.
struct LMDBOverlayRefusal: Error {}

extension ProjectionInfo {
    init(_ meta: AppProjectionMeta) {
        self.init(name: meta.name, version: meta.version, status: meta.status.rawValue, appliedThrough: meta.appliedThrough,
                  builtFrom: meta.builtFrom, rows: meta.rows, eventTypes: meta.eventTypes, failure: meta.failure,
                  skippedEvents: meta.skipped ?? 0, lastSkipped: meta.lastSkipped, pendingSharedEvents: meta.pending?.count ?? 0)
    }
}

extension AppProjectionReader: ProjectionRowSource {}
