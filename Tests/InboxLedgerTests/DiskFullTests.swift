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
}
