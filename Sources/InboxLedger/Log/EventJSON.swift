import Foundation

/// The JSON form of an event, one per line: `{"type": "<name>", "data": <any JSON>, "key": "<optional>"}`.
///
/// `data` is stored as canonical JSON (sorted keys, no insignificant whitespace), so the same
/// content always gives the same payload bytes and idempotent retries are recognised.
///
/// ```swift
/// let event = try EventJSON.parse(#"{"type":"badge.adjusted","data":{"delta":1},"key":"push-7"}"#)
/// ```
public enum EventJSON {
    /// Parses one JSON line into an event. `index` names the event in errors.
    public static func parse(_ line: some StringProtocol, index: Int = 0) throws(LedgerError) -> NewEvent {
        try parse(Data(line.utf8), index: index)
    }

    /// Parses one JSON document (UTF-8 bytes) into an event.
    public static func parse(_ data: Data, index: Int = 0) throws(LedgerError) -> NewEvent {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw .invalidEvent(index: index, field: "json", reason: "malformed JSON")
        }
        guard let fields = object as? [String: Any] else {
            throw .invalidEvent(index: index, field: "json", reason: "expected an object like {\"type\": …, \"data\": …}")
        }
        for name in fields.keys where !["type", "data", "key"].contains(name) {
            throw .invalidEvent(index: index, field: name, reason: "unknown field (expected type, data, key)")
        }
        guard let typeValue = fields["type"] else { throw .invalidEvent(index: index, field: "type", reason: "missing") }
        guard let type = typeValue as? String else { throw .invalidEvent(index: index, field: "type", reason: "must be a string") }
        guard let dataValue = fields["data"] else { throw .invalidEvent(index: index, field: "data", reason: "missing") }
        var key: String?
        if let keyValue = fields["key"], !(keyValue is NSNull) {
            guard let k = keyValue as? String else { throw .invalidEvent(index: index, field: "key", reason: "must be a string") }
            key = k
        }
        return NewEvent(type: type, payload: try canonical(dataValue, index: index), key: key)
    }

    /// The canonical form of a JSON document (sorted keys, no insignificant whitespace).
    static func canonicalize(_ bytes: [UInt8]) throws(LedgerError) -> [UInt8] {
        let value: Any
        do { value = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) } catch {
            throw .invalidEvent(index: 0, field: "data", reason: "malformed JSON")
        }
        return try canonical(value, index: 0)
    }

    /// Canonical JSON bytes of a ``JSONValue``.
    static func encodeCanonical(_ value: JSONValue) throws(LedgerError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do { return try canonicalize(Array(encoder.encode(value))) } catch {
            throw .invalidEvent(index: 0, field: "data", reason: "cannot be encoded as JSON")
        }
    }

    /// Canonical JSON bytes of a parsed JSON value.
    static func canonical(_ value: Any, index: Int) throws(LedgerError) -> [UInt8] {
        do {
            let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
            return Array(data)
        } catch {
            throw .invalidEvent(index: index, field: "data", reason: "cannot be encoded as JSON")
        }
    }
}
