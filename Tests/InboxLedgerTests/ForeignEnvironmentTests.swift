import Foundation
import Testing
import TestSupport
@testable import InboxLedger
@testable import LMDB

/// Another application's LMDB environment is never turned into a ledger (issue 22, item 5):
/// anything that is neither a ledger nor this library's own unfinished creation is refused with
/// `notALedger`, by the library and by `ledger append`, and not one byte of data.mdb changes.
@Suite(.serialized) struct ForeignEnvironmentTests {
    let cli = Processes.product("ledger")

    /// Builds an environment in a fresh directory with the LMDB layer.
    func environment(_ dir: TemporaryDirectory, tables: [String], _ body: (Environment) throws -> Void = { _ in }) throws -> String {
        let path = dir.child("theirs")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var config = EnvironmentConfiguration()
        config.databases = Dictionary(uniqueKeysWithValues: tables.map { ($0, DatabaseFlags()) })
        do {
            let env = try Environment.open(directory: path, configuration: config)
            try body(env)
        }
        return path
    }

    /// Opening with the library and appending with the CLI are refused; nothing changes.
    func expectRefused(_ path: String, mentioning text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let before = try #require(fileBytes(path + "/data.mdb"))
        do {
            _ = try Ledger(path: path, options: LedgerOptions(role: "app"))
            Issue.record("opened as a ledger", sourceLocation: sourceLocation)
        } catch {
            guard case .notALedger(let where_, let reason) = error else {
                Issue.record("expected notALedger, got \(error)", sourceLocation: sourceLocation)
                return
            }
            #expect(where_ == path && reason.contains(text), "\(reason)", sourceLocation: sourceLocation)
        }
        let out = try Processes.run("/bin/sh", ["-c", #"printf '%s\n' "$1" | "$2" append "$3""#, "sh", #"{"type":"app.note","data":{}}"#, cli, path], timeout: 60)
        #expect(!out.signalled && out.status == 3 && out.stdout.isEmpty, "append: \(out.status) \(out.stdout) \(out.stderr)", sourceLocation: sourceLocation)
        #expect(out.stderr.contains("not a ledger"), "\(out.stderr)", sourceLocation: sourceLocation)
        #expect(fileBytes(path + "/data.mdb") == before, "data.mdb changed", sourceLocation: sourceLocation)
    }

    /// Issue 22's report: an environment with its own `meta` table, made by `mdb_load`.
    @Test func anEnvironmentWithItsOwnMetaTableIsRefused() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("theirs")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let load = try Processes.run("/usr/bin/mdb_load", ["-T", "-s", "meta", path], input: Data("schema\n7\nowner\nmail-app\n".utf8))
        try #require(load.status == 0, "mdb_load: \(load.stderr)")
        try expectRefused(path, mentioning: "'meta' table has 2 entries")
    }

    /// The same with the LMDB layer, and a `meta` table holding a ledger-looking key but not the
    /// format version.
    @Test func aMetaTableWithoutTheLedgersIdentityIsRefused() throws {
        let dir = TemporaryDirectory()
        let path = try environment(dir, tables: ["meta", "events"]) { env in
            let meta = try env.database("meta")
            try env.write { try $0.put(meta, key: Array("head".utf8), value: [0, 0, 0, 0, 0, 0, 0, 9]) }
        }
        try expectRefused(path, mentioning: "not the ledger's identity")
    }

    @Test(arguments: [["meta", "items"], ["items"], ["events", "mail"]])
    func anEnvironmentWithOtherTablesIsRefused(tables: [String]) throws {
        let dir = TemporaryDirectory()
        let path = try environment(dir, tables: tables)
        try expectRefused(path, mentioning: "tables a ledger does not have")
    }

    /// Every table gone, but transactions were committed: not a creation of this library.
    @Test func anEmptyEnvironmentWithCommittedTransactionsIsRefused() throws {
        let dir = TemporaryDirectory()
        let path = try environment(dir, tables: []) { env in
            // LMDB's MAIN_DBI: listing the names first opens it (mdb_dbi_open with no name sets
            // its comparison function; a put without it calls a null pointer).
            let main = Database(name: "", handle: 1)
            _ = try env.namedDatabases()
            try env.write { try $0.put(main, key: Array("k".utf8), value: [1]) }
            _ = try env.namedDatabases()
            try env.write { _ = try $0.delete(main, key: Array("k".utf8)) }
        }
        #expect(try Environment.open(directory: path).info().lastTransactionID == 2)
        try expectRefused(path, mentioning: "2 committed transaction(s)")
    }

    /// An environment with only an empty `meta` table (this library's creation makes every table
    /// in its first transaction).
    @Test func anEmptyMetaTableAloneIsRefused() throws {
        let dir = TemporaryDirectory()
        let path = try environment(dir, tables: ["meta"])
        try expectRefused(path, mentioning: "only some of the ledger's tables")
    }

    /// What this library's creation leaves is still finished: a fresh environment (transaction
    /// 0), and every table of the ledger committed empty (its first transaction) — by another
    /// process, as when a creator dies between its two transactions.
    @Test(arguments: ["fresh", "tables"])
    func thisLibrarysUnfinishedCreationIsFinished(state: String) throws {
        let dir = TemporaryDirectory()
        let path = try environment(dir, tables: state == "fresh" ? [] : Schema.allNames)
        let out = try Processes.run("/bin/sh", ["-c", #"printf '%s\n' "$1" | "$2" append "$3""#, "sh", #"{"type":"app.note","data":{}}"#, cli, path], timeout: 60)
        #expect(out.status == 0 && out.stdout.contains("1"), "\(out.status) \(out.stderr)")
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "check"))
        #expect(try ledger.read({ try $0.count() }) == 1)
        #expect(try ledger.maintenance.verify().isHealthy)
    }
}
