/// Sortable 8-byte encodings of signed times.
enum TimeKey {
    /// Ascending order of `micros`.
    static func ascending(_ micros: Int64) -> [UInt8] {
        SequenceKey.encode(UInt64(bitPattern: micros) ^ (1 << 63))
    }

    /// Descending order of `micros` (newest first).
    static func descending(_ micros: Int64) -> [UInt8] {
        SequenceKey.encode(~(UInt64(bitPattern: micros) ^ (1 << 63)))
    }

    static func decodeAscending(_ bytes: ArraySlice<UInt8>) -> Int64? {
        guard bytes.count >= 8, let v = SequenceKey.decode(Array(bytes.prefix(8))) else { return nil }
        return Int64(bitPattern: v ^ (1 << 63))
    }

    static func widgetKey(sentAt: Int64, id: String) -> [UInt8] { descending(sentAt) + Array(id.utf8) }
    static func expiryKey(expiresAt: Int64, id: String) -> [UInt8] { ascending(expiresAt) + Array(id.utf8) }
}

/// The flags byte of a stored message row (docs/format.md): which optional fields it holds
/// and its read flags. The bit values are the on-disk format (ProjectionRecordTests pins them).
struct MessageFlags: OptionSet, Hashable, Sendable {
    let rawValue: UInt8
    static let hasSubheading = MessageFlags(rawValue: 1 << 0)
    static let hasIconURL = MessageFlags(rawValue: 1 << 1)
    static let hasExpiry = MessageFlags(rawValue: 1 << 2)
    static let serverRead = MessageFlags(rawValue: 1 << 3)
    /// A local read override is set ...
    static let hasLocalRead = MessageFlags(rawValue: 1 << 4)
    /// ... and says read.
    static let localRead = MessageFlags(rawValue: 1 << 5)
    /// Both bits of the local override.
    static let localReadBits: MessageFlags = [.hasLocalRead, .localRead]
    /// Every read flag (what a listing that settles a local change may rewrite).
    static let readBits: MessageFlags = [.serverRead, .hasLocalRead, .localRead]

    /// The bits of a local read override.
    init(localRead: Bool?) {
        switch localRead {
        case nil: self = []
        case false?: self = .hasLocalRead
        case true?: self = .localReadBits
        }
    }

    init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The local read override these flags hold.
    var localReadValue: Bool? { contains(.hasLocalRead) ? contains(.localRead) : nil }
}

/// The flags byte of a stored action row: which optional fields it holds (on-disk values).
struct ActionFlags: OptionSet, Hashable, Sendable {
    let rawValue: UInt8
    static let hasTarget = ActionFlags(rawValue: 1 << 0)
    static let hasName = ActionFlags(rawValue: 1 << 1)
}

/// A message as the projections keep it: the server's fields and both read flags.
struct MessageRecord: Hashable, Sendable {
    var id: String
    var title: String
    var subheading: String?
    var iconURL: String?
    var sentAt: Int64
    var expiresAt: Int64?
    /// The server's read flag (last sync that carried one).
    var serverRead: Bool
    /// A local override (widget/app), kept until a sync agrees with it.
    var localRead: Bool?
    var extras: [String: String]
    /// Sequence of the last event that changed this message.
    var changedAt: UInt64

    /// What the user sees: the local override if any, else the server's flag.
    var isRead: Bool { localRead ?? serverRead }

