/// A read model an app defines over its own events, kept by the ledger in the same write
/// transaction as every append that touches it (docs/apps.md, "Your own read models";
/// docs/semantics.md, "App projections").
///
/// A projection has keyed rows (one per task, per note, …) and one document (counts, a
/// "last changed" stamp, …), both `Codable` and stored as JSON, so `ledger projection DIR NAME`
/// can show them without the app's code. ``apply(_:to:)`` must be a pure function of the event
/// and the state: it runs in every process that registers the projection, again when the
/// projection is rebuilt, and by `verify`.
///
/// ```swift
/// struct TaskList: LedgerProjection {
///     struct Row: Codable, Sendable, Equatable {
///         var title: String
///         var day: Int64
///         var done: Bool
///     }
///     struct Document: Codable, Sendable, Equatable {
///         var open = 0
///         var done = 0
///     }
///     static let name = "com.example.tasks"
///     static let version = 1   // raise it when apply, order or a shape changes: the list is rebuilt
///     static let eventTypes: Set<String> = [TaskAdded.eventType, TaskDone.eventType]
///     static let initialDocument = Document()
///
///     static func order(of row: Row, key: String) -> ProjectionOrder? {
///         ProjectionOrder(.bool(row.done), .int(row.day), .string(row.title))
///     }
///
///     /// A pure function of the event and the state: every process runs it, and a rebuild again.
///     static func apply(_ event: Event, to state: inout ProjectionUpdate<TaskList>) throws {
///         switch event.baseType {
///         case TaskAdded.eventType:
///             let added = try event.decode(as: TaskAdded.self)
///             if let old = try state.row(added.id) {   // added again: replaced
///                 if old.done { state.document.done -= 1 } else { state.document.open -= 1 }
///             }
///             try state.set(Row(title: added.title, day: added.day, done: false), for: added.id)
///             state.document.open += 1
///         default:
///             let done = try event.decode(as: TaskDone.self)
///             guard var row = try state.row(done.id), !row.done else { return }   // unknown, or done already
///             row.done = true
///             try state.set(row, for: done.id)
///             state.document.open -= 1
///             state.document.done += 1
///         }
///     }
/// }
/// ```
///
/// Every process registers it, and reads it in one short read transaction:
///
/// ```swift
/// var options = LedgerOptions(role: "widget")
/// options.projections = [TaskList.self]
/// let ledger = try Ledger(path: path, options: options)
/// try ledger.append(TaskDone(id: "t1"))                    // the row changes in the same transaction
/// let today = try ledger.read { try $0.projection(TaskList.self).rows(limit: 10) }   // one short read transaction
/// ```
public protocol LedgerProjection: Sendable {
    /// One keyed row.
    associatedtype Row: Codable & Sendable & Equatable
    /// The one document beside the rows (``NoProjectionDocument`` when there is none).
    associatedtype Document: Codable & Sendable & Equatable = NoProjectionDocument

    /// Its name: 1–64 bytes of lowercase ASCII letters, digits, `.`, `-` and `_`, unique in the ledger.
    static var name: String { get }
    /// Its version, from 1: raise it whenever ``apply(_:to:)``, ``order(of:key:)`` or the
    /// stored shapes change, and the projection is rebuilt from the log (docs/semantics.md,
    /// "App projections": the version rule).
    static var version: Int { get }
    /// The base type names (``Event/baseType``) of the events it reads; others are never passed
    /// to ``apply(_:to:)``.
    static var eventTypes: Set<String> { get }
    /// The document before the first event.
    static var initialDocument: Document { get }
    /// The order ``Ledger/projectionRows(_:from:limit:)`` lists rows in; nil (the default):
    /// by key.
    static func order(of row: Row, key: String) -> ProjectionOrder?
    /// Applies one event to the state. Throwing while the event is appended
    /// (``ProjectionUpdate/context`` is ``ProjectionApplyContext/appending``) refuses the append
    /// that carries it, nothing of it written
    /// (``LedgerError/projectionRejected(name:sequence:type:reason:)``); throwing for an event
    /// already in the log (``ProjectionApplyContext/replaying``: appended by a process without
    /// this version, or read again by a build) skips that event, and the projection's record
    /// counts it (docs/semantics.md, "App projections").
    static func apply(_ event: Event, to state: inout ProjectionUpdate<Self>) throws
}

extension LedgerProjection {
    /// By key.
    public static func order(of row: Row, key: String) -> ProjectionOrder? { nil }
}

extension LedgerProjection where Document == NoProjectionDocument {
    /// The empty document.
    public static var initialDocument: NoProjectionDocument { NoProjectionDocument() }
}

