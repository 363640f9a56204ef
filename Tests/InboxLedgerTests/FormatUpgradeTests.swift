import Foundation
import Testing
import TestSupport
@testable @_spi(Testing) import InboxLedger
import LMDB
import Synchronization

/// Formats 1 and 2 → 3: the event counters (format 1) move from their own table into `meta`, and
/// the projection tables (1 and 2) from their own tables into two trees (the state into `meta`,
/// the rows into the row tree). A writable opening upgrades in one transaction (once,
/// whichever process gets there first); a read-only opening reads the older format as it is and
/// writes nothing, and goes on reading when another process upgrades meanwhile; a crash inside
/// the upgrade leaves the older format whole; counts and projections are the same before, after,
/// and from then on.
@Suite struct FormatUpgradeTests {
    let agent = Processes.product("LedgerTestAgent")

    /// The counts by type and by role of the events in the log, counted by reading it (the
    /// model the stored counters must equal).
    func countedFromTheLog(_ ledger: Ledger) throws -> (byType: [String: UInt64], byRole: [String: UInt64]) {
        var byType: [String: UInt64] = [:]
        var byRole: [String: UInt64] = [:]
        var after: UInt64 = 0
        while true {
            let page = try ledger.read({ try $0.events(after: after, limit: 500) })
            guard let last = page.last else { return (byType, byRole) }
            for event in page {
                byType[event.type, default: 0] += 1
                byRole[event.origin.role, default: 0] += 1
            }
            after = last.sequence
        }
    }

    func expectCountsMatchTheLog(_ ledger: Ledger, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let statistics = try ledger.maintenance.statistics()
        let model = try countedFromTheLog(ledger)
        #expect(statistics.countsByType == model.byType, sourceLocation: sourceLocation)
        #expect(statistics.countsByOrigin == model.byRole, sourceLocation: sourceLocation)
    }

    /// The rows of the named database `name` (a projection table's own, in formats 1 and 2).
    func ownRows(_ path: String, _ name: String) throws -> Int {
        var configuration = EnvironmentConfiguration()
        configuration.readOnly = true
        configuration.databases = [name: DatabaseFlags()]
        let environment = try Environment.open(directory: path, configuration: configuration)
        return try environment.read { txn in try txn.statistics(environment.database(name)).entries }
    }

    /// What the stored layout holds: the format version, the rows of the `counters` table, the
    /// `count:` rows of `meta`.
    func stored(_ path: String) throws -> (format: UInt32, table: Int, meta: Int) {
        let layout = try storedLayout(path)
        return (layout.format, layout.counterTable, layout.counterRowsInMeta)
    }

    /// The stored layout in full: besides `stored(_:)` (the `counters` rows counted are format
    /// 1's, `t:` and `o:`), the rows of the projection tables in their own databases and under
    /// their prefixes in format 3's two trees (docs/format.md, "The projection tables in two trees").
    func storedLayout(_ path: String) throws -> (format: UInt32, counterTable: Int, counterRowsInMeta: Int, projectionTables: Int, projectionRowsInTrees: Int) {
        let tables = projectionTablesInFormat3.map(\.name)
        var configuration = EnvironmentConfiguration()
        configuration.readOnly = true
        configuration.databases = ["meta": DatabaseFlags(), "counters": DatabaseFlags()]
        for table in tables { configuration.databases[table] = DatabaseFlags() }
        let environment = try Environment.open(directory: path, configuration: configuration)
        let meta = try environment.database("meta")
        let counters = try environment.database("counters")
        return try environment.read { txn in
            let stored = try txn.get(meta, key: Array("format-version".utf8))
            let format = try #require(stored)
            func rows(_ prefix: [UInt8], in tree: Database) throws -> Int {
                try txn.withCursor(tree) { cursor in
                    var n = 0
                    var entry = try cursor.seek(atLeast: prefix)
                    while let e = entry, e.key.starts(with: prefix) { n += 1; entry = try cursor.next() }
                    return n
                }
            }
            let inTables = try tables.reduce(0) { n, table in n + (try txn.statistics(environment.database(table)).entries) }
            let inTrees = try projectionTablesInFormat3.reduce(0) { n, table in
                n + (try rows(table.prefix, in: environment.database(table.tree)))
            }
            return (UInt32(format[0]) | UInt32(format[1]) << 8,
                    try rows(Array("t:".utf8), in: counters) + rows(Array("o:".utf8), in: counters),
                    try rows(Array("count:".utf8), in: meta), inTables, inTrees)
        }
    }