    static let version: UInt8 = 1

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 64 + title.utf8.count + (subheading?.utf8.count ?? 0) + (iconURL?.utf8.count ?? 0))
        var flags = MessageFlags(localRead: localRead)
        if subheading != nil { flags.formUnion(.hasSubheading) }
        if iconURL != nil { flags.formUnion(.hasIconURL) }
        if expiresAt != nil { flags.formUnion(.hasExpiry) }
        if serverRead { flags.formUnion(.serverRead) }
        w.u8(Self.version)
        w.u8(flags.rawValue)
        w.u64le(UInt64(bitPattern: sentAt))
        w.u64le(UInt64(bitPattern: expiresAt ?? 0))
        w.u64le(changedAt)
        w.string(id)
        w.string(title)
        w.string(subheading ?? "")
        w.string(iconURL ?? "")
        w.u32le(UInt32(extras.count))
        for (k, v) in extras.isEmpty ? [] : extras.sorted(by: { $0.key < $1.key }) {
            w.string(k)
            w.string(v)
        }
        return w.bytes
    }

    /// Where a row is filed and whether it counts as unread: what an append needs of the row it
    /// replaces, read from the fixed fields at the front of the stored bytes without building
    /// its texts (the rest of the layout is checked, not decoded).
    struct Header: Hashable, Sendable {
        var sentAt: Int64
        var expiresAt: Int64?
        var serverRead: Bool
        var localRead: Bool?
        var changedAt: UInt64

        var isRead: Bool { localRead ?? serverRead }

        /// The header of a stored row; nil if the bytes are not a message row of this layout.
        init?(stored bytes: [UInt8]) {
            var r = ByteReader(bytes)
            guard let (header, _) = Header.read(&r) else { return nil }
            for _ in 0..<4 { guard let n = r.u32le(), r.take(Int(n)) != nil else { return nil } }
            guard let count = r.u32le(), count <= 10_000 else { return nil }
            for _ in 0..<(2 * count) { guard let n = r.u32le(), r.take(Int(n)) != nil else { return nil } }
            guard r.remaining == 0 else { return nil }
            self = header
        }

        /// Reads the fixed fields at the front of a stored row (version, flags, dates,
        /// `changedAt`): the header, and the flags for what follows.
        static func read(_ r: inout ByteReader) -> (Header, flags: MessageFlags)? {
            guard r.u8() == MessageRecord.version, let byte = r.u8(), let sent = r.u64le(), let expires = r.u64le(),
                  let changed = r.u64le()
            else { return nil }
            let flags = MessageFlags(rawValue: byte)
            let header = Header(sentAt: Int64(bitPattern: sent), expiresAt: flags.contains(.hasExpiry) ? Int64(bitPattern: expires) : nil,
                                serverRead: flags.contains(.serverRead), localRead: flags.localReadValue, changedAt: changed)
            return (header, flags)
        }

        init(sentAt: Int64, expiresAt: Int64?, serverRead: Bool, localRead: Bool?, changedAt: UInt64) {
            self.sentAt = sentAt
            self.expiresAt = expiresAt
            self.serverRead = serverRead
            self.localRead = localRead
            self.changedAt = changedAt
        }

    }

    var header: Header {
        Header(sentAt: sentAt, expiresAt: expiresAt, serverRead: serverRead, localRead: localRead, changedAt: changedAt)
    }

    /// Where `changedAt` lies in the stored bytes (after version, flags, sentAt, expiresAt).
    private static let changedAtOffset = 18

    /// Sets the local read flag in stored bytes `encode()` wrote, in place (its two bits of
    /// the flags byte, which follows the version).
    static func setLocalRead(_ localRead: Bool?, in bytes: inout [UInt8]) {
        var flags = MessageFlags(rawValue: bytes[1])
        flags.subtract(.localReadBits)
        flags.formUnion(MessageFlags(localRead: localRead))
        bytes[1] = flags.rawValue
    }

    /// Whether two stored rows hold the same message apart from its read flags and `changedAt`
    /// (what a listing that settles a local change rewrites).
    static func sameContent(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let readBits = MessageFlags.readBits.rawValue
        guard a.count == b.count, a.count > changedAtOffset + 8, a[0] == b[0], a[1] & ~readBits == b[1] & ~readBits else { return false }
        return a[2..<changedAtOffset] == b[2..<changedAtOffset] && a[(changedAtOffset + 8)...] == b[(changedAtOffset + 8)...]
    }

    /// Sets `changedAt` in stored bytes `encode()` wrote, in place.
    static func setChangedAt(_ sequence: UInt64, in bytes: inout [UInt8]) {
        withUnsafeBytes(of: sequence.littleEndian) { bytes.replaceSubrange(changedAtOffset..<(changedAtOffset + 8), with: $0) }
    }

    static func decode(_ bytes: [UInt8]) -> MessageRecord? {
        var r = ByteReader(bytes)
        guard let (header, flags) = Header.read(&r), let id = r.string(), let title = r.string(), let sub = r.string(),
              let icon = r.string(), let count = r.u32le(), count <= 10_000
        else { return nil }
        var extras: [String: String] = [:]
        for _ in 0..<count {
            guard let k = r.string(), let v = r.string() else { return nil }
            extras[k] = v
        }
        guard r.remaining == 0 else { return nil }
        return MessageRecord(
            id: id, title: title, subheading: flags.contains(.hasSubheading) ? sub : nil, iconURL: flags.contains(.hasIconURL) ? icon : nil,
            sentAt: header.sentAt, expiresAt: header.expiresAt, serverRead: header.serverRead, localRead: header.localRead,
            extras: extras, changedAt: header.changedAt)
    }
}

