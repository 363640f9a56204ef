extension Ledger {
    /// Makes sure descriptors 0–2 are open, on `/dev/null` where they were closed (a process
    /// started with `>&- 2>&-`, by some launchers and daemons), so that no file or pipe takes
    /// them: what the process prints would go there. Every ledger opening does it before it
    /// opens a file; call it at the start of a program that opens files or pipes of its own
    /// before its first ledger (docs/operations.md, "Started with descriptors 0–2 closed").
    public static func ensureStandardDescriptors() throws(LedgerError) {
        try LedgerStore.ensureStandardDescriptors()
    }
}
