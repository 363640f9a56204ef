import LMDB

/// What an entry visitor does next (``LMDB/Transaction/forEachEntry(_:from:prefix:_:)``).
enum Visit {
    /// Go on to the next entry.
    case next
    /// Stop here.
    case stop
    /// Go on from the first entry whose key is at least this one.
    case seek([UInt8])
}

extension Transaction {
    /// Visits the entries of `database` in key order — from the first one, or from the first
    /// whose key is at least `start` — while their keys start with `prefix` and `body` says to
    /// go on. The one cursor loop of the ledger: each entry is a copy, so `body` may write
    /// (also to `database`; the walk then goes on from the cursor's position).
    func forEachEntry(_ database: Database, from start: [UInt8] = [], prefix: [UInt8] = [],
                      _ body: (Entry) throws -> Visit) throws {
        try withCursor(database) { cursor in
            var entry = start.isEmpty ? try cursor.first() : try cursor.seek(atLeast: start)
            while let e = entry, e.key.starts(with: prefix) {
                switch try body(e) {
                case .next: entry = try cursor.next()
                case .stop: return
                case .seek(let key): entry = try cursor.seek(atLeast: key)
                }
            }
        }
    }
}
