/// The on-disk envelope of one event (format documented byte by byte in docs/format.md).
///
/// ```
/// offset size  field
///  0     1     envelope version (1)
///  1     1     flags (bit 0: has key; 1: shared; 2: from the feed; others 0)
///  2     2     type length T (LE)
///  4     2     origin role length R (LE)
///  6     2     key length K (LE, 0 without key)
///  8     4     origin pid (LE, two's complement)
/// 12     4     payload length P (LE)
/// 16     8     timestamp, µs since the epoch (LE, two's complement)
/// 24     8     sequence (LE), equal to the record's key
/// 32     T+R+K type, role, key (UTF-8)
///  …     F     from the feed only (flag bit 2): u64 feed position, u64 origin sequence,
///              u8 presence (bit 0 origin ledger, bit 1 origin key), u16 L, u16 K',
///              origin ledger (L), origin key (K')
///  …     P     payload
///  …     4     CRC-32C of every preceding byte (LE)
/// ```
enum EventRecord {
    static let version: UInt8 = 1
    static let headerSize = 32
    static let trailerSize = 4
    static let flagHasKey: UInt8 = 1
    /// ``EventSource/shared``.
    static let flagShared: UInt8 = 2
    /// ``EventSource/feed(_:)``: the feed part follows the key.
    static let flagFromFeed: UInt8 = 4
    static let knownFlags: UInt8 = flagHasKey | flagShared | flagFromFeed
    /// The feed part's fixed bytes (position, origin sequence, presence, two lengths).
    static let feedFixedSize = 21