/// A pending widget action.
struct ActionRecord: Hashable, Sendable {
    var actionID: String
    var kind: WidgetAction.Kind
    var target: String?
    var name: String?
    /// Canonical JSON of the payload, empty if none.
    var payload: [UInt8]
    var role: String
    var recordedAt: Int64

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 64 + payload.count)
        w.u8(1)
        var flags: ActionFlags = []
        if target != nil { flags.formUnion(.hasTarget) }
        if name != nil { flags.formUnion(.hasName) }
        w.u8(flags.rawValue)
        w.u64le(UInt64(bitPattern: recordedAt))
        w.string(actionID)
        w.string(kind.rawValue)
        w.string(target ?? "")
        w.string(name ?? "")
        w.string(role)
        w.u32le(UInt32(payload.count))
        w.append(payload)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> ActionRecord? {
        var r = ByteReader(bytes)
        guard r.u8() == 1, let byte = r.u8(), let at = r.u64le(), let id = r.string(), let kind = r.string().flatMap(WidgetAction.Kind.init(rawValue:)),
              let target = r.string(), let name = r.string(), let role = r.string(), let n = r.u32le(),
              let payload = r.take(Int(n)), r.remaining == 0
        else { return nil }
        let flags = ActionFlags(rawValue: byte)
        return ActionRecord(actionID: id, kind: kind, target: flags.contains(.hasTarget) ? target : nil,
                            name: flags.contains(.hasName) ? name : nil, payload: Array(payload), role: role,
                            recordedAt: Int64(bitPattern: at))
    }
}

/// Where an action stands: recorded at `sequence`, then maybe completed.
struct ActionStatus: Hashable, Sendable {
    enum State: UInt8 { case pending = 0, done = 1, failed = 2, discarded = 3 }
    var sequence: UInt64
    var state: State
    var completedAt: UInt64

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 17)
        w.u64be(sequence)
        w.u8(state.rawValue)
        w.u64be(completedAt)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> ActionStatus? {
        var r = ByteReader(bytes)
        guard let s = r.u64be(), let raw = r.u8(), let state = State(rawValue: raw), let c = r.u64be(), r.remaining == 0
        else { return nil }
        return ActionStatus(sequence: s, state: state, completedAt: c)
    }
}

/// What the device knows of a message that the server's listing does not reflect yet, kept
/// until a listing settles it (docs/semantics.md, "Local changes and the server"). A message
/// has a row in `messages` or a record here, never both.
struct LocalMessageRecord: Hashable, Sendable {
    /// Where the message stands on this device.
    enum Standing: UInt8, Hashable, Sendable {
        /// Removed here (`message.removed`); a listing that still has it does not bring it back.
        case removed = 1
        /// Announced by a push (`push.received` without the message); no listing has brought it.
        case announced = 2
    }

    var standing: Standing
    /// A local read change made while the message had no row (an announced message read from
    /// its notification); applied as the row's local override when a listing brings it.
    var localRead: Bool?
    /// Sequence of the event that last changed this record.
    var changedAt: UInt64

    /// Whether it counts in the badge: announced and not read here.
    var countsInBadge: Bool { standing == .announced && localRead != true }

