/// The record of an idempotency key in the `keys` table (docs/format.md): the sequence of the
/// event that used it, the digest of that event's content, and when it was appended.
struct KeyRecord: Hashable, Sendable {
    /// The sequence of the event the key was first used for.
    var sequence: UInt64
    /// ``ContentDigest`` of that event's type and payload: a retry must match it.
    var digest: UInt64
    /// Commit time of that event, µs since the epoch (the key's retention window starts here).
    var time: Int64

    func encode() -> [UInt8] { U64Fields.encode(sequence, digest, UInt64(bitPattern: time)) }

    /// Nil when `bytes` are not a key record. Records written before the time was kept (16
    /// bytes) read with time 0: their window has passed.
    static func decode(_ bytes: [UInt8]) -> KeyRecord? {
        guard let f = U64Fields.decode(bytes, count: 3) ?? U64Fields.decode(bytes, count: 2).map({ $0 + [0] }) else { return nil }
        return KeyRecord(sequence: f[0], digest: f[1], time: Int64(bitPattern: f[2]))
    }
}

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
