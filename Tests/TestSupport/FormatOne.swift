import LMDB

/// Rewrites the closed ledger in `path` to format 1's layout (docs/format.md, "Format
/// versions"): `meta`'s `count:` rows move back into the `counters` table under `t:`/`o:`, and
/// `format-version` becomes 1 — what a library of format 1 left. Returns the rows moved.
public func rewriteAsFormatOne(_ path: String) throws -> Int {
    var configuration = EnvironmentConfiguration()
    configuration.databases = ["meta": DatabaseFlags(), "counters": DatabaseFlags()]
    let environment = try Environment.open(directory: path, configuration: configuration)
    let meta = try environment.database("meta")
    let counters = try environment.database("counters")
    let prefix = Array("count:".utf8)
    return try environment.write { txn in
        let rows = try txn.withCursor(meta) { cursor in
            var rows: [Entry] = []
            var entry = try cursor.seek(atLeast: prefix)
            while let e = entry, e.key.starts(with: prefix) { rows.append(e); entry = try cursor.next() }
            return rows
        }
        for row in rows {
            try txn.put(counters, key: Array(row.key.dropFirst(prefix.count)), value: row.value)
            _ = try txn.delete(meta, key: row.key)
        }
        try txn.put(meta, key: Array("format-version".utf8), value: [1, 0, 0, 0])
        return rows.count
    }
}
