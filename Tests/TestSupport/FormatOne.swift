import LMDB

/// The projection tables, the tree format 3 keeps each in and the prefix of its rows there
/// (docs/format.md, "The projection tables in two trees"), written down here from the
/// documentation, not taken from the library.
public let projectionTablesInFormat3: [(name: String, tree: String, prefix: [UInt8])] = [
    ("messages", "counters", [0x00, 0x01]), ("widget", "counters", [0x00, 0x02]), ("expiry", "counters", [0x00, 0x03]),
    ("actions", "counters", [0x00, 0x04]), ("action-ids", "counters", [0x00, 0x05]),
    ("state", "meta", Array("head".utf8) + [0x00]), ("local", "counters", [0x00, 0x07]),
    ("app-projections", "counters", [0x00, 0x08]),
]

/// Rewrites the closed ledger in `path` to format 2's layout: every projection table's rows
/// move out of format 3's two trees back into the table's own named database, and
/// `format-version` becomes 2 — what a library of format 2 left. Returns the rows moved.
public func rewriteAsFormatTwo(_ path: String) throws -> Int {
    try rewrite(path, format: 2)
}

/// Rewrites the closed ledger in `path` to format 1's layout (docs/format.md, "Format
/// versions"): format 2's, and `meta`'s `count:` rows move back into the `counters` table under
/// `t:`/`o:`, and `format-version` becomes 1 — what a library of format 1 left. Returns the
/// counter rows moved.
public func rewriteAsFormatOne(_ path: String) throws -> Int {
    try rewrite(path, format: 1)
}

private func rewrite(_ path: String, format: UInt8) throws -> Int {
    var configuration = EnvironmentConfiguration()
    configuration.databases = ["meta": DatabaseFlags(), "counters": DatabaseFlags()]
    for table in projectionTablesInFormat3 { configuration.databases[table.name] = DatabaseFlags() }
    let environment = try Environment.open(directory: path, configuration: configuration)
    let meta = try environment.database("meta")
    /// Moves the rows of `tree` under `prefix` into `table` without the prefix.
    func move(_ prefix: [UInt8], from tree: Database, into table: Database, _ txn: Transaction) throws -> Int {
        let rows = try txn.withCursor(tree) { cursor in
            var rows: [Entry] = []
            var entry = try cursor.seek(atLeast: prefix)
            while let e = entry, e.key.starts(with: prefix) { rows.append(e); entry = try cursor.next() }
            return rows
        }
        for row in rows {
            try txn.put(table, key: Array(row.key.dropFirst(prefix.count)), value: row.value)
            _ = try txn.delete(tree, key: row.key)
        }
        return rows.count
    }
    return try environment.write { txn in
        var moved = 0
        for table in projectionTablesInFormat3 {
            moved += try move(table.prefix, from: try environment.database(table.tree), into: try environment.database(table.name), txn)
        }
        if format == 1 { moved = try move(Array("count:".utf8), from: meta, into: try environment.database("counters"), txn) }
        try txn.put(meta, key: Array("format-version".utf8), value: [format, 0, 0, 0])
        return moved
    }
}
