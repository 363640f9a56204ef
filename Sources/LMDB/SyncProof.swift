/// The newest transactions of the open file that this process can prove are on disk, and the
/// rule that keeps an acknowledgement true to its mode for every byte it names, whoever wrote
/// it (docs/lmdb.md rule 30).
///
/// A write transaction that changed nothing commits nothing and syncs nothing, yet its answer
/// may rest on what it read — a keyed replay answers with the sequence another process
/// committed, perhaps without a meta sync (`singleSync`) or without any (`none`). So after such
/// a commit, an answer in `durable` or `singleSync` mode needs `mdb_env_sync` unless this
/// process already proved that snapshot on disk. The proofs, from what LMDB does:
/// - a `durable` commit of transaction T that wrote pages syncs the data file (every process's
///   pages, earlier meta pages written without sync included: one page cache) and then writes
///   its meta page with `O_DSYNC`: everything up to T is on disk;
/// - a `singleSync` commit of T syncs the data file before writing its meta page without sync:
///   everything up to T − 1 is on disk, and T's pages;
/// - `mdb_env_sync(env, 1)` after reading snapshot S: everything up to S is on disk.
///
/// Transaction ids belong to one file: the proof is reset whenever the environment is (re)opened.
struct SyncProof: Equatable {
    /// Every transaction up to this id is on disk, meta page included (survives a power cut).
    var durable = 0
    /// The pages of every transaction up to this id are on disk: the `singleSync` standard (its
    /// meta page may be undone by a power cut, never leaving a corrupt file).
    var pages = 0

    /// Records a commit of transaction `id` that wrote pages in `mode`.
    mutating func committed(_ id: Int, mode: Durability) {
        switch mode {
        case .durable:
            durable = max(durable, id)
            pages = max(pages, id)
        case .singleSync:
            durable = max(durable, id - 1)
            pages = max(pages, id)
        case .none:
            break
        }
    }

    /// Whether an answer in `mode` that rests on snapshot `snapshot` needs a sync first.
    func needsSync(snapshot: Int, mode: Durability) -> Bool {
        switch mode {
        case .durable: snapshot > durable
        case .singleSync: snapshot > pages
        case .none: false
        }
    }

    /// Records `mdb_env_sync(env, 1)` made after `snapshot` was committed.
    mutating func synced(through snapshot: Int) {
        durable = max(durable, snapshot)
        pages = max(pages, snapshot)
    }
}
