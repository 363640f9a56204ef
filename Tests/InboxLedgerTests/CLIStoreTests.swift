import Foundation
import Testing
import TestSupport
@testable import InboxLedger
@testable import LMDB

#if canImport(Glibc)
import Glibc
#endif

/// A closed ledger of `count` events of about 300 bytes, a message and a consumer.
private func notesLedger(_ dir: TemporaryDirectory, count: Int) throws -> String {
    try notesLedger(dir, count: count) { ledger in
        try ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [
            InboxMessage(id: "m1", title: "Hello", sentAt: Timestamp(micros: 1_790_000_000_000_000)),
        ])))
        _ = try ledger.consumers.consumer(named: "host")
    }
}

/// data.mdb's bytes and modification time (to the nanosecond).
private func fingerprint(_ path: String) throws -> (Data, Int, Int) {
    var s = stat()
    #expect(stat(path + "/data.mdb", &s) == 0)
    return (try #require(fileBytes(path + "/data.mdb")), s.st_mtim.tv_sec, s.st_mtim.tv_nsec)
}

/// Every command of the CLI that only reads (issue 22, item 9).
private func readingCommands(_ path: String) -> [[String]] {
    [["inspect", path], ["inspect", path, "--json"], ["verify", path], ["verify", path, "--json"], ["events", path],
     ["events", path, "--json"], ["widget", path], ["widget", path, "--json"], ["consumers", path], ["consumers", path, "--json"],
     ["compact", path, "--dry-run"], ["compact", path, "--dry-run", "--json"]]
}

/// Issue 22, item 9: reading commands and dry runs open read-only: a ledger an opening would
/// upgrade stays byte-identical.
@Suite(.serialized) struct ReadingCommandsWriteNothingTests {
    let cli = Processes.product("ledger")

    @Test func aFormatOneLedgerStaysByteIdentical() throws {
        let dir = TemporaryDirectory()
        let path = try notesLedger(dir, count: 300)
        #expect(try rewriteAsFormatOne(path) > 0)
        let before = try fingerprint(path)
        for command in readingCommands(path) {
            let out = try Processes.run(cli, command, timeout: hangGuardSeconds)
            #expect(out.status == 0, "\(command): \(out.stderr)")
            let after = try fingerprint(path)
            #expect(after.0 == before.0 && after.1 == before.1 && after.2 == before.2, "\(command) wrote data.mdb")
        }
        let inspect = try Processes.run(cli, ["inspect", path, "--json"])
        #expect(inspect.stdout.contains(#""formatVersion":1"#), "\(inspect.stdout)")
        // A writable opening still upgrades it.
        #expect(try Ledger(path: path).metadata.formatVersion == Schema.formatVersion)
    }

    @Test func aLedgerWithOlderProjectionsStaysByteIdentical() throws {
        let dir = TemporaryDirectory()
        let path = try notesLedger(dir, count: 50)
        do {
            let ledger = try Ledger(path: path)
            try ledger.write("older rules") { txn in
                try txn.rawTransaction.put(ledger.schema.meta, key: Schema.MetaKey.projectionVersion, value: [1, 0, 0, 0])
            }
        }
        let before = try fingerprint(path)
        for command in readingCommands(path) {
            let out = try Processes.run(cli, command, timeout: hangGuardSeconds)
            #expect(!out.signalled, "\(command): \(out.stderr)")
            let after = try fingerprint(path)
            #expect(after.0 == before.0 && after.1 == before.1 && after.2 == before.2, "\(command) wrote data.mdb")
        }
    }
}

/// Issue 22, item 10: no command of the CLI ends by a signal on a damaged file. LMDB aborts
/// (IS_LEAF) or faults on some damaged pages; every command reads in a guarded child and
/// reports that as a corrupt store (exit 3).
@Suite(.serialized) struct DamagedStoreCommandTests {
    let cli = Processes.product("ledger")

    @Test func noCommandEndsByASignalOnSeededPageDamage() throws {
        let dir = TemporaryDirectory()
        let path = try notesLedger(dir, count: 3000)
        let file = path + "/data.mdb"
        let pristine = try #require(fileBytes(file))
        let pages = pristine.count / 4096
        let commands: [[String]] = [
            ["events", path, "--limit", "100000"], ["events", path, "--json", "--limit", "100000"], ["widget", path],
            ["consumers", path], ["consume", path, "--name", "host", "--limit", "100000"], ["compact", path, "--dry-run"],
            ["compact", path, "--retained-tail", "100"], ["inspect", path], ["verify", path],
        ]
        var rng = SeededGenerator(seed: 11)
        var crashesReported: [String: Int] = [:]
        for trial in 0..<60 {
            var damaged = pristine
            let page = Int.random(in: 2..<pages, using: &rng)
            // The page header half the time (type, bounds), else its contents.
            let offset = page * 4096 + (trial % 2 == 0 ? Int.random(in: 0..<16, using: &rng) : Int.random(in: 16..<4096, using: &rng))
            for k in 0..<8 where offset + k < damaged.count { damaged[offset + k] ^= UInt8.random(in: 1...255, using: &rng) }
            for command in commands {
                // Each command meets the same damage (consume and compact may write).
                _ = FileManager.default.createFile(atPath: file, contents: damaged)
                try? FileManager.default.removeItem(atPath: path + "/lock.mdb")
                let out = try Processes.run(cli, command, timeout: hangGuardSeconds)
                #expect(!out.signalled, "trial \(trial), \(command[0]): ended by signal \(out.status): \(out.stderr)")
                #expect([0, 1, 3, 4].contains(out.status), "trial \(trial), \(command): exit \(out.status) \(out.stderr)")
                if out.stderr.contains("corrupt store: reading it crashed the process") {
                    #expect(out.status == 3, "trial \(trial), \(command)")
                    crashesReported[command[0], default: 0] += 1
                }
            }
        }
        // The seeds include damage that makes LMDB abort or fault while reading the log.
        #expect(crashesReported["events", default: 0] > 0, "\(crashesReported)")
    }
}

/// Issue 22, item 12: damage is a corrupt store, and this layer's own conditions are never
/// mistaken for C codes.
@Suite struct ErrorMappingTests {
    @Test func aMalformedProjectionRowIsACorruptStoreNamingTableAndKey() throws {
        let dir = TemporaryDirectory()
        let path = try notesLedger(dir, count: 5)
        do {
            let ledger = try Ledger(path: path)
            try ledger.write("damage") { txn in try txn.projections.put(.messages, Array("m1".utf8), [1, 2, 3]) }
            let error = #expect(throws: LedgerError.self) {
                try ledger.append(.messageRead(ReadChange(ids: ["m1"], read: true)))
            }
            guard case .corruptStore(let at, let reason)? = error else {
                Issue.record("expected corruptStore, got \(String(describing: error))")
                return
            }
            #expect(at == path)
            #expect(reason.contains("messages") && reason.contains("'m1'"), "\(reason)")
        }
        let out = try Processes.run(Processes.product("ledger"), ["append", path],
                                    input: Data(#"{"type":"message.read","data":{"ids":["m1"],"read":true}}"#.utf8))
        #expect(out.status == 3, "\(out.stderr)")
        #expect(out.stderr.contains("corrupt store: projection table 'messages' has a malformed row 'm1'"), "\(out.stderr)")
    }

    @Test func ownConditionsHaveTheirOwnCases() {
        #expect(LMDBError(rawValue: ETIMEDOUT) != .writeLockTimeout)
        #expect(LMDBError(rawValue: -30_600) != .suspended)
        #expect(LMDBError.timedOut == .code(ETIMEDOUT))
        // A real timeout while opening is a storage failure with its code, never a busy writer.
        guard case .storage(_, "open", ETIMEDOUT, _) = LedgerError.from(LMDBError.timedOut, path: "/l", operation: "open") else {
            Issue.record("ETIMEDOUT: \(LedgerError.from(LMDBError.timedOut, path: "/l", operation: "open"))")
            return
        }
        guard case .writerBusy("/l", nil, 0.5) = LedgerError.from(LMDBError.writeLockTimeout, path: "/l", operation: "create ledger", writeTimeout: 0.5) else {
            Issue.record("writeLockTimeout: \(LedgerError.from(LMDBError.writeLockTimeout, path: "/l", operation: "x", writeTimeout: 0.5))")
            return
        }
        #expect(LedgerError.from(LMDBError.suspended, path: "/l", operation: "read") == .suspended)
        guard case .storage = LedgerError.from(LMDBError(rawValue: -30_600), path: "/l", operation: "read") else {
            Issue.record("a C code equal to the old suspended code was taken for a suspension")
            return
        }
    }
}

/// Issue 22, item 8: a new consumer starts at the first event still in the log.
@Suite struct ConsumerStartTests {
    @Test func aNewConsumerOfACompactedLedgerStartsAtTheFirstRetainedEvent() throws {
        let dir = TemporaryDirectory()
        let ledger = try Ledger(path: dir.child("l"), options: LedgerOptions(role: "app"))
        try ledger.append(contentsOf: (0..<300).map { NewEvent(type: "app.note", payload: Array(#"{"i":\#($0)}"#.utf8)) })
        _ = try Compactor(ledger: ledger, policy: policy(tail: 100, chunk: 100)).runOnce()
        let first = try ledger.read({ try $0.firstSequence() })
        #expect(first == 201)
        let late = try ledger.consumers.consumer(named: "late")
        #expect(try late.cursor() == first - 1)
        let batch = try late.next(limit: 5)
        #expect(batch.events.map(\.sequence) == Array(first..<(first + 5)))
        try late.commit(batch)
        #expect(try late.cursor() == first + 4)
        // On a log never trimmed it is 0, and `.end` is still the head.
        let other = try Ledger(path: dir.child("fresh"), options: LedgerOptions(role: "app"))
        try other.append(NewEvent(type: "app.note", payload: Array("{}".utf8)))
        #expect(try other.consumers.consumer(named: "a").cursor() == 0)
        #expect(try ledger.consumers.consumer(named: "b", startingAt: .end).cursor() == 300)
    }
}