    static let version: UInt8 = 1

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 11)
        w.u8(Self.version)
        w.u8(standing.rawValue)
        let read: UInt8 = switch localRead {
        case nil: 0
        case false?: 1
        case true?: 2
        }
        w.u8(read)
        w.u64le(changedAt)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> LocalMessageRecord? {
        var r = ByteReader(bytes)
        guard r.u8() == version, let raw = r.u8(), let standing = Standing(rawValue: raw), let read = r.u8(), read <= 2,
              let changed = r.u64le(), r.remaining == 0
        else { return nil }
        return LocalMessageRecord(standing: standing, localRead: read == 0 ? nil : read == 2, changedAt: changed)
    }
}

/// The scalar state of the projections, kept in the `state` table.
struct ProjectionState: Hashable, Sendable {
    /// Unread messages (not removed, not expired as of the last applied event).
    var unread: Int64 = 0
    /// The app's adjustment (`badge.adjusted`): badge = max(0, unread + announced +
    /// serverBadgeAdjustment + badgeAdjustment).
    var badgeAdjustment: Int64 = 0
    /// Messages in the table.
    var messageCount: Int64 = 0
    /// Pending actions.
    var pendingCount: Int64 = 0
    /// Sequence of the last event that changed what the widget shows.
    var version: UInt64 = 0
    /// Commit time of that event.
    var updatedAt: Int64 = 0
    /// Sequence of the last event applied.
    var appliedThrough: UInt64 = 0
    /// Messages announced by pushes that no listing has brought yet and that are not read
    /// here (``LocalMessageRecord/countsInBadge``).
    var announced: Int64 = 0
    /// The server's badge from the last push that carried one, as an adjustment: badge − what
    /// the ledger counted when it arrived. Cleared by the next sync (the listing is newer).
    var serverBadgeAdjustment: Int64 = 0

    /// The single key of the `state` table.
    static let key = Array("projection".utf8)

    init() {}

    /// Nine 8-byte big-endian fields, in declaration order (rules version 1 stored the first seven).
    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 72)
        for v in [UInt64(bitPattern: unread), UInt64(bitPattern: badgeAdjustment), UInt64(bitPattern: messageCount),
                  UInt64(bitPattern: pendingCount), version, UInt64(bitPattern: updatedAt), appliedThrough,
                  UInt64(bitPattern: announced), UInt64(bitPattern: serverBadgeAdjustment)] {
            w.u64be(v)
        }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> ProjectionState? {
        var r = ByteReader(bytes)
        guard bytes.count == 56 || bytes.count == 72, let a = r.u64be(), let b = r.u64be(), let c = r.u64be(), let d = r.u64be(),
              let e = r.u64be(), let f = r.u64be(), let g = r.u64be()
        else { return nil }
        var state = ProjectionState()
        if bytes.count == 72 {
            guard let h = r.u64be(), let i = r.u64be() else { return nil }
            state.announced = Int64(bitPattern: h)
            state.serverBadgeAdjustment = Int64(bitPattern: i)
        }
        state.unread = Int64(bitPattern: a)
        state.badgeAdjustment = Int64(bitPattern: b)
        state.messageCount = Int64(bitPattern: c)
        state.pendingCount = Int64(bitPattern: d)
        state.version = e
        state.updatedAt = Int64(bitPattern: f)
        state.appliedThrough = g
        return state
    }

    /// The stored state (the initial one if none was stored yet).
    static func load(from store: some ProjectionStore) throws -> ProjectionState {
        guard let bytes = try store.get(.state, key) else { return ProjectionState() }
        guard let state = decode(bytes) else { throw ProjectionError.malformed(table: .state, key: "projection") }
        return state
    }

    /// What the badge counts before its adjustments: unread messages plus announced ones.
    func counted(unread: Int64) -> Int64 { unread + announced }

    /// The badge for a given unread count: max(0, unread + announced + both adjustments).
    func badge(unread: Int64) -> Int64 { max(0, counted(unread: unread) + serverBadgeAdjustment + badgeAdjustment) }
}

extension ByteWriter {
    mutating func string(_ s: String) {
        u32le(UInt32(s.utf8.count))
        bytes.append(contentsOf: s.utf8)
    }
}

extension ByteReader {
    mutating func string() -> String? {
        guard let n = u32le(), let bytes = take(Int(n)) else { return nil }
        return String(utf8: bytes)
    }
}
