import Foundation
import Testing
import TestSupport
@testable import InboxLedger
@testable import LMDB

#if canImport(Glibc)
import Glibc
#endif

/// Faults a device delivers to the files themselves (docs/reliability.md, "Damaged files"):
/// interrupted creation, truncation, damaged pages, non-regular files, a full disk at open,
/// read-only mounts beside live writers. Each asserts a typed error or a reported finding —
/// never a signal, a hang, or a write to what is not a healthy ledger.
@Suite(.serialized) struct StoreFaultTests {
    let cli = Processes.product("ledger")
    let agent = Processes.product("LedgerTestAgent")

    /// A ledger with `count` events of about 300 bytes, closed.
    func filledLedger(_ dir: TemporaryDirectory, count: Int = 2000) throws -> String {
        try notesLedger(dir, count: count) { _ in }
    }

    /// The error opening `path` throws (nil if it opens).
    func openError(_ path: String, _ options: LedgerOptions = LedgerOptions(role: "app")) -> LedgerError? {
        do {
            _ = try Ledger(path: path, options: options)
            return nil
        } catch {
            return error
        }
    }

    /// Runs the CLI and asserts it ended by itself (no signal) within the timeout.
    func run(_ arguments: String..., timeout: Double = 60) throws -> ProcessOutput {
        let out = try Processes.run(cli, arguments, timeout: timeout)
        #expect(!out.signalled, "ledger \(arguments.joined(separator: " ")) died of a signal: \(out.stderr)")
        return out
    }

    // MARK: Interrupted creation (finding 3)