    /// A ledger of mixed events from three roles, part of it trimmed (so counts were also
    /// subtracted), closed, then rewritten to format 1's layout: the counters in their own
    /// table under `t:`/`o:`, `format-version` 1. Returns the statistics' counts.
    func formatOneLedger(_ path: String) throws -> LedgerStatistics {
        do {
            let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
            try appendMixed(ledger, count: 300, seed: 11)
            let widget = try Ledger(path: path, options: LedgerOptions(role: "widget"))
            try appendMixed(widget, count: 120, seed: 12)
            try Compactor(ledger: ledger, policy: policy(tail: 200, chunk: 50)).runOnce()
            let ext = try Ledger(path: path, options: LedgerOptions(role: "notification-ext"))
            try appendMixed(ext, count: 40, seed: 13)
            // Rows of every kind of projection table: `local` (a push announcing a message no
            // listing has shown, a removal no listing has settled) and an app's projection.
            try ext.append(.pushReceived(PushReceived(messageID: "announced-1")))
            try ext.append(.messageRemoved(MessageRemoval(ids: ["m3"])))
            var withTasks = LedgerOptions(role: "app")
            withTasks.projections = [TaskList.self]
            withTasks.projectionBuilds = .whenAsked  // no builder thread left running when the files are rewritten below
            let tasks = try Ledger(path: path, options: withTasks)
            try tasks.projections.build()  // ready, so the appends below write its rows
            try tasks.append(TaskAdded(id: "t1", title: "Milk", day: 0))
            try tasks.append(TaskAdded(id: "t2", title: "Rice", day: 1))
        }
        _ = try rewriteAsFormatOne(path)
        var readOnly = LedgerOptions(role: "probe")
        readOnly.readOnly = true
        return try Ledger(path: path, options: readOnly).maintenance.statistics()
    }

    @Test func aWritableOpeningMovesTheCountersIntoMeta() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let before = try formatOneLedger(path)
        let n = before.countsByType.count + before.countsByOrigin.count
        #expect(before.countsByOrigin.keys.sorted() == ["app", "notification-ext", "widget"])
        #expect(before.countsByType.count >= 4, "\(before.countsByType)")
        #expect(try stored(path) == (1, n, 0))

        // A read-only opening reads format 1 as it is and writes nothing.
        var readOnly = LedgerOptions(role: "widget")
        readOnly.readOnly = true
        let bytes = try #require(fileBytes(path + "/data.mdb"))
        do {
            let reader = try Ledger(path: path, options: readOnly)
            #expect(reader.metadata.formatVersion == 1)
            try expectCountsMatchTheLog(reader)
        }
        #expect(fileBytes(path + "/data.mdb") == bytes, "the read-only opening wrote something")

        let projections = try storedLayout(path).projectionTables
        #expect(projections > 30, "format 1 keeps the projection tables apart")
        for table in ["messages", "widget", "actions", "action-ids", "state", "local", "app-projections"] {
            #expect(try ownRows(path, table) > 0, "the fixture has no \(table) rows to move")
        }
        let widgetBefore = try Ledger(path: path, options: readOnly).read { try $0.widgetList(limit: 100) }
        let localBefore = try Ledger(path: path, options: readOnly).read { try $0.localChanges(limit: 100) }
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(ledger.metadata.formatVersion == 4)
        #expect(try stored(path) == (Schema.formatVersion, 0, n))
        #expect(try storedLayout(path).projectionTables == 0)
        #expect(try storedLayout(path).projectionRowsInTrees == projections)
        #expect(try ledger.read({ try $0.widgetList(limit: 100) }) == widgetBefore)
        #expect(try ledger.read({ try $0.localChanges(limit: 100) }) == localBefore)
        #expect(try ledger.maintenance.verifyProjections() == nil)
        let after = try ledger.maintenance.statistics()
        #expect(after.countsByType == before.countsByType)
        #expect(after.countsByOrigin == before.countsByOrigin)

