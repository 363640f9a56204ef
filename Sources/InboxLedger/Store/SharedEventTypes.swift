import LMDB

/// The custom event types this ledger shares with the user's other devices, as the sync client
/// recorded them (``Ledger/shareEventTypes(_:)``): every process of the ledger marks its events
/// of these types ``EventSource/shared`` when it appends them, whatever its own configuration
/// (docs/semantics.md, "Custom events on every device").
struct SharedEventTypes: Sendable, Equatable {
    let types: Set<String>

    static let none = SharedEventTypes(types: [])

    func contains(_ type: String) -> Bool { !types.isEmpty && types.contains(type) }

    /// The stored form: the names sorted, one per line.
    var encoded: String { types.sorted().joined(separator: "\n") }

    init(types: Set<String>) { self.types = types }

    init(encoded: String) { types = Set(encoded.split(separator: "\n").map(String.init)) }
}

extension Schema.MetaKey {
    /// `shared-types`: ``SharedEventTypes`` (docs/format.md).
    static let sharedTypes = Array("shared-types".utf8)
}

extension Meta {
    static let sharedTypes = MetaField<MetaEncodings.Text>(Schema.MetaKey.sharedTypes)
}

extension MetaRecord {
    /// The custom types the ledger shares (none when the sync client never recorded any).
    func sharedTypes() throws -> SharedEventTypes {
        try get(Meta.sharedTypes).map(SharedEventTypes.init(encoded:)) ?? .none
    }
}
