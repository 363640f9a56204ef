@testable import InboxLedger
import LMDB

/// What the tests read of a handle's store, under the name they used when the LMDB environment
/// was a member of `Ledger` (it is private to ``LedgerStore`` now).
struct StoreProbe {
    let store: LedgerStore

    /// The durability the last write committed with.
    var durability: Durability { store.lastCommitDurability }

    /// Walks every page of the file.
    func walkPages() throws -> PageWalkReport { try store.walkPages() }
}

extension Ledger {
    var environment: StoreProbe { StoreProbe(store: store) }
}
