#if canImport(FoundationEssentials)
import FoundationEssentials
#elseif canImport(Foundation)
import Foundation
#endif

/// An app's own event type: a `Codable` value stored as canonical JSON under ``eventType``.
///
/// ```swift
/// struct NoteAdded: LedgerEvent {
///     static let eventType = "com.example.note-added"
///     var noteID: String
///     var text: String
/// }
/// try ledger.append(NoteAdded(noteID: "n1", text: "Buy milk"), key: "note-n1")
/// let note = try ledger.read { try $0.events(after: 0) }.first { $0.type == NoteAdded.eventType }?.decode(as: NoteAdded.self)
/// ```
///
/// The payload is the value's **canonical** JSON (``CanonicalJSON``): object keys sorted, no
/// whitespace, numbers in one form. The same value therefore always gives the same bytes, so an
/// idempotent retry never conflicts by accident, whatever order a dictionary iterates in.
///
/// When the payload's shape changes, raise ``eventVersion`` and register an ``EventUpcaster``
/// from the old version (``LedgerOptions/upcasters``): events are stored with their version
/// (`type@2`; version 1 is the bare type) and upgraded as they are read.
public protocol LedgerEvent: Codable, Sendable {
    /// The type name, 1–128 bytes of printable ASCII without spaces and without `@`
    /// (reverse-DNS names keep an app's types apart from the built-in ones).
    static var eventType: String { get }
    /// The payload's shape version, from 1 (the default).
    static var eventVersion: Int { get }
}

extension LedgerEvent {
    /// Version 1.
    public static var eventVersion: Int { 1 }

    /// The type name the ledger stores: ``eventType`` for version 1, `eventType@N` after.
    public static var storedType: String { EventTypeName.stored(eventType, version: eventVersion) }
}


/// The canonical JSON the ledger stores: object keys sorted by their UTF-8 bytes, no
/// insignificant whitespace, integers without a fraction, doubles in their shortest exact
/// form. Equal values give equal bytes; idempotency keys compare these bytes.
///
/// ```swift
/// let bytes = try CanonicalJSON.encode(["b": 1, "a": 2])   // {"a":2,"b":1}
/// ```
public enum CanonicalJSON {
    /// The canonical JSON of `value`, with `JSONEncoder`'s default strategies: exactly the
    /// canonical form of what `JSONEncoder` writes, without writing it. Fails with
    /// ``LedgerError/invalidEvent(index:field:reason:)``, naming the field (`data.items[2].price`),
    /// when the value has no canonical JSON form (a non-finite number, an integer beyond 64 bits).
    public static func encode(_ value: some Encodable) throws(LedgerError) -> [UInt8] {
        do { return try LedgerJSONEncoder.encode(value) } catch let EncodingError.invalidValue(_, context) {
            throw .invalidEvent(index: 0, field: Event.fieldPath(context.codingPath), reason: "cannot be encoded as JSON: \(context.debugDescription)")
        } catch {
            throw .invalidEvent(index: 0, field: "data", reason: "cannot be encoded as JSON: \(error)")
        }
    }

    /// The canonical form of the JSON document `bytes`, validated as strictly as the ledger's
    /// input (exact numbers, no duplicate keys).
    public static func canonicalize(_ bytes: [UInt8]) throws(LedgerError) -> [UInt8] {
        try EventJSON.canonicalize(bytes)
    }
}

extension NewEvent {
    /// `event` as a ``NewEvent``: its stored type and canonical JSON payload.
    ///
    /// ```swift
    /// try ledger.append(contentsOf: [try NewEvent(NoteAdded(noteID: "n1", text: "Hi")), try NewEvent(NoteAdded(noteID: "n2", text: "Yo"))])
    /// ```
    public init<E: LedgerEvent>(_ event: E, key: String? = nil) throws(LedgerError) {
        let type = E.eventType
        guard E.eventVersion >= 1, !type.utf8.contains(UInt8(ascii: "@")) else {
            throw .invalidEvent(index: 0, field: "type", reason: "\(E.self): eventType may not contain '@' and eventVersion must be ≥ 1")
        }
        self.init(type: E.storedType, payload: try CanonicalJSON.encode(event), key: key)
    }
}

extension Event {
    /// The type name without its version suffix (`note.added` for `note.added@2`).
    public var baseType: String { EventTypeName.parse(type).name }

    /// The payload's shape version (1 for a type without an `@N` suffix).
    public var typeVersion: Int { EventTypeName.parse(type).version }

    /// Decodes the payload as `E`. Throws ``LedgerError/eventDecoding(sequence:type:field:reason:)``
    /// naming the sequence and the field when the event is of another type or version, or its
    /// payload does not decode (`field` is the path: `data.items[2].title`).
    ///
    /// ```swift
    /// for event in try ledger.read({ try $0.events(after: 0) }) where event.baseType == NoteAdded.eventType {
    ///     let note = try event.decode(as: NoteAdded.self)
    ///     print(note.text)
    /// }
    /// ```
    public func decode<E: LedgerEvent>(as: E.Type) throws(LedgerError) -> E {
        let (name, version) = EventTypeName.parse(type)
        guard name == E.eventType else {
            throw .eventDecoding(sequence: sequence, type: type, field: "type", reason: "is '\(name)', not \(E.self)'s '\(E.eventType)'")
        }
        guard version == E.eventVersion else {
            throw .eventDecoding(sequence: sequence, type: type, field: "type", reason: "is version \(version), \(E.self) is version \(E.eventVersion) (register an EventUpcaster from version \(version))")
        }
        do {
            return try LedgerJSONDecoder.decode(E.self, from: payload)
        } catch let error as DecodingError {
            let (path, reason) = Event.describe(error)
            throw .eventDecoding(sequence: sequence, type: type, field: path, reason: reason)
        } catch {
            throw .eventDecoding(sequence: sequence, type: type, field: "data", reason: String(describing: error))
        }
    }

    /// The field path of a coding path: `data.a[0].b`.
    static func fieldPath(_ keys: [any CodingKey], then last: (any CodingKey)? = nil) -> String {
        var text = "data"
        for key in keys + (last.map { [$0] } ?? []) {
            if let index = key.intValue { text += "[\(index)]" } else { text += "." + key.stringValue }
        }
        return text
    }

    /// The field path (`data.a[0].b`) and the reason of a decoding error.
    static func describe(_ error: DecodingError) -> (String, String) {
        switch error {
        case .keyNotFound(let key, let context): return (fieldPath(context.codingPath, then: key), "missing")
        case .typeMismatch(let type, let context): return (fieldPath(context.codingPath), "expected \(type): \(context.debugDescription)")
        case .valueNotFound(let type, let context): return (fieldPath(context.codingPath), "expected \(type), found null")
        case .dataCorrupted(let context): return (fieldPath(context.codingPath), context.debugDescription)
        @unknown default: return ("data", String(describing: error))
        }
    }
}

extension EventUpcaster {
    /// An upcaster from the `Old` type (its ``LedgerEvent/eventVersion``) to `New` (the next version).
    public init<Old: LedgerEvent, New: LedgerEvent>(_ old: Old.Type, to new: New.Type, _ convert: @escaping @Sendable (Old) throws -> New) {
        self.eventType = Old.eventType
        self.fromVersion = Old.eventVersion
        self.transform = { bytes in
            try CanonicalJSON.encode(try convert(try LedgerJSONDecoder.decode(Old.self, from: bytes)))
        }
    }
}