    @Test(arguments: ["empty", "zeros", "first-meta-only"])
    func anInterruptedCreationIsFinishedOnOpen(state: String) throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let data: Data
        switch state {
        case "empty": data = Data()
        case "zeros": data = Data(count: 8192)
        default:
            // LMDB's own initial meta page (transaction 0), then the second page never written.
            let fresh = TemporaryDirectory()
            var config = EnvironmentConfiguration()
            config.databases = [:]
            _ = try Environment.open(directory: fresh.path, configuration: config)
            let written = try Data(contentsOf: URL(fileURLWithPath: fresh.child("data.mdb")))
            data = written.prefix(4096) + Data(count: 4096)
        }
        _ = FileManager.default.createFile(atPath: path + "/data.mdb", contents: data)
        // Read-only cannot finish it: a clear error, nothing written.
        var readOnly = LedgerOptions(role: "app")
        readOnly.readOnly = true
        #expect(throws: LedgerError.self) { try Ledger(path: path, options: readOnly) }
        #expect(fileBytes(path + "/data.mdb") == data)
        // So can no opening that may not create (ledger inspect, verify): nothing written either.
        var noCreate = LedgerOptions(role: "app")
        noCreate.create = false
        #expect(throws: LedgerError.self) { try Ledger(path: path, options: noCreate) }
        #expect(fileBytes(path + "/data.mdb") == data)
        for command in ["inspect", "verify"] {
            let out = try run(command, path)
            #expect(out.status == 3 && out.stderr.contains("creation never finished"), "\(command): \(out.stderr)")
        }
        #expect(fileBytes(path + "/data.mdb") == data)
        // Writable: the creation is finished and the ledger works.
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(try ledger.append(event()) == 1)
        #expect(try ledger.maintenance.verify().isHealthy)
    }

    @Test func processesRacingToFinishAnInterruptedCreationAllSucceed() throws {
        for round in 0..<5 {
            let dir = TemporaryDirectory()
            let path = dir.child("ledger")
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: path + "/data.mdb", contents: round % 2 == 0 ? Data() : Data(count: 8192))
            let writers = try (0..<4).map { i in try Processes.start(agent, ["append-key", path, "k\(i)", "{}"]) }
            for w in writers {
                let out = try w.wait(timeout: 60)
                #expect(out.status == 0 && !out.signalled, "round \(round): \(out.stdout) \(out.stderr)")
            }
            let ledger = try Ledger(path: path, options: LedgerOptions(role: "check"))
            #expect(try ledger.read({ try $0.count() }) == 4, "round \(round)")
            #expect(try ledger.maintenance.verify().isHealthy)
        }
    }

    @Test func aForeignFileStaysRefusedAndUntouched() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        // Zeros then text: not something LMDB's creation could have left.
        let foreign = Data(count: 4096) + Data(repeating: 0x41, count: 5000)
        _ = FileManager.default.createFile(atPath: path + "/data.mdb", contents: foreign)
        #expect(throws: LedgerError.self) { try Ledger(path: path, options: LedgerOptions(role: "app")) }
        #expect(fileBytes(path + "/data.mdb") == foreign)
        #expect(!FileManager.default.fileExists(atPath: path + "/lock.mdb"))
    }

    // MARK: Truncation (finding 4)

    @Test func aTruncatedStoreIsACorruptStoreEverywhereAndNothingIsWritten() throws {
        let dir = TemporaryDirectory()
        let path = try filledLedger(dir)
        let compactor = Compactor(ledger: try Ledger(path: path), policy: policy(tail: 100, chunk: 500))
        _ = try compactor.runOnce()
        let file = path + "/data.mdb"
        let full = try #require(fileBytes(file))
        for fraction in [0.3, 0.6, 0.9] {
            let cut = full.prefix(Int(Double(full.count) * fraction) / 4096 * 4096)
            _ = FileManager.default.createFile(atPath: file, contents: cut)
            let error = openError(path)
            guard case .corruptStore(_, let reason)? = error else {
                Issue.record("a store cut to \(cut.count) of \(full.count) bytes: \(String(describing: error))")
                continue
            }
            #expect(reason.contains("truncated"), "\(reason)")
            for command in [["inspect", path], ["events", path], ["widget", path]] {
                let out = try Processes.run(cli, command, timeout: 60)
                #expect(!out.signalled && out.status == 3, "\(command): \(out.status) \(out.stderr)")
            }
            // verify names the pages that are gone.
            let verify = try run("verify", path)
            #expect(verify.status == 1 && verify.stdout.contains("lies past the end of the file"), "\(verify.stdout) \(verify.stderr)")
            let append = try Processes.run(cli, ["append", path], input: Data(#"{"type":"t","data":{}}"#.utf8), timeout: 60)
            #expect(!append.signalled && append.status == 3, "append: \(append.stderr)")
            #expect(fileBytes(file) == cut, "nothing may be written to a truncated store")
        }
    }

    // MARK: Damaged pages (finding 6)

    @Test func randomlyDamagedPagesAreReportedNeverACrash() throws {
        let dir = TemporaryDirectory()
        let path = try filledLedger(dir, count: 3000)
        let file = path + "/data.mdb"
        let pristine = try #require(fileBytes(file))
        let pages = pristine.count / 4096
        var rng = SeededGenerator(seed: 11)
        var reported = 0
        for trial in 0..<24 {
            var damaged = pristine
            let page = Int.random(in: 2..<pages, using: &rng)
            // Damage the page header half the time (type, bounds), else its contents.
            let offset = page * 4096 + (trial % 2 == 0 ? Int.random(in: 0..<16, using: &rng) : Int.random(in: 16..<4096, using: &rng))
            for k in 0..<8 where offset + k < damaged.count { damaged[offset + k] ^= UInt8.random(in: 1...255, using: &rng) }
            _ = FileManager.default.createFile(atPath: file, contents: damaged)
            try? FileManager.default.removeItem(atPath: path + "/lock.mdb")
            let verify = try run("verify", path)
            #expect([0, 1, 3].contains(verify.status), "trial \(trial): verify exit \(verify.status) \(verify.stderr)")
            if verify.status != 0 { reported += 1 }
            let inspect = try run("inspect", path)
            #expect([0, 3, 4].contains(inspect.status), "trial \(trial): inspect exit \(inspect.status) \(inspect.stderr)")
        }
        #expect(reported > 0, "no damage was noticed in 24 trials")
    }

    @Test func aDamagedPageHeaderIsNamedByVerify() throws {
        let dir = TemporaryDirectory()
        let path = try filledLedger(dir, count: 3000)
        // Walk the healthy store to find a branch or leaf page that is in use, then damage it.
        let env = try Ledger(path: path).environment
        let healthy = try env.walkPages()
        #expect(healthy.isHealthy && healthy.pagesVisited > 10, "\(healthy.problems)")
        let file = path + "/data.mdb"
        var bytes = try #require(fileBytes(file))
        let metas = [0, 4096].compactMap { MetaPage(Array(bytes.prefix(8192)), at: $0) }
        let meta = try #require(metas.max { $0.transactionID < $1.transactionID })
        let root = try #require(meta.mainDB.root)
        bytes[root * 4096 + 10] = 0x00  // its flags: neither branch nor leaf
        bytes[root * 4096 + 11] = 0x00
        _ = FileManager.default.createFile(atPath: file, contents: bytes)
        let out = try run("verify", path)
        #expect(out.status == 1, "\(out.stdout) \(out.stderr)")
        #expect(out.stdout.contains("page \(root)"), "\(out.stdout)")
    }

    /// Every page an open reads (the main tree and the metadata table) is checked with `pread`s
    /// first: damaging any page of a small ledger, one at a time and in two ways, never makes an
    /// open die; damage to the main tree's root is a typed error (LMDB alone reads garbage keys).
    @Test func damagingAnyPageNeverKillsAnOpen() throws {
        let dir = TemporaryDirectory()
        let path = try filledLedger(dir, count: 40)
        let file = path + "/data.mdb"
        let pristine = try #require(fileBytes(file))
        let metas = [0, 4096].compactMap { MetaPage(Array(pristine.prefix(8192)), at: $0) }
        let mainRoot = try #require(metas.max { $0.transactionID < $1.transactionID }?.mainDB.root)
        var typed = 0
        for page in 2..<(pristine.count / 4096) {
            for damage in ["flags", "node pointer"] {
                var damaged = pristine
                if damage == "flags" {
                    damaged[page * 4096 + 10] = 0  // neither branch, leaf nor overflow
                    damaged[page * 4096 + 11] = 0
                } else {
                    damaged[page * 4096 + 16] = 0xF8  // the first node starts 8 bytes before the page ends
                    damaged[page * 4096 + 17] = 0x0F
                }
                _ = FileManager.default.createFile(atPath: file, contents: damaged)
                try? FileManager.default.removeItem(atPath: path + "/lock.mdb")
                let out = try Processes.run(agent, ["open", path], timeout: 30)
                #expect(!out.signalled && [0, 2].contains(out.status), "page \(page), \(damage): \(out.status) \(out.stdout) \(out.stderr)")
                if page == mainRoot {
                    #expect(out.status == 2 && out.stdout.contains("corrupt store") && out.stdout.contains("page \(page)"),
                            "main root, \(damage): \(out.stdout)")
                }
                if out.status == 2 { typed += 1 }
            }
        }
        #expect(typed >= 4, "the main tree's and the metadata table's pages were not caught")
    }

    @Test func aDamagedMetaPageIsACorruptStore() throws {
        let dir = TemporaryDirectory()
        let path = try filledLedger(dir, count: 10)
        let file = path + "/data.mdb"
        var bytes = try #require(fileBytes(file))
        bytes[4096 + 16] ^= 0xFF  // meta page 1's magic
        _ = FileManager.default.createFile(atPath: file, contents: bytes)
        let error = openError(path)
        guard case .corruptStore(_, let reason)? = error else {
            Issue.record("expected corruptStore, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("meta page 1"), "\(reason)")
        #expect(try run("verify", path).status == 3)
    }

    @Test func aZeroedLockFileIsRebuilt() throws {
        let dir = TemporaryDirectory()
        let path = try filledLedger(dir, count: 10)
        let size = try #require(FileSystem.size(of: path + "/lock.mdb"))
        _ = FileManager.default.createFile(atPath: path + "/lock.mdb", contents: Data(count: size))
        let out = try run("verify", path)
        #expect(out.status == 0, "\(out.stdout) \(out.stderr)")
        #expect(try Ledger(path: path).read { try $0.count() } == 10)
    }

    // MARK: Non-regular files (finding 8)

    @Test(arguments: ["data.mdb", "lock.mdb"])
    func aFifoIsAClearErrorNotAHang(name: String) throws {
        let dir = TemporaryDirectory()
        let path = try filledLedger(dir, count: 3)
        try FileManager.default.removeItem(atPath: path + "/" + name)
        #expect(mkfifo(path + "/" + name, 0o644) == 0)
        let error = openError(path)
        guard case .notALedger(_, let reason)? = error else {
            Issue.record("\(name) as a FIFO: \(String(describing: error))")
            return
        }
        #expect(reason.contains("\(name) is a FIFO"), "\(reason)")
        for command in ["inspect", "verify", "widget"] {
            let out = try run(command, path, timeout: 20)
            #expect(out.status == 3 && out.stderr.contains("FIFO"), "\(command): \(out.stderr)")
        }
    }

    // MARK: Full disk at open (finding 5)

    @Test(.enabled(if: canMount, "needs root and mount"))
    func aFullDiskWithoutALockFileIsStoreFullNotSIGBUS() throws {
        let dir = TemporaryDirectory()
        let mount = try TmpfsMount(in: dir, name: "small", size: "1m")
        defer { withExtendedLifetime(mount) {} }
        let mountPoint = mount.path
        let path = mountPoint + "/ledger"
        var options = LedgerOptions(role: "app")
        options.initialMapSize = 256 << 10
        _ = try Ledger(path: path, options: options).append(event())
        try FileManager.default.removeItem(atPath: path + "/lock.mdb")
        // Fill the disk.
        let ballast = FileHandle(forWritingAtPath: mountPoint + "/ballast") ?? {
            _ = FileManager.default.createFile(atPath: mountPoint + "/ballast", contents: nil)
            return FileHandle(forWritingAtPath: mountPoint + "/ballast")
        }()
        let chunk = Data(count: 4096)
        while (try? ballast?.write(contentsOf: chunk)) != nil {}
        try ballast?.close()

        let error = openError(path, options)
        guard case .storeFull(_, let reason)? = error else {
            Issue.record("a full disk without a lock file: \(String(describing: error))")
            return
        }
        #expect(reason.contains("no space"), "\(reason)")
        for command in [["inspect", path], ["verify", path], ["widget", path]] {
            let out = try Processes.run(cli, command, timeout: 30)
            #expect(!out.signalled && out.status == 4, "\(command): \(out.status) \(out.stderr)")
        }
        // Space again: the ledger opens with its event.
        try FileManager.default.removeItem(atPath: mountPoint + "/ballast")
        #expect(try Ledger(path: path, options: options).read { try $0.count() } == 1)
    }

    // MARK: Read-only mount beside live writers (finding 7)

    @Test(.enabled(if: canMount, "needs root and mount"))
    func aReaderThatCannotRegisterIsRefusedWhileWritersAreLive() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let readOnlyView = dir.child("ro")
        _ = try Ledger(path: path).append(event())
        try FileManager.default.createDirectory(atPath: readOnlyView, withIntermediateDirectories: true)
        #expect(try Processes.run("/bin/mount", ["--bind", path, readOnlyView]).status == 0)
        defer { _ = try? Processes.run("/bin/umount", ["-l", readOnlyView]) }
        #expect(try Processes.run("/bin/mount", ["-o", "remount,ro,bind", readOnlyView]).status == 0)

        // Nobody else has it open: reading through the read-only view works.
        let alone = try Processes.run(agent, ["open", readOnlyView, "ro"])
        #expect(alone.status == 0 && alone.stdout.contains("count 1"), "\(alone.stdout) \(alone.stderr)")

        let writer = try Processes.start(agent, ["write", path, "app", "-1", "5", dir.child("acks"), "20", "none"])
        defer { writer.kill(); _ = try? writer.wait(timeout: 30) }
        _ = waitUntil { !((try? String(contentsOfFile: dir.child("acks"), encoding: .utf8))?.isEmpty ?? true) }
        let beside = try Processes.run(agent, ["open", readOnlyView, "ro"])
        #expect(beside.status == 2 && !beside.signalled, "\(beside.stdout) \(beside.stderr)")
        #expect(beside.stdout.contains("other processes have the ledger open"), "\(beside.stdout)")
    }

    // MARK: Verify while others append (finding 9)

    @Test func verifyNeverCriesWolfWhileOthersAppend() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try Ledger(path: path).append(event())
        let writers = try (0..<2).map { i in
            try Processes.start(agent, ["write", path, "w\(i)", "-1", "\(i + 1)", dir.child("acks\(i)"), "50", "none"])
        }
        defer { for w in writers { w.kill(); _ = try? w.wait(timeout: 30) } }
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "verifier"))
        #expect(try waitUntil { try ledger.read({ try $0.head() }) >= 200 }, "the writers did not start")
        let before = try ledger.read({ try $0.head() })
        var runs = 0
        // 40 runs, and on until the writers have appended 100 more events meanwhile (the events
        // this waits for; a loaded machine makes it slower, never shorter).
        let guardDeadline = Date().addingTimeInterval(hangGuardSeconds)
        func writersAppendedMeanwhile() throws -> Bool { try ledger.read({ try $0.head() }) > before + 100 }
        while Date() < guardDeadline {
            if runs >= 40, try writersAppendedMeanwhile() { break }
            let report = try ledger.maintenance.verify()
            #expect(report.isHealthy, "run \(runs): \(report.findings)")
            runs += 1
        }
        #expect(try ledger.read({ try $0.head() }) > before + 100, "the writers did not write while verify ran")
    }
}
