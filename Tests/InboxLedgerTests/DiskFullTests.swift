import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// A full disk (a small tmpfs): a typed error, nothing committed lost, appends work again once
/// space is freed.
@Suite(.serialized) struct DiskFullTests {
    @Test(.enabled(if: canMount, "needs root and mount"))
    func fullDiskIsATypedErrorAndRecoverable() throws {
        let dir = TemporaryDirectory()
        let mount = try TmpfsMount(in: dir, name: "small", size: "2m")
        defer { withExtendedLifetime(mount) {} }
        let mountPoint = mount.path
        // Ballast that will be deleted to free space.
        let ballast = mountPoint + "/ballast"
        _ = FileManager.default.createFile(atPath: ballast, contents: Data(repeating: 1, count: 1 << 20))

        var options = LedgerOptions(role: "app")
        options.durability = .durable
        options.initialMapSize = 8 << 20
        let ledger = try Ledger(path: mountPoint + "/ledger", options: options)
        let pad = String(repeating: "x", count: 1500)
        var committed = 0
        var failure: LedgerError?
        for i in 0..<5000 {
            do {
                try ledger.append(contentsOf: (0..<4).map { j in NewEvent(type: "t", payload: Array(#"{"i":\#(i * 4 + j),"p":"\#(pad)"}"#.utf8)) })
                committed += 4
            } catch {
                failure = error
                break
            }
        }
        guard case .storeFull(_, let reason)? = failure else {
            Issue.record("expected storeFull, got \(String(describing: failure)) after \(committed) events")
            return
        }
        #expect(reason.contains("no space left on device"))
        #expect(committed > 0)
        // Nothing committed is lost, nothing of the failed batch is visible.
        #expect(try ledger.read({ try $0.count() }) == committed)
        #expect(try ledger.read({ try $0.head() }) == UInt64(committed))
        #expect(try ledger.maintenance.verify().isHealthy)
        // Free space: appends succeed again.
        try FileManager.default.removeItem(atPath: ballast)
        let next = try ledger.append(NewEvent(type: "t", payload: Array(#"{"after":"space freed"}"#.utf8)))
        #expect(next == UInt64(committed + 1))
        #expect(try ledger.maintenance.verify().isHealthy)
    }

    /// A projection build that runs out of disk: each step is one transaction, so the one that
    /// does not fit fails with `storeFull` and writes nothing; the log, the record and what
    /// earlier steps stored stay whole, and the build finishes once space is freed.
    @Test(.enabled(if: canMount, "needs root and mount"))
    func aBuildStepThatRunsOutOfDiskWritesNothingAndTheBuildFinishesLater() throws {
        let dir = TemporaryDirectory()
        let mount = try TmpfsMount(in: dir, name: "small", size: "8m")
        defer { withExtendedLifetime(mount) {} }
        let path = mount.path + "/ledger"
        var plainOptions = LedgerOptions(role: "cli")
        plainOptions.initialMapSize = 32 << 20
        let plain = try Ledger(path: path, options: plainOptions)
        let title = String(repeating: "t", count: 120)
        for block in 0..<5 {
            try plain.append(contentsOf: (0..<1_000).map { i in try NewEvent(TaskAdded(id: "task-\(block)-\(i)", title: "\(title) \(i)", day: Int64(i % 30))) })
        }
        var options = LedgerOptions(role: "app")
        options.initialMapSize = 32 << 20
        options.projections = [TaskList.self]
        options.projectionBuilds = .whenAsked
        let app = try Ledger(path: path, options: options)
        #expect(try app.projections.list().map(\.status) == ["building"])
        // Fill the device but for ~256 KiB: the 5,000 rows and their index entries (> 1 MiB) cannot fit.
        let free = try #require((try FileManager.default.attributesOfFileSystem(forPath: mount.path))[.systemFreeSize] as? Int)
        let ballast = mount.path + "/ballast"
        _ = FileManager.default.createFile(atPath: ballast, contents: Data(repeating: 1, count: max(0, free - (256 << 10))))
        var failure: LedgerError?
        do { try app.projections.build() } catch { failure = error }
        guard case .storeFull? = failure else {
            Issue.record("expected storeFull, got \(String(describing: failure))")
            return
        }
        let record = try #require(try app.projections.list().first)
        #expect(record.status == "building" && record.appliedThrough < 5_000, "\(record)")
        #expect(try app.read({ try $0.count() }) == 5_000)
        #expect(try app.maintenance.verify().isHealthy)
        // Space freed: the build continues from the record and ends exact.
        try FileManager.default.removeItem(atPath: ballast)
        try app.projections.build()
        var model = TaskListModel(.v1)
        try model.fold(try app.read { try $0.events(after: 0, limit: 10_000) })
        #expect(model.mismatch(try app.read({ try $0.projection(TaskList.self).contents() })) == nil)
        #expect(try app.maintenance.verify().isHealthy)
    }
}