/// The document of a projection that has only rows.
public struct NoProjectionDocument: Codable, Sendable, Hashable {
    /// The empty document.
    public init() {}
}

/// A sort order for a projection's rows: components compared in turn, each ascending unless
/// wrapped in ``Component/descending(_:)``; rows that tie are ordered by key.
///
/// ```swift
/// ProjectionOrder(.bool(row.done), .descending(.int(row.priority)), .string(row.title))
/// ```
public struct ProjectionOrder: Sendable, Hashable {
    /// One sort component.
    public indirect enum Component: Sendable, Hashable {
        case int(Int64)
        case double(Double)
        case string(String)
        case bool(Bool)
        /// The component in reverse order.
        case descending(Component)
    }

    /// The components' order-preserving bytes (docs/format.md, "App projections").
    let bytes: [UInt8]

    /// An order of `components`, compared in turn.
    public init(_ components: Component...) { self.init(components) }

    /// An order of `components`, compared in turn.
    public init(_ components: [Component]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(components.reduce(0) { $0 + Self.encodedCount($1) })
        for component in components { Self.encode(component, into: &bytes) }
        self.bytes = bytes
    }

    /// How many bytes `component` encodes to, a string's NUL bytes not counted (each takes one more).
    private static func encodedCount(_ component: Component) -> Int {
        switch component {
        case .bool: 2
        case .int, .double: 9
        case .string(let value): value.utf8.count + 3
        case .descending(let inner): encodedCount(inner)
        }
    }

    /// Prefix-free encodings (so a component's complement sorts in reverse, and the row key
    /// appended after the last one breaks ties).
    private static func encode(_ component: Component, into bytes: inout [UInt8]) {
        switch component {
        case .bool(let value):
            bytes.append(0x10)
            bytes.append(value ? 1 : 0)
        case .int(let value):
            bytes.append(0x20)
            appendBigEndian(UInt64(bitPattern: value) ^ (1 << 63), to: &bytes)
        case .double(let value):
            let bits = (value == 0 ? 0.0 : value).bitPattern  // -0 and 0 are one value
            bytes.append(0x30)
            appendBigEndian(bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63), to: &bytes)
        case .string(let value):
            bytes.append(0x40)
            for byte in value.utf8 {
                bytes.append(byte)
                if byte == 0 { bytes.append(0xFF) }
            }
            bytes.append(0x00)
            bytes.append(0x01)
        case .descending(let inner):
            let start = bytes.count
            encode(inner, into: &bytes)
            for i in start..<bytes.count { bytes[i] = ~bytes[i] }
        }
    }

    private static func appendBigEndian(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }
}

/// The state ``LedgerProjection/apply(_:to:)`` reads and changes: rows by key and the document.
/// Changes are kept in memory until every event of the append applied without throwing, then
/// written in the append's transaction.
public struct ProjectionUpdate<P: LedgerProjection> {
    // Its members are inlinable so an app's `apply` runs them specialized for its own `Row`
    // (unspecialized, the dictionary of changes cost a quarter of a build's apply: ledger-bench
    // W9-U profile, docs/benchmarks.md).
    /// The stored state under the changes.
    @usableFromInline let stored: any ProjectionRowSource
    /// Rows changed so far (nil: removed).
    @usableFromInline var changed: [String: P.Row?] = [:]
    /// The document as changed so far.
    public var document: P.Document
    /// Whether the event is being appended now by this process or is in the log already (or
    /// came down the user's feed): what a throw from ``LedgerProjection/apply(_:to:)`` does.
    public internal(set) var context: ProjectionApplyContext
    /// Where the event being applied stands in the user's order across devices: this
    /// device's own and not shared, shared and not yet placed by the user's feed, or placed at
    /// its feed position (docs/semantics.md, "Custom events on every device").
    public internal(set) var placement: EventPlacement = .local
    /// While the state holds pending shared events: what each row was before them (a row's
    /// first change is recorded, so that the next rebase restores it).
    @usableFromInline var undo: (any ProjectionRowRecorder<P.Row>)?

    init(stored: any ProjectionRowSource, context: ProjectionApplyContext) throws(LedgerError) {
        self.stored = stored
        self.context = context
        self.document = try stored.document(P.self) ?? P.initialDocument
    }

    /// The row under `key`, with the changes made so far.
    @inlinable
    public func row(_ key: String) throws -> P.Row? {
        if let change = changed[key] { return change }
        return try stored.row(P.self, key)
    }

