import LMDB

// The ledger's per-directory state, attached to the environment (one per directory per
// process, shared by every handle): one key per kind, whose type fixes what it returns.

extension AttachmentKey where Value == CommitQueue {
    static let commitQueue = AttachmentKey("InboxLedger.CommitQueue")
}

extension AttachmentKey where Value == WidgetCache {
    static let widgetCache = AttachmentKey("InboxLedger.WidgetCache")
}

extension AttachmentKey where Value == OffPoolWorker {
    /// The thread of the async reads.
    static let readWorker = AttachmentKey("InboxLedger.OffPoolWorker")
}

extension AttachmentKey where Value == ChangeMonitor {
    static let changeMonitor = AttachmentKey("InboxLedger.ChangeMonitor")
}

extension AttachmentKey where Value == TemporaryLedgerDirectory {
    /// Removes a temporary ledger's directory when the last handle is gone.
    static let temporaryDirectory = AttachmentKey("InboxLedger.TemporaryDirectory")
}
