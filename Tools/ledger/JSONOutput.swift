import Foundation
import InboxLedger

// What `--json` prints, as types: their property names are the documented contract
// (docs/cli.md), pinned by `CLIJSONContractTests`. Optional values print as `null`
// (`OrNull`), never disappear, unless a field is documented as absent in some cases.

/// One line of JSON with sorted keys.
func jsonLine(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// An optional that prints `null` when absent (Encodable's synthesis would leave the key out).
struct OrNull<Value: Encodable>: Encodable {
    var value: Value?
    init(_ value: Value?) { self.value = value }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if let value { try c.encode(value) } else { try c.encodeNil() }
    }
}

/// A payload as JSON if it is JSON, else `{"base64": …}`.
struct PayloadOutput: Encodable {
    var bytes: [UInt8]

    func encode(to encoder: any Encoder) throws {
        // Bytes that are not JSON (a custom event may carry anything) print as base64.
        if let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) {
            try value.encode(to: encoder)
        } else {
            try ["base64": Data(bytes).base64EncodedString()].encode(to: encoder)
        }
    }
}

/// An event (`events --json`, `consume`, `inspect`'s `lastEvents`).
struct EventOutput: Encodable {
    struct OriginOutput: Encodable {
        var role: String
        var pid: Int32
    }

    /// Where an event that came down the user's feed was made (``FeedOrigin``).
    struct FeedOutput: Encodable {
        var ledger: OrNull<String>
        var sequence: UInt64
        var key: OrNull<String>
        var position: UInt64
    }

    var sequence: UInt64
    var type: String
    var origin: OriginOutput
    var timestamp: String
    var key: OrNull<String>
    var data: PayloadOutput
    /// `local`, `shared` or `feed` (``EventSource``).
    var source: String
    /// For `feed`: its origin and feed position; else null.
    var feed: OrNull<FeedOutput>

    init(_ event: Event) {
        sequence = event.sequence
        type = event.type
        origin = OriginOutput(role: event.origin.role, pid: event.origin.pid)
        timestamp = Timestamp(micros: event.timestampMicros).iso8601
        key = OrNull(event.key)
        data = PayloadOutput(bytes: event.payload)
        switch event.source {
        case .local:
            source = "local"
            feed = OrNull(nil)
        case .shared:
            source = "shared"
            feed = OrNull(nil)
        case .feed(let origin):
            source = "feed"
            feed = OrNull(FeedOutput(ledger: OrNull(origin.ledger), sequence: origin.sequence, key: OrNull(origin.key), position: origin.position))
        }
    }
}

/// A pending widget action (`widget --json`).
struct PendingActionOutput: Encodable {
    var sequence: UInt64
    var actionID: String
    var kind: String
    var target: OrNull<String>
    var name: OrNull<String>
    var payload: OrNull<PayloadOutput>
    var origin: String
    var recordedAt: String

    init(_ action: PendingAction) {
        sequence = action.sequence
        actionID = action.actionID
        kind = action.kind.rawValue
        target = OrNull(action.target)
        name = OrNull(action.name)
        payload = OrNull(action.payload.isEmpty ? nil : PayloadOutput(bytes: action.payload))
        origin = action.origin
        recordedAt = action.recordedAt.iso8601
    }
}

/// `widget --json`.
struct WidgetOutput: Encodable {
    struct Item: Encodable {
        var id: String
        var title: String
        var subheading: OrNull<String>
        var iconURL: OrNull<String>
        var sentAt: String
        var read: Bool
    }

    var items: [Item]
    var unreadCount: Int
    var announced: Int
    var badge: Int
    var version: UInt64
    var updatedAt: OrNull<String>
    var pendingActions: [PendingActionOutput]

    init(_ list: WidgetList, actions: [PendingAction]) {
        items = list.items.map {
            Item(id: $0.id, title: $0.title, subheading: OrNull($0.subheading), iconURL: OrNull($0.iconURL), sentAt: $0.sentAt.iso8601, read: $0.read)
        }
        unreadCount = list.unreadCount
        announced = list.announced
        badge = list.badge
        version = list.version
        updatedAt = OrNull(list.updatedAt?.iso8601)
        pendingActions = actions.map(PendingActionOutput.init)
    }
}