    /// Stores `row` under `key` (1–256 bytes of UTF-8).
    @inlinable
    public mutating func set(_ row: P.Row, for key: String) throws {
        try ProjectionRowKey.check(key, projection: P.name)
        if let undo { undo.recordFirst(key) { try self.row(key) } }
        changed[key] = .some(row)
    }

    /// Removes the row under `key`, if there is one.
    @inlinable
    public mutating func removeRow(_ key: String) {
        if let undo { undo.recordFirst(key) { try self.row(key) } }
        changed[key] = .some(nil)
    }
}

/// Records a row's value before its first change (``ProjectionUpdate``'s undo, kept while
/// shared events are pending: the engine's `ProjectionUndo`).
@usableFromInline
protocol ProjectionRowRecorder<Row>: AnyObject {
    associatedtype Row
    /// Records `key`'s value before its first change (`current`), unless recorded already.
    func recordFirst(_ key: String, _ current: () throws -> Row?)
}

/// Where an event stands in the user's order across devices, as ``LedgerProjection/apply(_:to:)``
/// sees it (``ProjectionUpdate/placement``; docs/semantics.md, "Custom events on every device").
///
/// ```swift
/// static func apply(_ event: Event, to state: inout ProjectionUpdate<SyncedNotes>) throws {
///     let edit = try event.decode(as: NoteEdited.self)
///     let synced = if case .pending = state.placement { false } else { true }   // "not synced yet" until the feed places it
///     try state.set(Row(text: edit.text, synced: synced), for: edit.noteID)
/// }
/// ```
public enum EventPlacement: Sendable, Hashable {
    /// This device's own event of a type it does not share: in this device's order.
    case local
    /// This device's own shared event that the user's feed has not placed yet: applied on top
    /// of what the feed placed, and applied again at its place once the feed places it.
    case pending
    /// An event the user's feed placed at `feedPosition` (another device's, the backend's, or
    /// this device's own once confirmed): applied in the feed's order, the same on every device.
    case confirmed(feedPosition: UInt64)
}

/// How ``LedgerProjection/apply(_:to:)`` sees an event (``ProjectionUpdate/context``), and so
/// what its throw does (docs/semantics.md, "App projections").
///
/// ```swift
/// struct Completions: LedgerProjection {
///     struct Row: Codable, Sendable, Equatable { var done: Bool }
///     struct UnknownTask: Error { var id: String }
///     static let name = "com.example.completions"
///     static let version = 1
///     static let eventTypes: Set<String> = [TaskDone.eventType]
///     static func apply(_ event: Event, to state: inout ProjectionUpdate<Completions>) throws {
///         let done = try event.decode(as: TaskDone.self)
///         // This process's own completion of an unknown task is refused; another's is skipped.
///         if try state.row(done.id) == nil, state.context == .appending { throw UnknownTask(id: done.id) }
///         try state.set(Row(done: true), for: done.id)
///     }
/// }
/// ```
public enum ProjectionApplyContext: Sendable, Hashable {
    /// The event is being appended by this process: a throw refuses the append, nothing of it
    /// is written.
    case appending
    /// The event is in the log already — appended by a process that does not keep this
    /// version, or read again by a build, a read's catch-up or `verify` — or is not this
    /// process's own: another device's from the user's feed, or this device's pending shared
    /// event applied again on another state (docs/semantics.md, "Custom events on every
    /// device"): a throw skips it (its
    /// changes are dropped, the next events are applied), and the projection's record counts
    /// it (`ledger inspect`, ``ProjectionInfo/skippedEvents``).
    case replaying
}

/// Where a ``ProjectionUpdate`` reads the state under its changes (the store's reader of the
/// projection's table, or an overlay of it).
@usableFromInline
protocol ProjectionRowSource {
    /// The stored document of `P`, if one was set.
    func document<P: LedgerProjection>(_: P.Type) throws(LedgerError) -> P.Document?
    /// The stored row of `P` under `key`.
    func row<P: LedgerProjection>(_: P.Type, _ key: String) throws(LedgerError) -> P.Row?
}

/// The rule for a row's key: 1–256 bytes of UTF-8 (docs/format.md, "App projections").
@usableFromInline
enum ProjectionRowKey {
    /// The longest key, in bytes.
    static let maxBytes = 256

    /// Throws unless `key` is 1–``maxBytes`` bytes.
    @usableFromInline
    static func check(_ key: String, projection: String) throws(LedgerError) {
        let count = key.utf8.count
        guard (1...maxBytes).contains(count) else {
            throw .invalidArgument(name: "row key of projection '\(projection)'", reason: "must be 1–\(maxBytes) bytes of UTF-8, got \(count)")
        }
    }
}