    static func encode(_ event: Event) -> [UInt8] {
        // The texts are written from their UTF-8 views: no intermediate arrays.
        let type = event.type.utf8
        let role = event.origin.role.utf8
        let key = (event.key ?? "").utf8
        var flags: UInt8 = event.key == nil ? 0 : flagHasKey
        var feed: FeedOrigin?
        switch event.source {
        case .local: break
        case .shared: flags |= flagShared
        case .feed(let origin):
            flags |= flagFromFeed
            feed = origin
        }
        let feedLedger = (feed?.ledger ?? "").utf8, feedKey = (feed?.key ?? "").utf8
        let feedSize = feed == nil ? 0 : feedFixedSize + feedLedger.count + feedKey.count
        var w = ByteWriter(capacity: headerSize + type.count + role.count + key.count + feedSize + event.payload.count + trailerSize)
        w.u8(version)
        w.u8(flags)
        w.u16le(UInt16(truncatingIfNeeded: type.count))
        w.u16le(UInt16(truncatingIfNeeded: role.count))
        w.u16le(UInt16(truncatingIfNeeded: key.count))
        w.u32le(UInt32(bitPattern: event.origin.pid))
        w.u32le(UInt32(truncatingIfNeeded: event.payload.count))
        w.u64le(UInt64(bitPattern: event.timestampMicros))
        w.u64le(event.sequence)
        w.append(type)
        w.append(role)
        w.append(key)
        if let feed {
            w.u64le(feed.position)
            w.u64le(feed.sequence)
            w.u8((feed.ledger == nil ? 0 : 1) | (feed.key == nil ? 0 : 2))
            w.u16le(UInt16(truncatingIfNeeded: feedLedger.count))
            w.u16le(UInt16(truncatingIfNeeded: feedKey.count))
            w.append(feedLedger)
            w.append(feedKey)
        }
        w.append(event.payload)
        w.u32le(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// Why a record could not be decoded.
    enum DecodeError: Error, Equatable, CustomStringConvertible {
        case tooShort(Int)
        case unsupportedVersion(UInt8)
        case checksumMismatch(stored: UInt32, computed: UInt32)
        case lengthMismatch(expected: Int, actual: Int)
        case sequenceMismatch(stored: UInt64)
        case invalidFlags(UInt8)
        case invalidText(String)

        var description: String {
            switch self {
            case .tooShort(let n): "record is \(n) bytes, shorter than the 36-byte minimum"
            case .unsupportedVersion(let v): "record envelope version \(v) is not supported (this library reads version \(EventRecord.version))"
            case .checksumMismatch(let s, let c): "checksum mismatch (stored 0x\(String(s, radix: 16)), computed 0x\(String(c, radix: 16)))"
            case .lengthMismatch(let e, let a): "record length \(a) does not match its header (\(e))"
            case .sequenceMismatch(let s): "record claims sequence \(s)"
            case .invalidFlags(let f): "unknown flags 0x\(String(f, radix: 16))"
            case .invalidText(let field): "\(field) is not valid UTF-8"
            }
        }
    }

    /// The type, origin role and key of a record, read from its header without checking the
    /// checksum or copying the payload (compaction's bookkeeping). Nil if the header is malformed.
    static func peek(_ bytes: [UInt8]) -> (type: String, role: String, key: String?)? {
        var r = ByteReader(bytes)
        guard bytes.count >= headerSize + trailerSize, r.u8() == version, let flags = r.u8(),
              let typeLength = r.u16le(), let roleLength = r.u16le(), let keyLength = r.u16le()
        else { return nil }
        var body = ByteReader(bytes, offset: headerSize)
        guard let t = body.take(Int(typeLength)), let type = String(utf8: t),
              let o = body.take(Int(roleLength)), let role = String(utf8: o),
              let k = body.take(Int(keyLength)), let key = String(utf8: k)
        else { return nil }
        return (type, role, flags & flagHasKey != 0 ? key : nil)
    }

    /// Decodes `bytes`, stored under `sequence`. Never traps, whatever the bytes.
    static func decode(_ bytes: [UInt8], sequence: UInt64) -> Result<Event, DecodeError> {
        bytes.withUnsafeBytes { decode(borrowing: RawSpan(_unsafeBytes: $0), sequence: sequence) }
    }

    /// Decodes a record in place (a span of LMDB's memory inside the read transaction, which
    /// cannot outlive the call): the header is read where it lies, the checksum computed over
    /// it, and only the texts and the payload are copied out, once. Never traps, whatever the
    /// bytes (every read lies inside the length checked first).
    static func decode(borrowing bytes: RawSpan, sequence: UInt64) -> Result<Event, DecodeError> {
        let count = bytes.byteCount
        guard count >= headerSize + trailerSize else { return .failure(.tooShort(count)) }
        func u8(_ at: Int) -> UInt8 { bytes.unsafeLoad(fromByteOffset: at, as: UInt8.self) }
        func u16(_ at: Int) -> Int { Int(UInt16(littleEndian: bytes.unsafeLoadUnaligned(fromByteOffset: at, as: UInt16.self))) }
        func u32(_ at: Int) -> UInt32 { UInt32(littleEndian: bytes.unsafeLoadUnaligned(fromByteOffset: at, as: UInt32.self)) }
        func u64(_ at: Int) -> UInt64 { UInt64(littleEndian: bytes.unsafeLoadUnaligned(fromByteOffset: at, as: UInt64.self)) }
        let v = u8(0), flags = u8(1)
        let typeLength = u16(2), roleLength = u16(4), keyLength = u16(6)
        let pid = u32(8), payloadLength = Int(u32(12)), timestamp = u64(16), storedSequence = u64(24)
        guard v == version else { return .failure(.unsupportedVersion(v)) }
        // The feed part (flag bit 2) lies between the key and the payload; its lengths are in it.
        let feedAt = headerSize + typeLength + roleLength + keyLength
        var feedSize = 0
        if flags & flagFromFeed != 0 {
            guard feedAt + feedFixedSize + payloadLength + trailerSize <= count else {
                return .failure(.lengthMismatch(expected: feedAt + feedFixedSize + payloadLength + trailerSize, actual: count))
            }
            feedSize = feedFixedSize + u16(feedAt + 17) + u16(feedAt + 19)
        }
        let expected = feedAt + feedSize + payloadLength + trailerSize
        guard expected == count else { return .failure(.lengthMismatch(expected: expected, actual: count)) }
        let body = count - trailerSize
        let stored = u32(body)
        let computed = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<body])) }
        guard stored == computed else { return .failure(.checksumMismatch(stored: stored, computed: computed)) }
        guard flags & ~knownFlags == 0, flags & (flagShared | flagFromFeed) != (flagShared | flagFromFeed) else {
            return .failure(.invalidFlags(flags))
        }
        guard storedSequence == sequence else { return .failure(.sequenceMismatch(stored: storedSequence)) }
        var at = headerSize
        func text(_ length: Int) -> String? {
            defer { at += length }
            let range = at..<(at + length)
            return bytes.withUnsafeBytes { String(utf8: UnsafeRawBufferPointer(rebasing: $0[range]).assumingMemoryBound(to: UInt8.self)) }
        }
        guard let type = text(typeLength) else { return .failure(.invalidText("type")) }
        guard let role = text(roleLength) else { return .failure(.invalidText("origin role")) }
        guard let keyText = text(keyLength) else { return .failure(.invalidText("key")) }
        var source = EventSource.local
        if flags & flagShared != 0 { source = .shared }
        if flags & flagFromFeed != 0 {
            let position = u64(at), originSequence = u64(at + 8), presence = u8(at + 16)
            let ledgerLength = u16(at + 17), originKeyLength = u16(at + 19)
            guard presence & ~3 == 0, presence & 1 != 0 || ledgerLength == 0, presence & 2 != 0 || originKeyLength == 0 else {
                return .failure(.invalidText("feed origin presence"))
            }
            at += feedFixedSize
            guard let ledger = text(ledgerLength) else { return .failure(.invalidText("feed origin ledger")) }
            guard let originKey = text(originKeyLength) else { return .failure(.invalidText("feed origin key")) }
            source = .feed(FeedOrigin(ledger: presence & 1 != 0 ? ledger : nil, sequence: originSequence,
                                      key: presence & 2 != 0 ? originKey : nil, position: position))
        }
        let payloadRange = at..<(at + payloadLength)
        let payload = bytes.withUnsafeBytes { [UInt8](UnsafeRawBufferPointer(rebasing: $0[payloadRange])) }
        return .success(Event(
            sequence: sequence, timestampMicros: Int64(bitPattern: timestamp),
            origin: Origin(role: role, pid: Int32(bitPattern: pid)), type: type,
            key: flags & flagHasKey != 0 ? keyText : nil, payload: payload, source: source))
    }
}
