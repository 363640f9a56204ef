/// Stored type names with a version: `name` is version 1, `name@N` version N ≥ 2.
enum EventTypeName {
    static func stored(_ name: String, version: Int) -> String { version <= 1 ? name : "\(name)@\(version)" }

    /// The base name and version of a stored type name.
    static func parse(_ stored: String) -> (name: String, version: Int) {
        var scanned = stored  // `withUTF8` needs a variable; a native string is not copied
        // Most types have no version: one scan of the contiguous bytes says so.
        guard scanned.withUTF8({ $0.contains(UInt8(ascii: "@")) }), let at = stored.utf8.lastIndex(of: UInt8(ascii: "@")) else { return (stored, 1) }
        let suffix = stored[stored.index(after: at)...]
        guard let version = Int(suffix), version >= 2, String(version) == suffix else { return (stored, 1) }
        return (String(stored[..<at]), version)
    }
}

/// Upgrades the payload of one app-defined event type from one version to the next, applied
/// to events as they are read (``LedgerOptions/upcasters``): stored bytes never change, so
/// idempotency digests, checksums and other processes are unaffected.
///
/// ```swift
/// // Version 1 stored {"text": …}; version 2 has {"body": …, "pinned": false}.
/// var options = LedgerOptions(role: "app")
/// options.upcasters = [
///     EventUpcaster(NoteAddedV1.self, to: NoteAdded.self) { old in NoteAdded(noteID: old.noteID, body: old.text, pinned: false) },
/// ]
/// ```
public struct EventUpcaster: Sendable {
    /// The base type name it applies to.
    public let eventType: String
    /// The version it reads; it produces `fromVersion + 1`.
    public let fromVersion: Int
    let transform: @Sendable ([UInt8]) throws -> [UInt8]

    /// An upcaster of `eventType` payloads from `fromVersion` to the next version, working on
    /// the JSON value (its result is stored canonically in the event read).
    public init(eventType: String, fromVersion: Int, _ transform: @escaping @Sendable (JSONValue) throws -> JSONValue) {
        self.eventType = eventType
        self.fromVersion = fromVersion
        self.transform = { bytes in
            try EventJSON.encodeCanonical(try transform(try JSONParser.parse(bytes)))
        }
    }
}