/// `inspect --json`.
struct InspectOutput: Encodable {
    struct Reader: Encodable {
        var pid: Int32
        var transactionID: OrNull<Int>
        var alive: Bool
    }

    struct Snapshot: Encodable {
        var sequence: UInt64
        var createdAt: String
        var rows: Int
        var bytes: Int
    }

    struct Compaction: Encodable {
        var finishedAt: String
        var snapshotSequence: UInt64
        var trimmedThrough: UInt64
        var eventsTrimmed: Int
        var seconds: Double
    }

    struct Consumer: Encodable {
        var name: String
        var cursor: UInt64
        var lag: UInt64
        var lastSeen: String
    }

    var formatVersion: UInt32
    var ledgerID: String
    var durabilityFloor: String
    var projectionVersion: UInt32
    var createdAt: String
    var headSequence: UInt64
    var firstSequence: UInt64
    var eventCount: Int
    var countsByType: [String: UInt64]
    var unknownTypes: [String]
    var countsByOrigin: [String: UInt64]
    var idempotencyKeys: Int
    var fileBytes: Int
    var mapBytes: Int
    var usedBytes: Int
    var pageSize: Int
    var maxReaders: Int
    var readers: [Reader]
    var staleReaders: Int
    var oldestReaderLag: OrNull<Int>
    var logPages: Int
    var totalPages: Int
    var lastTransactionID: Int
    var projectionsAppliedThrough: UInt64
    var warnings: [String]
    var lastEvents: [EventOutput]
    var snapshots: [Snapshot]
    var lastCompaction: OrNull<Compaction>
    var consumers: [Consumer]
    var projections: [ProjectionInfoOutput]

    init(_ s: LedgerStatistics, recent: [Event], projections: [ProjectionInfo]) {
        formatVersion = s.metadata.formatVersion
        ledgerID = s.metadata.ledgerID
        durabilityFloor = s.metadata.durabilityFloor.rawValue
        projectionVersion = s.metadata.projectionVersion
        createdAt = Timestamp(micros: s.metadata.createdAtMicros).iso8601
        headSequence = s.headSequence
        firstSequence = s.firstSequence
        eventCount = s.eventCount
        countsByType = s.countsByType
        unknownTypes = s.countsByType.keys.filter { !DomainEvent.builtInTypes.contains($0) }.sorted()
        countsByOrigin = s.countsByOrigin
        idempotencyKeys = s.idempotencyKeys
        fileBytes = s.fileBytes
        mapBytes = s.mapBytes
        usedBytes = s.usedBytes
        pageSize = s.pageSize
        maxReaders = s.maxReaders
        readers = s.readers.map { Reader(pid: $0.pid, transactionID: OrNull($0.transactionID), alive: $0.isAlive) }
        staleReaders = s.readers.filter { !$0.isAlive }.count
        oldestReaderLag = OrNull(s.oldestReaderLag)
        logPages = s.logPages
        totalPages = s.totalPages
        lastTransactionID = s.lastTransactionID
        projectionsAppliedThrough = s.projectionsAppliedThrough
        warnings = s.warnings
        lastEvents = recent.map(EventOutput.init)
        snapshots = s.snapshots.map { Snapshot(sequence: $0.sequence, createdAt: $0.createdAt.iso8601, rows: $0.rows, bytes: $0.bytes) }
        lastCompaction = OrNull(s.lastCompaction.map {
            Compaction(finishedAt: $0.finishedAt.iso8601, snapshotSequence: $0.snapshotSequence, trimmedThrough: $0.trimmedThrough,
                       eventsTrimmed: $0.eventsTrimmed, seconds: $0.seconds)
        })
        consumers = s.consumers.map { Consumer(name: $0.name, cursor: $0.cursor, lag: $0.lag, lastSeen: $0.lastSeen.iso8601) }
        self.projections = projections.map(ProjectionInfoOutput.init)
    }
}

