// The built-in event types own their names and their namespace (docs/events.md, "Type names"):
// appends refuse a custom type that is, or could become, a built-in one; a ledger records from
// which sequence each later built-in type is built-in, so the events an older library stored
// under that name as custom events stay custom events when the log is replayed.

extension BuiltInEventType {
    /// The namespaces the built-in types own: the first segment of a type name (the part
    /// before the first `.` or `@`), compared case-insensitively. A custom type may not start
    /// with one of them: the names are kept for built-in types of later versions.
    ///
    /// ```swift
    /// BuiltInEventType.isReserved("message.archived")        // true: refused as a custom type
    /// BuiltInEventType.isReserved("Message.Read")            // true
    /// BuiltInEventType.isReserved("com.example.note-saved")  // false: yours
    /// ```
    public static let reservedNamespaces: Set<String> = Set(["inbox", "message", "widget", "action", "badge", "push"])
        .union(allCases.map { namespace(of: $0.rawValue) })

    /// Whether `typeName` lies in the built-ins' namespace (``reservedNamespaces``) — built-in
    /// names themselves included. Only the exact built-in names may be appended there.
    public static func isReserved(_ typeName: String) -> Bool {
        reservedNamespaces.contains(namespace(of: typeName))
    }

    /// The first segment of a type name, lower-cased (ASCII): `message` for `Message.Read@2`.
    static func namespace(of typeName: String) -> String {
        let end = typeName.firstIndex { $0 == "." || $0 == "@" } ?? typeName.endIndex
        return typeName[..<end].lowercased()
    }

    /// Refuses a type name that is not an exact built-in name but lies in the built-ins'
    /// namespace; `index` names the event of the batch.
    static func checkCustomName(_ type: String, index: Int) throws(LedgerError) {
        guard BuiltInEventType(rawValue: type) == nil, isReserved(type) else { return }
        let advice = "name custom types in a namespace of your own, e.g. com.example.note-saved (docs/events.md, \"Type names\")"
        if let builtIn = allCases.first(where: { $0.rawValue.lowercased() == type.lowercased() }) {
            throw .invalidEvent(index: index, field: "type", reason: "'\(type)' differs from the built-in type '\(builtIn.rawValue)' only in case; built-in names are exact, and \(advice)")
        }
        let owned = reservedNamespaces.sorted().joined(separator: ", ")
        throw .invalidEvent(index: index, field: "type", reason: "'\(type)' is in the namespace '\(namespace(of: type))' reserved for built-in event types (first segment \(owned), in any case); \(advice)")
    }

    /// The types every library version interpreted (projection rules 1): events of these
    /// names are built-in events wherever they are stored. A later built-in type is built-in
    /// only from the sequence its ledger recorded for it (``Ledger/recordBuiltInTypes()``).
    static let original: Set<BuiltInEventType> = [.inboxSynced, .messageRead, .widgetAction, .actionCompleted, .badgeAdjusted]

    /// Whether this type was built-in in every library version (``original``).
    var isOriginal: Bool { Self.original.contains(self) }
}

/// From which sequence each later built-in type is interpreted as built-in in one ledger: the
/// events stored before that under the same name were appended by a library that knew the
/// name only as a custom type (and did not validate it), so replay keeps them custom.
struct BuiltInBoundaries: Sendable {
    /// The first built-in sequence of each non-original type; absent: never recorded, so no
    /// event of the name was appended as built-in.
    var since: [BuiltInEventType: UInt64]

    /// How the event stored at `sequence` is interpreted: a custom event if its name is not
    /// built-in or was not yet built-in when it was stored, else its validated built-in payload.
    func domainEvent(type: String, payload: [UInt8], sequence: UInt64) throws(LedgerError) -> DomainEvent {
        if let builtIn = BuiltInEventType(rawValue: type), !builtIn.isOriginal, sequence < since[builtIn] ?? .max {
            return .custom(type: type, payload: payload)
        }
        return try DomainEvent.decode(type: type, payload: payload)
    }
}
