import Foundation
import Testing
import TestSupport
@testable import InboxLedger

#if canImport(Glibc)
import Glibc
#endif

/// A process started with descriptors 0–2 closed (issue 22, item 3; docs/lmdb.md rule 28):
/// LMDB's files used to take descriptors 1 and 2, and what the process printed landed inside
/// the store. Real child processes, started with their standard descriptors closed.
@Suite(.serialized) struct StandardDescriptorTests {
    let cli = Processes.product("ledger")
    let agent = Processes.product("LedgerTestAgent")

    /// Starts `executable` with `closing` of descriptors 0–2 closed (`posix_spawn` file actions;
    /// the others /dev/null) and waits for its exit status (nil: killed by a signal).
    func spawnClosed(_ executable: String, _ arguments: [String], closing: [Int32]) throws -> Int32? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in 0...2 {
            if closing.contains(fd) {
                posix_spawn_file_actions_addclose(&actions, fd)
            } else {
                posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_RDWR, 0)
            }
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        try #require(code == 0, "posix_spawn: \(code)")
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            try #require(errno == EINTR, "waitpid: \(errno)")
        }
        let signalled = (status & 0x7f) != 0
        return signalled ? nil : (status >> 8) & 0xff
    }

    /// The ledger opens, holds exactly `count` events and verifies; its files start as LMDB
    /// writes them (a print to a descriptor LMDB holds lands at offset 0: LMDB writes with
    /// `pwrite` and never moves the offset) and hold none of what the children printed.
    func expectIntact(_ path: String, count: Int, printed: [String]) throws {
        let data = try #require(fileBytes(path + "/data.mdb"))
        let lock = try #require(fileBytes(path + "/lock.mdb"))
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        #expect(data.prefix(8).allSatisfy { $0 == 0 }, "meta page 0's page number was overwritten: \(Array(data.prefix(8)))")
        #expect(Array(data[pageSize..<(pageSize + 8)]) == [1, 0, 0, 0, 0, 0, 0, 0], "meta page 1's page number was overwritten")
        #expect(Array(lock.prefix(4)) == [0xDE, 0xC0, 0xEF, 0xBE], "lock.mdb's magic was overwritten: \(Array(lock.prefix(4)))")
        for (name, bytes) in [("data.mdb", data), ("lock.mdb", lock)] {
            for text in printed {
                #expect(bytes.range(of: Data(text.utf8)) == nil, "\(name) holds the printed text '\(text)'")
            }
        }
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "check"))
        #expect(try ledger.read({ try $0.count() }) == count)
        #expect(try ledger.read({ try $0.head() }) == UInt64(count))
        #expect(try ledger.maintenance.verify().isHealthy)
    }

    /// The library's own child: all three closed, it appends and prints the sequence number.
    @Test func aProcessStartedWithoutStandardDescriptorsWritesNothingIntoTheStore() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        for round in 1...4 {
            // The first round creates the ledger, the others open it.
            let status = try spawnClosed(agent, ["append-key", path, "closed-\(round)", #"{"marker":"closed-descriptors"}"#], closing: [0, 1, 2])
            #expect(status == 0, "round \(round): status \(String(describing: status))")
        }
        // What the agent printed: the sequence numbers, a line each (an error: "error: …").
        try expectIntact(path, count: 4, printed: ["error:"])
    }

    /// Issue 22's report: `ledger append D >&- 2>&-` (stdin a pipe). Its acknowledgements and
    /// any error text used to land in data.mdb.
    @Test func theCLIWithStdoutAndStderrClosedWritesNothingIntoTheStore() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let line = #"{"type":"app.note","data":{"note":"closed"}}"#
        for round in 1...4 {
            let out = try Processes.run("/bin/sh", ["-c", #"printf '%s\n' "$1" | "$2" append "$3" >&- 2>&-"#, "sh", line, cli, path], timeout: 60)
            #expect(out.status == 0 && !out.signalled, "round \(round): \(out.status) \(out.stderr)")
        }
        // A bad line makes the CLI print an error (to the closed stderr): not into the store either.
        let bad = try Processes.run("/bin/sh", ["-c", #"printf 'not json\n' | "$1" append "$2" >&- 2>&-"#, "sh", cli, path], timeout: 60)
        #expect(bad.status != 0 && !bad.signalled)
        try expectIntact(path, count: 4, printed: ["not json", "line 1"])
    }
}
