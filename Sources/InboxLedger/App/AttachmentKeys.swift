// The app layer's per-directory state, attached to the environment (one per directory per
// process, shared by every handle; the façade's own keys are in Ledger.swift).

extension AttachmentKey where Value == TemporaryLedgerDirectory {
    /// Removes a temporary ledger's directory when the last handle is gone.
    static let temporaryDirectory = AttachmentKey("InboxLedger.TemporaryDirectory")
}
