// The shared custom types, as the sync client records them (docs/sync.md, "Custom events on
// every device").

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
