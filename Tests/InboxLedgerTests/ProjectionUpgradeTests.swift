import Foundation
import Testing
import TestSupport
@testable import InboxLedger
import LMDB

/// A library whose projection rules differ from the ones a ledger's projections were built by:
/// a writable opening rebuilds them (atomically, once, whichever process gets there first); a
/// trimmed log says so and writes nothing; a newer version opens read-only.
@Suite struct ProjectionUpgradeTests {
    let agent = Processes.product("LedgerTestAgent")

    /// A ledger of mixed inbox events, closed, whose stored projection version is set to
    /// `version` and whose widget rows were dropped (what rules that never wrote them would have
    /// left), so a rebuild is visible. Returns the widget list the current rules give.
    func oldLedger(_ path: String, version: UInt32, trimmed: Bool = false) throws -> WidgetList {
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app-v0"))
        try appendMixed(ledger, count: 300, seed: 7)
        if trimmed { try Compactor(ledger: ledger, policy: policy(tail: 50, chunk: 100)).runOnce() }
        let expected = try ledger.read({ try $0.widgetList(limit: 50) })
        try ledger.write("simulate old rules") { txn in
            try txn.meta.put(Meta.projectionVersion, version)
            try txn.projections.removeAll(.widget)
        }
        return expected
    }

    func storedVersion(_ path: String) throws -> UInt32? {
        var options = LedgerOptions(role: "probe")
        options.readOnly = true
        let ledger = try Ledger(path: path, options: options)
        return try ledger.read("probe") { txn in try txn.meta.projectionVersion(path: ledger.path) }
    }

    @Test func aWritableOpeningRebuildsProjectionsBuiltByOlderRules() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let expected = try oldLedger(path, version: 0)
        // A read-only opening reads what is stored and writes nothing.
        var readOnly = LedgerOptions(role: "widget")
        readOnly.readOnly = true
        do {
            let widget = try Ledger(path: path, options: readOnly)
            #expect(widget.metadata.projectionVersion == 0)
            #expect(try widget.read({ try $0.widgetList(limit: 50) }).items.isEmpty, "the read-only handle rebuilt something")
        }
        #expect(try storedVersion(path) == 0)

