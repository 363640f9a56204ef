extension LedgerMaintenance {
    /// Every snapshot, oldest first.
    public func snapshots() throws(LedgerError) -> [SnapshotInfo] {
        try read("list snapshots") { tables in try tables.snapshots.headers() }
    }

    /// Writes a compacted copy of the whole environment into `directory` (created if missing,
    /// must be empty): LMDB's compacting copy, the offline way to shrink a ledger's file.
    public func compactCopy(to directory: String) throws(LedgerError) {
        if let code = FileSystem.createDirectories(directory) {
            throw .storage(path: directory, operation: "create directory", code: code, message: FileSystem.errorMessage(code))
        }
        guard FileSystem.entries(of: directory)?.isEmpty ?? false else {
            throw .notALedger(path: directory, reason: "the copy's directory must be empty")
        }
        try store.compactingCopy(to: directory)
    }
}
