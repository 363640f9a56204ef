import Foundation
import Testing
import TestSupport
@testable import InboxLedger

#if canImport(Glibc)
import Glibc
#endif

/// One data file, two lock tables (issue 22, item 4; docs/lmdb.md rule 29): the ledger's files
/// linked, symlinked, replaced or deleted while real processes use them. In each case the
/// writer that would coordinate through another lock table (or write a file no path names) is
/// refused with `filesNotShared` before writing, and no acknowledged event is lost.
@Suite(.serialized) struct SplitLockTests {
    let cli = Processes.product("ledger")
    let agent = Processes.product("LedgerTestAgent")

    /// A writer process (`LedgerTestAgent append-lines`): each key sent is one append, answered
    /// by a line "ack N" or "refused …".
    final class Writer {
        let process = Process()
        let input = Pipe(), output = Pipe()
        var buffer = Data()
        var lines: [String] = []

        init(_ executable: String, _ path: String) throws {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["append-lines", path]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = output
            try process.run()
            #expect(try next() == "open")
        }

        /// The next line it prints (waits for it; fails only if the process ends first).
        func next() throws -> String {
            while true {
                if let newline = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[..<newline], as: UTF8.self)
                    buffer.removeSubrange(...newline)
                    return line
                }
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { throw WriterEnded(output: String(decoding: buffer, as: UTF8.self)) }
                buffer.append(chunk)
            }
        }

        /// Appends one event keyed `key`; its answer.
        func append(_ key: String) throws -> String {
            input.fileHandleForWriting.write(Data((key + "\n").utf8))
            return try next()
        }

        /// Ends its input and waits for it to exit.
        func finish() throws {
            try input.fileHandleForWriting.close()
            while try next() != "bye" {}
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
    }

    struct WriterEnded: Error { var output: String }

    // Through a shell pipe: a refused `ledger append` exits before reading its input, and a
    // write to its closed stdin from this process would fail here instead (EPIPE).
    func cliAppend(_ path: String, key: String) throws -> ProcessOutput {
        let line = #"{"type":"test.keyed","key":"\#(key)","data":{"k":"\#(key)"}}"#
        return try Processes.run("/bin/sh", ["-c", #"printf '%s\n' "$1" | "$2" append "$3""#, "sh", line, cli, path], timeout: 60)
    }

    func expectRefused(_ out: ProcessOutput, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!out.signalled && out.status == 3 && out.stdout.isEmpty && out.stderr.contains("files not shared"),
                "\(what): \(out.status) \(out.stdout) \(out.stderr)", sourceLocation: sourceLocation)
    }

    /// Every event acknowledged is in the ledger at its sequence, and the ledger verifies.
    func expectAcknowledged(_ path: String, _ acks: [String], count: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "check"))
        #expect(try ledger.read({ try $0.count() }) == count, sourceLocation: sourceLocation)
        for ack in acks {
            let seq = try #require(UInt64(ack.dropFirst(4)), "not an ack: \(ack)", sourceLocation: sourceLocation)
            #expect(try ledger.read({ try $0.events(after: seq - 1, limit: 1) }).first?.sequence == seq, sourceLocation: sourceLocation)
        }
        #expect(try ledger.maintenance.verify().isHealthy, sourceLocation: sourceLocation)
    }

    /// A `data.mdb` hard-linked into a second directory, which gets its own `lock.mdb`.
    @Test func aHardLinkedDataFileIsRefusedInBothDirectories() throws {
        let dir = TemporaryDirectory()
        let first = dir.child("first"), second = dir.child("second")
        let writer = try Writer(agent, first)
        let a1 = try writer.append("a1")
        #expect(a1 == "ack 1")
        try FileManager.default.createDirectory(atPath: second, withIntermediateDirectories: true)
        #expect(link(first + "/data.mdb", second + "/data.mdb") == 0)
        // The second writer, through the link: refused at open.
        expectRefused(try cliAppend(second, key: "b1"), "second directory")
        #expect(!FileManager.default.fileExists(atPath: second + "/lock.mdb"), "refused before anything is written")
        // The first writer: refused while the link exists (someone may open through it).
        let a2 = try writer.append("a2")
        #expect(a2.hasPrefix("refused ") && a2.contains("hard links"), "\(a2)")
        #expect(unlink(second + "/data.mdb") == 0)
        let a3 = try writer.append("a3")
        #expect(a3 == "ack 2", "\(a3)")
        try writer.finish()
        try expectAcknowledged(first, [a1, a3], count: 2)
    }

    /// A symbolic link to `data.mdb` in a second directory: a writer there is refused, with or
    /// without a writer in the first; the first keeps writing.
    @Test func aSymlinkedDataFileIsRefused() throws {
        let dir = TemporaryDirectory()
        let first = dir.child("first"), second = dir.child("second")
        let writer = try Writer(agent, first)
        let a1 = try writer.append("a1")
        try FileManager.default.createDirectory(atPath: second, withIntermediateDirectories: true)
        #expect(symlink(first + "/data.mdb", second + "/data.mdb") == 0)
        expectRefused(try cliAppend(second, key: "b1"), "symlink beside a live writer")
        let a2 = try writer.append("a2")
        #expect(a2 == "ack 2", "\(a2)")
        try writer.finish()
        expectRefused(try cliAppend(second, key: "b2"), "symlink alone")
        #expect(!FileManager.default.fileExists(atPath: second + "/lock.mdb"), "refused before anything is written")
        try expectAcknowledged(first, [a1, a2], count: 2)
    }

    /// `lock.mdb` deleted, or replaced by a copy renamed over it, while a writer has it open:
    /// a new writer would build a second lock table. It is refused while the first holds the
    /// data file; the first is refused too (its lock table is no longer the one others find).
    /// Once the first has closed, writers open normally.
    @Test(arguments: ["deleted", "replaced"])
    func aLockFileRemovedUnderAWriterSplitsNothing(change: String) throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let writer = try Writer(agent, path)
        let a1 = try writer.append("a1")
        #expect(a1 == "ack 1")
        if change == "deleted" {
            #expect(unlink(path + "/lock.mdb") == 0)
        } else {
            try FileManager.default.copyItem(atPath: path + "/lock.mdb", toPath: dir.child("lock.copy"))
            #expect(rename(dir.child("lock.copy"), path + "/lock.mdb") == 0)
        }
        expectRefused(try cliAppend(path, key: "b1"), "new writer")
        let a2 = try writer.append("a2")
        #expect(a2.hasPrefix("refused ") && a2.contains("lock.mdb"), "\(a2)")
        try writer.finish()
        let b2 = try cliAppend(path, key: "b2")
        #expect(b2.status == 0 && b2.stdout.hasPrefix("2"), "\(b2.stdout) \(b2.stderr)")
        try expectAcknowledged(path, [a1], count: 2)
    }

    /// `data.mdb` replaced by a copy renamed over it (a sync client's download) while a writer
    /// has the old one open: that writer's appends would go to a file no path names (lost when
    /// it closes), so it is refused; a writer opening now uses the new file.
    @Test func aDataFileReplacedUnderAWriterIsRefusedThere() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let writer = try Writer(agent, path)
        let acks = try (1...3).map { try writer.append("a\($0)") }
        #expect(acks == ["ack 1", "ack 2", "ack 3"])
        try FileManager.default.copyItem(atPath: path + "/data.mdb", toPath: dir.child("data.copy"))
        #expect(rename(dir.child("data.copy"), path + "/data.mdb") == 0)
        let a4 = try writer.append("a4")
        #expect(a4.hasPrefix("refused ") && a4.contains("data.mdb was replaced"), "\(a4)")
        let b4 = try cliAppend(path, key: "b4")
        #expect(b4.status == 0 && b4.stdout.hasPrefix("4"), "\(b4.stdout) \(b4.stderr)")
        try writer.finish()
        try expectAcknowledged(path, acks, count: 4)
    }
}