        let upgraded = try Ledger(path: path, options: LedgerOptions(role: "app-v1"))
        #expect(upgraded.metadata.projectionVersion == ProjectionRules.version)
        #expect(try storedVersion(path) == ProjectionRules.version)
        #expect(try upgraded.read({ try $0.widgetList(limit: 50) }) == expected)
        #expect(try upgraded.maintenance.verifyProjections() == nil)
        #expect(try upgraded.maintenance.verify().isHealthy)
    }

    @Test func concurrentProcessesUpgradeOnceAndAllSeeTheRebuild() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let expected = try oldLedger(path, version: 0)
        let openers = try (0..<4).map { _ in try Processes.start(agent, ["open", path]) }
        for opener in openers { #expect(try opener.wait().status == 0) }
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(try storedVersion(path) == ProjectionRules.version)
        #expect(try ledger.read({ try $0.widgetList(limit: 50) }) == expected)
        #expect(try ledger.maintenance.verifyProjections() == nil)
    }

    @Test func aTrimmedLogIsATypedErrorUntilTheSnapshotPathIsChosen() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let expected = try oldLedger(path, version: 0, trimmed: true)
        let before = try #require(fileBytes(path + "/data.mdb"))
        do {
            _ = try Ledger(path: path, options: LedgerOptions(role: "app-v1"))
            Issue.record("opened a trimmed ledger with stale projections")
        } catch {
            guard case .projectionUpgradeNeeded(_, 0, ProjectionRules.version, let reason) = error else { Issue.record("\(error)"); return }
            #expect(reason.contains("trimmed"))
            #expect(error.recoverySuggestion?.contains("fromNewestSnapshot") == true)
        }
        #expect(fileBytes(path + "/data.mdb") == before, "the refused upgrade wrote something")
        var options = LedgerOptions(role: "app-v1")
        options.projectionUpgrade = .fromNewestSnapshot
        let upgraded = try Ledger(path: path, options: options)
        #expect(try storedVersion(path) == ProjectionRules.version)
        #expect(try upgraded.read({ try $0.widgetList(limit: 50) }) == expected)
        #expect(try upgraded.maintenance.verifyProjections() == nil)
    }

    /// Rules 2 only added built-in types that rules 1 stored as custom events: a trimmed ledger of
    /// rules 1 upgrades from its newest snapshot by itself, exactly (no decision needed).
    @Test func aTrimmedLedgerOfRulesOneUpgradesFromItsSnapshotWithoutADecision() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let expected = try oldLedger(path, version: 1, trimmed: true)
        do {
            // What rules 1 left: no `local` rows, no record of the later built-in types.
            let ledger = try Ledger(path: path, options: LedgerOptions(role: "app-v1"))
            try ledger.write("simulate rules 1") { txn in
                for type in BuiltInEventType.allCases where !type.isOriginal { _ = try txn.rawTransaction.delete(ledger.schema.meta, key: Schema.MetaKey.builtInSince(type)) }
                try txn.meta.put(Meta.projectionVersion, 1)
            }
        }
        #expect(try storedVersion(path) == 1)
        let upgraded = try Ledger(path: path, options: LedgerOptions(role: "app-v2"))
        #expect(try storedVersion(path) == ProjectionRules.version)
        #expect(try upgraded.read({ try $0.widgetList(limit: 50) }) == expected)
        #expect(try upgraded.maintenance.verifyProjections() == nil)
        try upgraded.append(.pushReceived(PushReceived(messageID: "new-push")))
        #expect(try upgraded.read({ try $0.widgetList(limit: 50) }).badge == expected.badge + 1)
        #expect(try upgraded.maintenance.verifyProjections() == nil)
    }

    @Test func projectionsOfANewerLibraryOpenReadOnlyAndAreNeverRewritten() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        do {
            let ledger = try Ledger(path: path, options: LedgerOptions(role: "app-v2"))
            try appendMixed(ledger, count: 100, seed: 3)
            try ledger.write("simulate newer rules") { txn in try txn.meta.put(Meta.projectionVersion, ProjectionRules.version + 1) }
        }
        let before = try #require(fileBytes(path + "/data.mdb"))
        let old = try Ledger(path: path, options: LedgerOptions(role: "app-v1"))
        #expect(old.metadata.projectionVersion == ProjectionRules.version + 1)
        _ = try old.read({ try $0.widgetList() })
        _ = try old.read({ try $0.events(after: 0) })
        #expect(try old.maintenance.verify().isHealthy, "verify compared projections built by other rules with its own")
        #expect(throws: LedgerError.newerProjections(path: path, found: ProjectionRules.version + 1, supported: ProjectionRules.version)) {
            try old.append(.badgeAdjusted(.delta(1)))
        }
        #expect(throws: LedgerError.self) { try old.consumers.consumer(named: "new-consumer") }
        #expect(throws: LedgerError.self) { try Compactor(ledger: old, policy: policy(tail: 10)).runOnce() }
        #expect(fileBytes(path + "/data.mdb") == before, "a newer ledger was written by an older library")
    }

    @Test func anUnreadableProjectionVersionIsACorruptStoreNotAGuess() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        do {
            let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
            try ledger.write("damage") { txn in try txn.rawTransaction.put(ledger.schema.meta, key: Schema.MetaKey.projectionVersion, value: [1, 0, 0]) }
        }
        #expect {
            _ = try Ledger(path: path, options: LedgerOptions(role: "app"))
        } throws: { error in
            guard case LedgerError.corruptStore(_, let reason)? = error as? LedgerError else { return false }
            return reason.contains("projection version")
        }
    }
}
