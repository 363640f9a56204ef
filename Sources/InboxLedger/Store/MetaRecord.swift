import LMDB

/// How one kind of value is stored in the `meta` table: its only encoder and decoder
/// (docs/format.md, "meta").
protocol MetaEncoding {
    associatedtype Value
    static func encode(_ value: Value) -> [UInt8]
    /// The value, or nil if `bytes` are not one (a damaged or foreign entry).
    static func decode(_ bytes: [UInt8]) -> Value?
}

/// A record that encodes and decodes itself, stored whole under one `meta` key.
protocol MetaStorable {
    func encode() -> [UInt8]
    static func decode(_ bytes: [UInt8]) -> Self?
}

/// The encodings of the `meta` table's values.
enum MetaEncodings {
    /// 4 bytes, little-endian: the format and projection-rules versions.
    enum U32LE: MetaEncoding {
        static func encode(_ value: UInt32) -> [UInt8] {
            var w = ByteWriter(capacity: 4)
            w.u32le(value)
            return w.bytes
        }

        static func decode(_ bytes: [UInt8]) -> UInt32? {
            var r = ByteReader(bytes)
            guard bytes.count == 4 else { return nil }
            return r.u32le()
        }
    }

    /// 8 bytes, big-endian: the head, the creation time, the counters, the built-in boundaries.
    enum U64BE: MetaEncoding {
        static func encode(_ value: UInt64) -> [UInt8] {
            var w = ByteWriter(capacity: 8)
            w.u64be(value)
            return w.bytes
        }

        static func decode(_ bytes: [UInt8]) -> UInt64? {
            var r = ByteReader(bytes)
            guard bytes.count == 8 else { return nil }
            return r.u64be()
        }
    }

    /// UTF-8 text: the ledger's id.
    enum Text: MetaEncoding {
        static func encode(_ value: String) -> [UInt8] { Array(value.utf8) }
        static func decode(_ bytes: [UInt8]) -> String? { String(utf8: bytes) }
    }

    /// One byte: the durability floor.
    enum Floor: MetaEncoding {
        static func encode(_ value: LedgerDurability) -> [UInt8] { [value.storedByte] }
        static func decode(_ bytes: [UInt8]) -> LedgerDurability? {
            guard bytes.count == 1 else { return nil }
            return LedgerDurability(storedByte: bytes[0])
        }
    }

    /// A record's own encoding (the last compaction, the compactor's lease).
    enum Record<R: MetaStorable>: MetaEncoding {
        static func encode(_ value: R) -> [UInt8] { value.encode() }
        static func decode(_ bytes: [UInt8]) -> R? { R.decode(bytes) }
    }
}

/// One entry of the `meta` table: its key and how its value is encoded.
struct MetaField<Encoding: MetaEncoding>: Sendable {
    let key: [UInt8]
    init(_ key: [UInt8]) { self.key = key }
}

/// The fields of the `meta` table (docs/format.md). Typed: a field is read and written by its
/// encoding only, never by hand.
enum Meta {
    static let format = MetaField<MetaEncodings.U32LE>(Schema.MetaKey.format)
    static let ledgerID = MetaField<MetaEncodings.Text>(Schema.MetaKey.ledgerID)
    static let createdAt = MetaField<MetaEncodings.U64BE>(Schema.MetaKey.createdAt)
    static let head = MetaField<MetaEncodings.U64BE>(Schema.MetaKey.head)
    static let durabilityFloor = MetaField<MetaEncodings.Floor>(Schema.MetaKey.durabilityFloor)
    static let projectionVersion = MetaField<MetaEncodings.U32LE>(Schema.MetaKey.projectionVersion)

    /// Where the event counters live: under this prefix, then `t:<type>` or `o:<role>`.
    static let countPrefix = Array("count:".utf8)

    /// An event counter (`name` is `t:<type>` or `o:<role>`).
    static func count(_ name: String) -> MetaField<MetaEncodings.U64BE> { MetaField(countPrefix + Array(name.utf8)) }
}

/// A field's stored value as read: absent, present, or present but not decodable.
enum MetaValue<Value> {
    case absent
    case malformed
    case value(Value)

    /// The value; nil if absent or malformed.
    var value: Value? {
        if case .value(let v) = self { return v }
        return nil
    }
}

/// The `meta` table as one transaction sees it, read and written field by field.
struct MetaRecord {
    let txn: Transaction
    let table: Database

    /// The field's value, telling an absent entry from a malformed one.
    func read<E>(_ field: MetaField<E>) throws(LMDBError) -> MetaValue<E.Value> {
        guard let bytes = try txn.get(table, key: field.key) else { return .absent }
        guard let value = E.decode(bytes) else { return .malformed }
        return .value(value)
    }

