import Foundation
import Testing
import TestSupport
@testable import InboxLedger
@testable import LMDB

#if canImport(Glibc)
import Glibc
#endif

/// A damaged start of `data.mdb` is not an unfinished creation (issue 22, item 1;
/// docs/lmdb.md rule 23, docs/reliability.md "What the world does to files"). Only what a
/// creation of this library writes before its first commit is ever emptied; a ledger whose meta
/// pages were zeroed, a truncated ledger and a foreign file are refused with a typed error, and
/// not one byte is written.
@Suite(.serialized) struct DamagedStartTests {
    let cli = Processes.product("ledger")

    /// A closed ledger of `count` events, each appended in its own commit.
    func ledger(_ dir: TemporaryDirectory, count: Int = 10) throws -> String {
        let path = dir.child("ledger")
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        for i in 0..<count { _ = try ledger.append(event("app.note", #"{"i":\#(i)}"#)) }
        return path
    }

    func zero(_ file: String, from start: Int, count: Int) throws {
        var bytes = try #require(fileBytes(file))
        bytes.replaceSubrange(start..<(start + count), with: Data(count: count))
        #expect(FileManager.default.createFile(atPath: file, contents: bytes))
    }

    func openError(_ path: String, readOnly: Bool = false) -> LedgerError? {
        var options = LedgerOptions(role: "app")
        options.readOnly = readOnly
        do {
            _ = try Ledger(path: path, options: options)
            return nil
        } catch {
            return error
        }
    }

    // Through a shell pipe: a refused `ledger append` exits before reading its input, and a
    // write to its closed stdin from this process would fail here instead (EPIPE).
    func append(_ path: String) throws -> ProcessOutput {
        try Processes.run("/bin/sh", ["-c", #"printf '%s\n' "$1" | "$2" append "$3""#, "sh", #"{"type":"app.note","data":{}}"#, cli, path], timeout: 60)
    }

    /// Issue 22's report: the first 8,192 bytes of a 10-event ledger zeroed. `ledger append`
    /// used to empty the file and acknowledge sequence 1.
    @Test func zeroedMetaPagesOfALedgerAreRefusedNeverEmptied() throws {
        let dir = TemporaryDirectory()
        let path = try ledger(dir)
        let file = path + "/data.mdb"
        try zero(file, from: 0, count: 8192)
        let damaged = try #require(fileBytes(file))
        let out = try append(path)
        #expect(!out.signalled && out.status == 3, "append: \(out.status) \(out.stdout) \(out.stderr)")
        #expect(out.stderr.contains("corrupt store") && out.stderr.contains("meta pages"), "\(out.stderr)")
        #expect(out.stdout.isEmpty, "an append was acknowledged: \(out.stdout)")
        for readOnly in [false, true] {
            guard case .corruptStore(let where_, let reason)? = openError(path, readOnly: readOnly) else {
                Issue.record("readOnly \(readOnly): expected corruptStore, got \(String(describing: openError(path, readOnly: readOnly)))")
                continue
            }
            #expect(where_ == path && reason.contains("not an unfinished creation"), "\(reason)")
        }
        #expect(fileBytes(file) == damaged, "nothing may be written to a damaged store")
    }

    /// One meta page zeroed: the other still names every tree (LMDB 0.9.24 refuses the file all
    /// the same: it checks both), so it is damage to report, never a creation to finish.
    @Test(arguments: [0, 1])
    func oneZeroedMetaPageIsACorruptStore(page: Int) throws {
        let dir = TemporaryDirectory()
        let path = try ledger(dir)
        let file = path + "/data.mdb"
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        try zero(file, from: page * pageSize, count: pageSize)
        let damaged = try #require(fileBytes(file))
        guard case .corruptStore(_, let reason)? = openError(path) else {
            Issue.record("expected corruptStore, got \(String(describing: openError(path)))")
            return
        }
        #expect(reason.contains("meta page \(page)"), "\(reason)")
        let out = try append(path)
        #expect(!out.signalled && out.status == 3, "append: \(out.status) \(out.stderr)")
        #expect(fileBytes(file) == damaged)
    }

    /// A ledger cut short anywhere in or after its meta pages, with or without its meta pages
    /// zeroed: refused, the file unchanged. (Zeroed and cut within its meta pages it holds
    /// nothing but zeros, like a creation cut before its first write: that is finished.)
    @Test(arguments: [100, 4096, 6000, 8192, 5 * 4096, 9 * 4096])
    func aTruncatedLedgerIsRefusedNeverEmptied(size: Int) throws {
        let dir = TemporaryDirectory()
        let path = try ledger(dir, count: 200)
        let file = path + "/data.mdb"
        for zeroed in size > 8192 ? [false, true] : [false] {
            var bytes = try #require(fileBytes(path + "/data.mdb"))
            if zeroed { bytes.replaceSubrange(0..<min(8192, bytes.count), with: Data(count: min(8192, bytes.count))) }
            let cut = bytes.prefix(size)
            #expect(FileManager.default.createFile(atPath: file, contents: cut))
            let error = openError(path)
            switch error {
            case .corruptStore?, .notALedger?: break
            default: Issue.record("cut to \(size), zeroed \(zeroed): \(String(describing: error))")
            }
            let out = try append(path)
            #expect(!out.signalled && out.status == 3, "cut to \(size), zeroed \(zeroed): \(out.status) \(out.stderr)")
            #expect(fileBytes(file) == cut, "cut to \(size), zeroed \(zeroed): the file was changed")
            if !zeroed { _ = FileManager.default.createFile(atPath: file, contents: bytes) }
        }
    }

    /// Files this library did not write: zeros then pages of random bytes, zeros then LMDB-looking
    /// page headers past what a creation writes, and another database's file.
    @Test(arguments: ["zeros-then-random", "zeros-then-pages", "sqlite"])
    func aForeignFileIsRefusedUntouched(kind: String) throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var rng = SeededGenerator(seed: 22)
        var bytes: Data
        switch kind {
        case "zeros-then-random":
            bytes = Data(count: 8192) + Data((0..<100_000).map { _ in UInt8.random(in: 0...255, using: &rng) })
        case "zeros-then-pages":
            // Two zero pages, then a "leaf page" at its own number (2): bigger than a creation.
            bytes = Data(count: 12 * 4096)
            bytes[2 * 4096] = 2
            bytes[2 * 4096 + 10] = 0x02
        default:
            bytes = Data("SQLite format 3\0".utf8) + Data(count: 4096 - 16) + Data(repeating: 0x0D, count: 4096)
        }
        _ = FileManager.default.createFile(atPath: path + "/data.mdb", contents: bytes)
        let error = openError(path)
        switch error {
        case .corruptStore?, .notALedger?: break
        default: Issue.record("\(kind): \(String(describing: error))")
        }
        let out = try append(path)
        #expect(!out.signalled && out.status == 3, "\(kind): \(out.status) \(out.stderr)")
        #expect(fileBytes(path + "/data.mdb") == bytes)
        #expect(!FileManager.default.fileExists(atPath: path + "/lock.mdb"), "\(kind): lock.mdb was created")
    }

    /// The probe's bound is what a creation really writes: the environment layer creating every
    /// table of a ledger (the first transaction of a creation) leaves at most
    /// `DataFileProbe.creationPages` pages, the last the main tree's leaf of empty tables — and
    /// with its meta pages lost (a power cut before they reached the disk) that file is still an
    /// unfinished creation.
    @Test func aCreationWritesNoMoreThanTheProbeAllows() throws {
        let dir = TemporaryDirectory()
        var config = EnvironmentConfiguration()
        config.databases = Dictionary(uniqueKeysWithValues: Schema.allNames.map { ($0, DatabaseFlags()) })
        do { _ = try Environment.open(directory: dir.path, configuration: config) }
        let file = dir.child("data.mdb")
        var bytes = try #require(fileBytes(file))
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        #expect(bytes.count <= DataFileProbe.creationPages * pageSize, "a creation wrote \(bytes.count) bytes")
        #expect(DataFileProbe.isCreationLeaf(Array(bytes[(2 * pageSize)...].prefix(pageSize)), page: 2))
        bytes.replaceSubrange(0..<(2 * pageSize), with: Data(count: 2 * pageSize))
        _ = FileManager.default.createFile(atPath: file, contents: bytes)
        #expect(DataFileProbe.probe(directory: dir.path) == .unfinishedCreation(fileSize: bytes.count))
        // The ledger finishes it.
        let ledger = try Ledger(path: dir.path, options: LedgerOptions(role: "app"))
        #expect(try ledger.append(event()) == 1)
        #expect(try ledger.maintenance.verify().isHealthy)
    }
}