        // From then on appends and trims keep the counts in `meta`, equal to the log's.
        try appendMixed(ledger, count: 50, seed: 14)
        let newcomer = try Ledger(path: path, options: LedgerOptions(role: "intents"))
        try appendMixed(newcomer, count: 10, seed: 15)
        try expectCountsMatchTheLog(ledger)
        try Compactor(ledger: ledger, policy: policy(tail: 30, chunk: 40)).runOnce()
        try expectCountsMatchTheLog(ledger)
        #expect(try stored(path).table == 0)
        #expect(try ledger.maintenance.verify().isHealthy)
        // The app's projection moved with the rest.
        var withTasks = LedgerOptions(role: "app")
        withTasks.projections = [TaskList.self]
        #expect(try Ledger(path: path, options: withTasks).read { try $0.projection(TaskList.self).rows() }.map(\.key) == ["t1", "t2"])
    }

    @Test func concurrentOpeningsUpgradeOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let before = try formatOneLedger(path)
        let n = before.countsByType.count + before.countsByOrigin.count
        let openers = try (0..<4).map { _ in try Processes.start(agent, ["open", path]) }
        for opener in openers { #expect(try opener.wait().status == 0) }
        #expect(try stored(path) == (Schema.formatVersion, 0, n))
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(try ledger.maintenance.statistics().countsByType == before.countsByType)
        #expect(try ledger.maintenance.statistics().countsByOrigin == before.countsByOrigin)
        try expectCountsMatchTheLog(ledger)
    }

    @Test func aCrashInsideTheUpgradeLeavesFormatOneWhole() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let before = try formatOneLedger(path)
        let n = before.countsByType.count + before.countsByOrigin.count
        let result = try Processes.run(agent, ["upgrade-then-die", path])
        #expect(result.signalled && result.status == SIGKILL, "the agent was to die inside the upgrade: \(result)")
        #expect(result.stdout.contains("upgrading"))
        #expect(try stored(path) == (1, n, 0), "a crash inside the upgrade left part of it")

        var readOnly = LedgerOptions(role: "probe")
        readOnly.readOnly = true
        #expect(try Ledger(path: path, options: readOnly).maintenance.statistics().countsByType == before.countsByType)
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(try stored(path) == (Schema.formatVersion, 0, n))
        #expect(try ledger.maintenance.statistics().countsByOrigin == before.countsByOrigin)
        try expectCountsMatchTheLog(ledger)
    }

    @Test(.enabled(if: canMount, "needs root and mount"))
    func anUpgradeOnAFullDiskIsAllOrNothing() throws {
        let dir = TemporaryDirectory()
        let mount = try TmpfsMount(in: dir, name: "small", size: "4m")
        defer { withExtendedLifetime(mount) {} }
        // A compacted copy of a format-1 ledger: no free pages, so the upgrade must grow the file.
        let source = dir.child("format-1")
        let before = try formatOneLedger(source)
        let n = before.countsByType.count + before.countsByOrigin.count
        let path = mount.path + "/ledger"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var configuration = EnvironmentConfiguration()
        configuration.readOnly = true
        try Environment.open(directory: source, configuration: configuration).copy(to: path, flags: .compact)
        #expect(try stored(path) == (1, n, 0))  // and lock.mdb exists: only the upgrade needs space
        // Fill every free byte of the file system.
        let ballast = mount.path + "/ballast"
        let fd = open(ballast, O_WRONLY | O_CREAT, 0o644)
        try #require(fd >= 0)
        let chunk = [UInt8](repeating: 1, count: 4096)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == chunk.count {}
        close(fd)

        // The upgrade fails typed, with nothing written; read-only openings still read format 1.
        let bytes = try #require(fileBytes(path + "/data.mdb"))
        #expect(throws: LedgerError.self) { try Ledger(path: path, options: LedgerOptions(role: "app")) }
        do {
            _ = try Ledger(path: path, options: LedgerOptions(role: "app"))
        } catch {
            guard case .storeFull = error else { Issue.record("expected storeFull, got \(error)"); return }
        }
        #expect(fileBytes(path + "/data.mdb") == bytes, "the failed upgrade wrote something")
        var readOnly = LedgerOptions(role: "widget")
        readOnly.readOnly = true
        try expectCountsMatchTheLog(try Ledger(path: path, options: readOnly))
        // Once space is freed, the next writable opening upgrades.
        try FileManager.default.removeItem(atPath: ballast)
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(try stored(path) == (Schema.formatVersion, 0, n))
        try expectCountsMatchTheLog(ledger)
        #expect(try ledger.maintenance.verify().isHealthy)
    }

    /// A format-2 ledger (`formatOneLedger`'s, without the counters moved back): the projection
    /// tables each in their own database.
    func formatTwoLedger(_ path: String) throws -> WidgetList {
        _ = try formatOneLedger(path)
        _ = try Ledger(path: path, options: LedgerOptions(role: "app"))  // upgrades to 3
        #expect(try rewriteAsFormatTwo(path) > 30)
        var readOnly = LedgerOptions(role: "probe")
        readOnly.readOnly = true
        return try Ledger(path: path, options: readOnly).read { try $0.widgetList(limit: 100) }
    }

    @Test func aFormatTwoLedgerMovesItsProjectionTablesIntoMetaWhileAReaderReads() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let widget = try formatTwoLedger(path)
        let before = try storedLayout(path)
        #expect(before.format == 2 && before.projectionRowsInTrees == 0 && before.projectionTables > 30)

        // A read-only handle reads format 2 as it is, and keeps reading while another process
        // upgrades the ledger under it: each of its transactions looks where the format says.
        var readOnly = LedgerOptions(role: "widget")
        readOnly.readOnly = true
        do {
            let reader = try Ledger(path: path, options: readOnly)
            #expect(reader.metadata.formatVersion == 2)
            #expect(try reader.read({ try $0.widgetList(limit: 100) }) == widget)
            #expect(try Processes.run(agent, ["open", path]).status == 0)
            let after = try storedLayout(path)
            #expect(after.format == Schema.formatVersion && after.projectionTables == 0 && after.projectionRowsInTrees == before.projectionTables)
            #expect(try reader.read({ try $0.widgetList(limit: 100) }) == widget)
            #expect(try reader.maintenance.verifyProjections() == nil)
        }

        // From then on the projections live in `meta`: appends, a trim and a rebuild keep them.
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        try appendMixed(ledger, count: 60, seed: 21)
        try Compactor(ledger: ledger, policy: policy(tail: 20, chunk: 40)).runOnce()
        #expect(try storedLayout(path).projectionTables == 0)
        #expect(try ledger.maintenance.verify().isHealthy)
        try expectCountsMatchTheLog(ledger)
    }

    /// The race a read-only handle of a format-2 ledger must not lose: a read whose snapshot was
    /// taken before another process upgraded, set up after another thread of the process has
    /// already seen format 3, still looks where its own snapshot keeps the projections.
    @Test func aReadOnAnOlderSnapshotLooksWhereThatSnapshotKeepsTheProjections() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try formatTwoLedger(path)
        var readOnly = LedgerOptions(role: "widget")
        readOnly.readOnly = true
        let reader = try Ledger(path: path, options: readOnly)
        let messages = try reader.read("probe") { tables in try ProjectionState.load(from: tables.projections).messageCount }
        #expect(messages > 0)
        try reader.read("an older snapshot") { held in
            #expect(try Processes.run(agent, ["open", path]).status == 0)  // upgrades to 3
            // Another thread's read sees format 3 and records it.
            let seen = Mutex<Int64?>(nil)
            let done = DispatchSemaphore(value: 0)
            Thread {
                seen.withLock { $0 = try? reader.read("newer") { tables in try ProjectionState.load(from: tables.projections).messageCount } }
                done.signal()
            }.start()
            done.wait()
            #expect(seen.withLock { $0 } == messages)
            #expect(held.layout.twoTreesSince.load(ordering: .relaxed) < Int.max)
            // This transaction's snapshot is still format 2: it must read the own tables.
            let again = try StoreTransaction(rawTransaction: held.rawTransaction, layout: held.layout)
            guard case .ownTables = again.placement else {
                Issue.record("a format-2 snapshot was read as format 3")
                return
            }
            #expect(try ProjectionState.load(from: again.projections).messageCount == messages)
        }
    }

    @Test func aCrashInsideTheUpgradeLeavesFormatTwoWhole() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let widget = try formatTwoLedger(path)
        let before = try storedLayout(path)
        let result = try Processes.run(agent, ["upgrade-then-die", path])
        #expect(result.signalled && result.status == SIGKILL, "the agent was to die inside the upgrade: \(result)")
        let crashed = try storedLayout(path)
        #expect(crashed.format == 2 && crashed.projectionTables == before.projectionTables && crashed.projectionRowsInTrees == 0,
                "a crash inside the upgrade left part of it")
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(try storedLayout(path).format == Schema.formatVersion)
        #expect(try ledger.read({ try $0.widgetList(limit: 100) }) == widget)
        #expect(try ledger.maintenance.verify().isHealthy)
    }
}
