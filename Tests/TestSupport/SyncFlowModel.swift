import InboxLedger

/// What a sync server and the devices of one user should hold, written from docs/sync.md and
/// docs/semantics.md alone (not from `InboxLedgerSync` or `ledger-server`). Each device is a
/// `FlowModel` fed, in order, the events its ledger must commit: its own local events when they
/// happen and the server's feed entries when it syncs down. The server applies each device's
/// shared events exactly once, in the order they reach it, and keeps one ordered feed per user.
/// `SyncFlowModelTests` (Tools/ledger-server) drives it beside a real PostgreSQL, a real
/// `ledger-server` and two device ledgers synced by `SyncClient` processes.
public struct SyncFlowModel: Sendable {
    /// The server's state of one message (docs/sync.md, `GET /v1/state`).
    public struct ServerMessage: Hashable, Sendable {
        /// The last read flag a device sent (nil: no device ever sent one).
        public var read: Bool?
        public var removed: Bool
    }

    public struct Device: Sendable {
        /// What the user sees on this device.
        public var flow = FlowModel()
        /// Shared events committed here and not yet applied by the server, in order.
        public var unsent: [DomainEvent] = []
        /// Every shared event committed here (what the server must hold exactly once).
        public var sharedCount = 0
        /// Feed entries this device applied (its down cursor).
        public var downCursor = 0
        /// Keys of the keyed events committed here: a repeated key is a replay (nothing written).
        var keys: Set<String> = []
    }

    /// The event types a device sends up: the defaults of docs/sync.md plus the app's own.
    public let sharedTypes: Set<String>
    public private(set) var devices: [Device]
    /// The user's feed, in server order.
    public private(set) var feed: [DomainEvent] = []
    /// The server's messages (every id a read, a removal or a listing touched).
    public private(set) var serverMessages: [String: ServerMessage] = [:]
    /// Shared device events the server holds (each exactly once).
    public private(set) var deviceEvents = 0

    public init(devices: Int, sharedCustomTypes: Set<String>) {
        self.devices = Array(repeating: Device(), count: devices)
        sharedTypes = Set(["message.read", "message.removed", "widget.action", "action.completed"]).union(sharedCustomTypes)
    }

    // MARK: - Device side

    /// A device commits a local event (its app, widget or extension). Returns false for a keyed
    /// replay, which writes nothing.
    @discardableResult
    public mutating func local(_ device: Int, _ event: DomainEvent, key: String? = nil) -> Bool {
        if let key, !devices[device].keys.insert(key).inserted { return false }
        devices[device].flow.apply(event)
        if sharedTypes.contains(event.type) {
            devices[device].sharedCount += 1
            devices[device].unsent.append(event)
        }
        return true
    }

    /// Up: the server applies the device's unsent shared events, each once, in order.
    public mutating func up(_ device: Int) {
        for event in devices[device].unsent {
            deviceEvents += 1
            switch event {
            case .messageRead(let change):
                appendToFeed(.messageRead(change))
            case .widgetAction(let action) where action.kind == .markRead:
                if let target = action.target { appendToFeed(.messageRead(ReadChange(ids: [target], read: true))) }
            case .messageRemoved(let removal):
                appendToFeed(.messageRemoved(removal))
            default:
                break  // kept for the backend (device_events), no feed entry
            }
        }
        devices[device].unsent = []
    }

    /// Down: the device appends every feed entry after its cursor, in order.
    public mutating func down(_ device: Int) {
        for entry in feed[devices[device].downCursor...] { devices[device].flow.apply(entry) }
        devices[device].downCursor = feed.count
    }

    /// A complete `syncOnce`: everything pending up, then everything available down.
    public mutating func sync(_ device: Int) {
        up(device)
        down(device)
    }

    /// Whether every device has sent everything and applied the whole feed.
    public var quiescent: Bool { devices.allSatisfy { $0.unsent.isEmpty && $0.downCursor == feed.count } }

    // MARK: - Server side

    /// The backend publishes (docs/sync.md, "Listings"): one delta listing in the feed, each
    /// message carrying the server's read flag when the backend gave none; a message the server
    /// holds as removed stays removed (it goes out in `removed`).
    public mutating func publish(_ messages: [InboxMessage], removed: [String] = []) {
        var removed = removed
        var listed: [InboxMessage] = []
        for var m in messages {
            if serverMessages[m.id]?.removed == true {
                if !removed.contains(m.id) { removed.append(m.id) }
                continue
            }
            if m.read == nil { m.read = serverMessages[m.id]?.read }
            listed.append(m)
        }
        appendToFeed(.inboxSynced(InboxSync(mode: .delta, messages: listed, removed: removed)))
    }

    /// The server's effect of one feed entry on its own state, and the entry itself.
    private mutating func appendToFeed(_ entry: DomainEvent) {
        feed.append(entry)
        switch entry {
        case .messageRead(let change):
            for id in change.ids { serverMessages[id, default: ServerMessage(read: nil, removed: false)].read = change.read }
        case .messageRemoved(let removal):
            for id in removal.ids { serverMessages[id, default: ServerMessage(read: nil, removed: false)].removed = true }
        case .inboxSynced(let sync):
            for id in sync.removed { serverMessages[id, default: ServerMessage(read: nil, removed: false)].removed = true }
            for m in sync.messages { serverMessages[m.id, default: ServerMessage(read: nil, removed: false)].removed = false }
        default:
            break
        }
    }
}
