extension Ledger {
    /// Brings a ledger written by an older format up to ``Schema/formatVersion`` in one write
    /// transaction, unless another process did it first (``StoreTransaction/upgradeFormat()``).
    /// Called by a writable opening before the handle is returned; a crash or a power cut
    /// before the commit leaves the old format whole, and the next writable opening starts again.
    func upgradeFormat() throws(LedgerError) {
        try store.write("upgrade format", durability: .durable) { tables in try tables.upgradeFormat() }
    }

    /// Runs the upgrade on the ledger in `path` without a `Ledger` handle (whose opening would
    /// upgrade at once), calling `beforeCommit` inside the transaction just before it commits:
    /// the crash tests kill the process there.
    @_spi(Testing) public static func upgradeFormat(path: String, beforeCommit: () -> Void) throws {
        try LedgerStore.withUnopenedStore(path: path) { tables in
            try tables.upgradeFormat()
            beforeCommit()
        }
    }

    /// Rebuilds every projection by this library's rules in one write transaction (other
    /// processes see the old projections until it commits, then the new ones), unless another
    /// process did it first (``ProjectionRebuild/upgrade(_:)``).
    func upgradeProjections() throws(LedgerError) {
        try store.write("upgrade projections") { tables in try projectionRebuild.upgrade(tables) }
        access.widgetCache.forget()
    }

    /// Records the later built-in types the ledger has no boundary for
    /// (``MetaRecord/recordBuiltInTypes(from:)``), in its own write transaction, only if one
    /// is missing: at every writable opening, before this handle appends.
    func recordBuiltInTypes() throws(LedgerError) {
        guard try store.read("read the built-in types", { tables in try tables.meta.missesBuiltInTypes() }) else { return }
        try store.write("record the built-in types") { tables in try tables.meta.recordBuiltInTypes(from: tables.head() + 1) }
    }
}
