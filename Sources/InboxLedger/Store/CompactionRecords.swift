/// The compaction lease in `meta` (docs/format.md): which compactor works now, until when.
struct LeaseRecord: Hashable, Sendable {
    /// How long a lease lasts without renewal (a compactor renews it with every trimmed chunk).
    static let duration: Int64 = 60_000_000

    /// The process of the compactor holding it.
    var pid: Int32
    /// The compactor's random token: a process can run several compactors.
    var owner: UInt64
    /// Expiry, µs since the epoch.
    var expires: Int64

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 20)
        w.u32le(UInt32(bitPattern: pid))
        w.u64le(owner)
        w.u64le(UInt64(bitPattern: expires))
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> LeaseRecord? {
        var r = ByteReader(bytes)
        guard let pid = r.u32le(), let owner = r.u64le(), let expires = r.u64le(), r.remaining == 0 else { return nil }
        return LeaseRecord(pid: Int32(bitPattern: pid), owner: owner, expires: Int64(bitPattern: expires))
    }
}

/// The last compaction, kept in the meta table for `inspect`.
struct CompactionRecord: Hashable, Sendable, MetaStorable {
    var at: Int64
    var snapshot: UInt64
    var trimmedThrough: UInt64
    var eventsTrimmed: UInt64
    var micros: UInt64

    init(at: Int64, snapshot: UInt64, trimmedThrough: UInt64, eventsTrimmed: UInt64, micros: UInt64) {
        self.at = at
        self.snapshot = snapshot
        self.trimmedThrough = trimmedThrough
        self.eventsTrimmed = eventsTrimmed
        self.micros = micros
    }

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 40)
        for v in [UInt64(bitPattern: at), snapshot, trimmedThrough, eventsTrimmed, micros] { w.u64be(v) }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> CompactionRecord? {
        var r = ByteReader(bytes)
        guard let a = r.u64be(), let s = r.u64be(), let t = r.u64be(), let n = r.u64be(), let m = r.u64be(), r.remaining == 0 else { return nil }
        return CompactionRecord(at: Int64(bitPattern: a), snapshot: s, trimmedThrough: t, eventsTrimmed: n, micros: m)
    }
}

extension LeaseRecord: MetaStorable {}

extension Meta {
    /// The last compaction that did work.
    static let lastCompaction = MetaField<MetaEncodings.Record<CompactionRecord>>(Schema.MetaKey.lastCompaction)
    /// The compactor's lease: one compaction at a time across processes.
    static let compactorLease = MetaField<MetaEncodings.Record<LeaseRecord>>(Schema.MetaKey.compactorLease)
}
