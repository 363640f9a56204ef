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

@_spi(LedgerSync)
extension Ledger {
    /// Records the custom types the sync client shares (its configuration's, the built-in ones
    /// left out): from the next append on, every process marks its events of these types
    /// ``EventSource/shared``, and its app projections apply them on top of what the user's feed
    /// placed until the feed settles them (docs/semantics.md, "Custom events on every device").
    /// Writes nothing when the ledger records these already.
    public func shareEventTypes(_ types: Set<String>) throws(LedgerError) {
        let custom = SharedEventTypes(types: types.filter { !DomainEvent.builtInTypes.contains($0) })
        guard try sharedEventTypes() != custom.types else { return }
        try access.write("record the shared types") { tables in try tables.meta.put(Meta.sharedTypes, custom.encoded) }
    }

    /// The custom types the ledger shares (``shareEventTypes(_:)``).
    public func sharedEventTypes() throws(LedgerError) -> Set<String> {
        try access.read("read the shared types") { tables in try tables.meta.sharedTypes() }.types
    }
}