/// An app projection's record (`inspect --json`'s `projections`, `projection --json`'s `projection`).
struct ProjectionInfoOutput: Encodable {
    var name: String
    var version: Int
    var status: String
    var appliedThrough: UInt64
    var builtFrom: UInt64
    var rows: Int
    var eventTypes: [String]
    var failure: OrNull<String>

    init(_ p: ProjectionInfo) {
        name = p.name
        version = p.version
        status = p.status
        appliedThrough = p.appliedThrough
        builtFrom = p.builtFrom
        rows = p.rows
        eventTypes = p.eventTypes
        failure = OrNull(p.failure)
    }
}

/// `projection --json`: the record, the document and the rows in the projection's order, each
/// row's stored JSON as it is (bytes that are not JSON print as `{"base64": …}`).
struct ProjectionDumpOutput: Encodable {
    struct Row: Encodable {
        var key: String
        var row: PayloadOutput
    }

    var projection: ProjectionInfoOutput
    var document: OrNull<PayloadOutput>
    var rows: [Row]

    init(info: ProjectionInfo, document: [UInt8]?, rows: [(key: String, json: [UInt8])]) {
        projection = ProjectionInfoOutput(info)
        self.document = OrNull(document.map { PayloadOutput(bytes: $0) })
        self.rows = rows.map { Row(key: $0.key, row: PayloadOutput(bytes: $0.json)) }
    }
}

/// `verify --json`. A store that cannot be read at all has only `healthy`, `findings` and
/// `warnings` (the counts are absent, not zero).
struct VerifyOutput: Encodable {
    var healthy: Bool
    var eventsChecked: Int?
    var firstSequence: UInt64?
    var headSequence: UInt64?
    var snapshotsChecked: Int?
    var findings: [String]
    var warnings: [String]

    init(_ report: VerificationReport) {
        healthy = report.isHealthy
        eventsChecked = report.eventsChecked
        firstSequence = report.firstSequence
        headSequence = report.headSequence
        snapshotsChecked = report.snapshotsChecked
        findings = report.findings.map(\.description)
        warnings = report.warnings.map(\.description)
    }

    /// A store found damaged before it could be read.
    init(damaged findings: [String]) {
        healthy = false
        self.findings = findings
        warnings = []
    }
}

/// `compact --json`.
struct CompactionOutput: Encodable {
    var dryRun: Bool
    var snapshotSequence: OrNull<UInt64>
    var snapshotWritten: Bool
    var trimmedFrom: OrNull<UInt64>
    var trimmedThrough: OrNull<UInt64>
    var eventsTrimmed: Int
    var keysForgotten: Int
    var snapshotsDeleted: Int
    var chunks: Int
    var seconds: Double
    var blockers: [String]
    var expiredConsumers: [String]
    var firstSequence: UInt64
    var headSequence: UInt64

    init(_ r: CompactionReport) {
        dryRun = r.dryRun
        snapshotSequence = OrNull(r.snapshotSequence)
        snapshotWritten = r.snapshotWritten
        trimmedFrom = OrNull(r.trimmed?.lowerBound)
        trimmedThrough = OrNull(r.trimmed?.upperBound)
        eventsTrimmed = r.eventsTrimmed
        keysForgotten = r.keysForgotten
        snapshotsDeleted = r.snapshotsDeleted
        chunks = r.chunks
        seconds = r.seconds
        blockers = r.blockers.map(\.description)
        expiredConsumers = r.expiredConsumers
        firstSequence = r.firstSequence
        headSequence = r.headSequence
    }
}

/// `compact --copy-to --json`.
struct CopyOutput: Encodable {
    var copyTo: String
    var fileBytes: Int
}

/// `consumers --json`, one per consumer.
struct ConsumerOutput: Encodable {
    var name: String
    var cursor: UInt64
    var lag: UInt64
    var lastSeen: String
    var leaseAgeSeconds: Double

    init(_ c: ConsumerInfo, now: Timestamp) {
        name = c.name
        cursor = c.cursor
        lag = c.lag
        lastSeen = c.lastSeen.iso8601
        leaseAgeSeconds = Double(now.micros - c.lastSeen.micros) / 1_000_000
    }
}
