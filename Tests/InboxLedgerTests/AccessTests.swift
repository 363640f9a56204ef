import Foundation
import Testing
import TestSupport
@testable import InboxLedger

#if canImport(Glibc)
import Glibc
#endif

/// Whether this process may mount file systems (root in CI and on the development VM).
let canMount: Bool = {
    guard getuid() == 0 else { return false }
    let probe = TemporaryDirectory("mount-probe")
    let ok = (try? Processes.run("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", probe.path], timeout: 10).status) == 0
    if ok { _ = try? Processes.run("/bin/umount", [probe.path], timeout: 10) }
    return ok
}()

/// Stores the process cannot write or read: the analog of a locked device's protected files.
@Suite(.serialized) struct AccessTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test(.enabled(if: canMount, "needs root and mount"))
    func readOnlyFileSystemIsATypedErrorAndReadOnlyOpeningWorks() throws {
        let dir = TemporaryDirectory()
        let mount = try TmpfsMount(in: dir, name: "mnt", size: "4m")
        defer { withExtendedLifetime(mount) {} }
        let mountPoint = mount.path
        let path = mountPoint + "/ledger"
        // Written by another process, then the file system becomes read-only.
        #expect(try Processes.run(agent, ["append-key", path, "k", "{}"]).status == 0)
        #expect(try Processes.run("/bin/mount", ["-o", "remount,ro", mountPoint]).status == 0)

        let writable = try Processes.run(agent, ["open", path])
        #expect(writable.status == 2)
        #expect(writable.stdout.contains("permission denied") && writable.stdout.contains("read-only file system"), "\(writable.stdout)")
        let readOnly = try Processes.run(agent, ["open", path, "ro"])
        #expect(readOnly.status == 0, "\(readOnly.stdout) \(readOnly.stderr)")
        #expect(readOnly.stdout.contains("count 1"))
        // A new ledger cannot be created there.
        let create = try Processes.run(agent, ["open", mountPoint + "/other"])
        #expect(create.status == 2 && create.stdout.contains("permission denied"), "\(create.stdout)")
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv"))
    func unreadableStoreIsATypedErrorNotACrash() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try Ledger(path: path).append(event())
        chmod(dir.path, 0o755)
        chmod(path, 0o700)  // owned by root: another user can neither list nor read it
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", agent]
        for mode in [["open", path], ["open", path, "ro"]] {
            let out = try Processes.run("/usr/bin/setpriv", asNobody + mode)
            #expect(out.status == 2, "\(mode): \(out.stdout) \(out.stderr)")
            #expect(out.stdout.contains("permission denied"), "\(out.stdout)")
            #expect(!out.signalled)
        }
        // Readable, but lock.mdb not writable: even a read-only process needs to write LMDB's
        // reader table, and is told so.
        chmod(path, 0o755)
        let noLock = try Processes.run("/usr/bin/setpriv", asNobody + ["open", path, "ro"])
        #expect(noLock.status == 2)
        #expect(noLock.stdout.contains("cannot open lock.mdb for writing"), "\(noLock.stdout)")
        // With a shared lock file, read-only opening works for the other user.
        chmod(path + "/lock.mdb", 0o666)
        let shared = try Processes.run("/usr/bin/setpriv", asNobody + ["open", path, "ro"])
        #expect(shared.status == 0, "\(shared.stdout) \(shared.stderr)")
        #expect(shared.stdout.contains("count 1"))
    }
}