    /// The field's value; nil if absent or malformed.
    func get<E>(_ field: MetaField<E>) throws(LMDBError) -> E.Value? {
        try read(field).value
    }

    /// Whether the field has an entry (decodable or not).
    func contains<E>(_ field: MetaField<E>) throws(LMDBError) -> Bool {
        try txn.get(table, key: field.key) != nil
    }

    func put<E>(_ field: MetaField<E>, _ value: E.Value) throws(LMDBError) {
        try txn.put(table, key: field.key, value: E.encode(value))
    }

    /// Removes the field's entry; whether there was one.
    @discardableResult
    func delete<E>(_ field: MetaField<E>) throws(LMDBError) -> Bool {
        try txn.delete(table, key: field.key)
    }
}

extension Schema {
    /// The `meta` table as `txn` sees it.
    func metaRecord(_ txn: Transaction) -> MetaRecord { MetaRecord(txn: txn, table: meta) }
}

extension MetaRecord {
    /// The ledger's identity and settings; nil without a `format-version` (not a ledger, or one
    /// whose creation has not committed yet).
    func metadata(path: String) throws -> LedgerMetadata? {
        let format: UInt32
        switch try read(Meta.format) {
        case .absent: return nil
        case .malformed: throw LedgerError.notALedger(path: path, reason: "unreadable format version")
        case .value(let v): format = v
        }
        let floor: LedgerDurability
        switch try read(Meta.durabilityFloor) {
        case .absent: floor = .singleSync  // a ledger from before the floor was recorded
        case .malformed: throw LedgerError.corruptStore(path: path, reason: "unreadable durability floor in the ledger metadata")
        case .value(let v): floor = v
        }
        return LedgerMetadata(formatVersion: format, ledgerID: try get(Meta.ledgerID) ?? "",
                              createdAtMicros: Int64(bitPattern: try get(Meta.createdAt) ?? 0),
                              durabilityFloor: floor, projectionVersion: try projectionVersion(path: path) ?? 1)
    }

    /// The projection rules version stored (nil: absent, a ledger from before it was stored,
    /// built by version 1).
    func projectionVersion(path: String) throws -> UInt32? {
        switch try read(Meta.projectionVersion) {
        case .absent: return nil
        case .malformed: throw LedgerError.corruptStore(path: path, reason: "unreadable projection version in the ledger metadata")
        case .value(let v): return v
        }
    }

    /// Writes a new ledger's identity and settings, and its empty log's head.
    func create(_ metadata: LedgerMetadata) throws(LMDBError) {
        try put(Meta.format, metadata.formatVersion)
        try put(Meta.ledgerID, metadata.ledgerID)
        try put(Meta.createdAt, UInt64(bitPattern: metadata.createdAtMicros))
        try put(Meta.head, 0)
        try put(Meta.durabilityFloor, metadata.durabilityFloor)
        try put(Meta.projectionVersion, metadata.projectionVersion)
    }
}

extension Schema.MetaKey {
    /// `builtin-since:<type>`: the first sequence at which events of a later built-in type are
    /// built-in events in this ledger (docs/format.md).
    static func builtInSince(_ type: BuiltInEventType) -> [UInt8] { Array("builtin-since:\(type.rawValue)".utf8) }
}

extension Meta {
    /// The first sequence from which events named `type` are built-in (``BuiltInBoundaries``).
    static func builtInSince(_ type: BuiltInEventType) -> MetaField<MetaEncodings.U64BE> { MetaField(Schema.MetaKey.builtInSince(type)) }
}

extension MetaRecord {
    /// The boundaries recorded in the ledger (``BuiltInBoundaries``).
    func builtInBoundaries() throws -> BuiltInBoundaries {
        var since: [BuiltInEventType: UInt64] = [:]
        for type in BuiltInEventType.allCases where !type.isOriginal {
            if let first = try get(Meta.builtInSince(type)) { since[type] = first }
        }
        return BuiltInBoundaries(since: since)
    }

    /// Whether a later built-in type has no boundary recorded yet.
    func missesBuiltInTypes() throws -> Bool {
        for type in BuiltInEventType.allCases where !type.isOriginal {
            if try !contains(Meta.builtInSince(type)) { return true }
        }
        return false
    }

    /// Records, for every later built-in type the ledger has no record of, that it is built-in
    /// from `next` on (the sequence after the head): every event of that name already stored
    /// was appended by an older library as a custom event. Runs in the transaction that
    /// rebuilds the projections of an older library (so no older library appends in between),
    /// and at every writable opening before its handle appends (``Ledger/recordBuiltInTypes()``).
    func recordBuiltInTypes(from next: UInt64) throws {
        for type in BuiltInEventType.allCases where !type.isOriginal {
            if try !contains(Meta.builtInSince(type)) { try put(Meta.builtInSince(type), next) }
        }
    }
}
