import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// What an outside trial of the library tripped on (issue 21, item 5), each pinned.
@Suite struct OutsideTrialTests {
    @Test func rolesArePrintableUTF8OfAtMost64BytesAndNothingIsCreatedOtherwise() throws {
        let dir = TemporaryDirectory()
        let refused = ["app\nwidget", "tab\there", "del\u{7F}", "line\u{2028}sep", "c1\u{85}", "", String(repeating: "r", count: 65),
                       String(repeating: "é", count: 33)]
        for role in refused {
            do {
                _ = try Ledger(path: dir.child("ledger"), options: LedgerOptions(role: role))
                Issue.record("role \(String(reflecting: role)) was accepted")
            } catch {
                guard case .invalidArgument("origin role", _) = error else { Issue.record("\(String(reflecting: role)): \(error)"); continue }
            }
            #expect(!FileManager.default.fileExists(atPath: dir.child("ledger")), "a refused opening created the directory")
        }
        #expect(throws: LedgerError.invalidArgument(name: "origin role", reason: #"must be printable: U+000A at byte 3 of "app\nwidget""#)) {
            try Ledger(path: dir.child("ledger"), options: LedgerOptions(role: "app\nwidget"))
        }
        for role in ["notification-service", "widget ✓", String(repeating: "r", count: 64), String(repeating: "é", count: 32)] {
            #expect(try Ledger(path: dir.child("ledger"), options: LedgerOptions(role: role)).origin.role == role)
        }
    }

    @Test func onlyTheLastPathComponentIsCreated() throws {
        let dir = TemporaryDirectory()
        do {
            _ = try Ledger(path: dir.child("typo/inbox"))
            Issue.record("a ledger was created under a missing parent")
        } catch {
            guard case .notALedger(_, let reason) = error else { Issue.record("\(error)"); return }
            #expect(reason.contains("parent directory \(dir.child("typo")) does not exist"), "\(reason)")
            #expect(error.recoverySuggestion?.contains("Check the path") == true)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.child("typo")), "the missing parent was created")

        var noCreate = LedgerOptions(role: "widget")
        noCreate.create = false
        #expect(throws: LedgerError.notALedger(path: dir.child("inbox"), reason: "no such directory (an opening with create: false never creates one)")) {
            try Ledger(path: dir.child("inbox"), options: noCreate)
        }
        var readOnly = LedgerOptions(role: "widget")
        readOnly.readOnly = true
        #expect(throws: LedgerError.notALedger(path: dir.child("inbox"), reason: "no such directory (a read-only opening never creates one)")) {
            try Ledger(path: dir.child("inbox"), options: readOnly)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.child("inbox")))

        // The parent exists: the ledger's own directory is created.
        #expect(try Ledger(path: dir.child("inbox/")).read { try $0.head() } == 0)
        #expect(FileManager.default.fileExists(atPath: dir.child("inbox/data.mdb")))
    }

    @Test func recoverySuggestionsFitTheError() throws {
        do {
            _ = try Ledger(path: "")
            Issue.record("an empty path opened a ledger")
        } catch {
            #expect(error == .invalidArgument(name: "path", reason: "is empty: give the ledger's directory"))
            #expect(error.recoverySuggestion == "Fix the input; nothing was written.")
        }
        let missing = LedgerError.storage(path: "/nope/x", operation: "open", code: ENOENT, message: "No such file or directory")
        #expect(missing.recoverySuggestion?.hasPrefix("Check the path") == true)
        #expect(LedgerError.storage(path: "/x", operation: "open", code: EIO, message: "I/O error").recoverySuggestion?.hasPrefix("Retry") == true)
    }

    @Test func aReceiptSaysWhetherAKeyedAppendWasAReplay() async throws {
        let t = try TestLedger()
        let first = try await t.ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-1"))
        #expect(!first.isReplay && first.replayed == [false] && first.sequences == [1])
        let retry = try { () throws(LedgerError) -> AppendReceipt in try t.ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-1")) }()   // the blocking form
        #expect(retry.isReplay && retry.replayed == [true] && retry.sequences == [1])
        let asyncRetry = try await t.ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-1"))
        #expect(asyncRetry.isReplay && asyncRetry.sequences == [1])
        #expect(try await t.ledger.read({ try $0.badge() }) == 1)

        // Per event in a batch: a repeat inside the batch and an earlier commit both count.
        let batch = try await t.ledger.append(AppendRequest([event("com.example.a", "1", key: "k"), event("com.example.b"),
                                                               event("com.example.a", "1", key: "k"), event("badge.adjusted", #"{"delta":1}"#, key: "push-1")]))
        #expect(batch.sequences == [2, 3, 2, 1] && batch.replayed == [false, false, true, true] && !batch.isReplay)
        #expect(try await t.ledger.append(AppendRequest([])).isReplay == false)
        // A receipt encoded before `replayed` existed still decodes.
        let old = try JSONDecoder().decode(AppendReceipt.self, from: Data(#"{"sequences":[4],"notes":[]}"#.utf8))
        #expect(old.sequences == [4] && old.replayed.isEmpty && !old.isReplay)
        #expect(try JSONDecoder().decode(AppendReceipt.self, from: JSONEncoder().encode(batch)) == batch)
    }

    @Test func badgeAdjustmentsTakeIntLikeTheCountsAndKeepTheirEncoding() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m1"), msg("m2")])))
        let list = try t.ledger.read({ try $0.widgetList() })
        let target: Int = list.unreadCount + 3
        let sequence = try t.ledger.append(.badgeAdjusted(.set(target)))
        #expect(try t.ledger.read({ try $0.badge() }) == 5)
        #expect(try t.ledger.read({ try $0.event(at: sequence) })?.payload == Array(#"{"set":5}"#.utf8))
        try t.ledger.append(.badgeAdjusted(.delta(-list.badge)))
        #expect(try t.ledger.read({ try $0.badge() }) == 3)
        #expect(try DomainEvent.decode(type: "badge.adjusted", payload: Array(#"{"delta":-2}"#.utf8)) == .badgeAdjusted(.delta(-2)))
        #expect(throws: LedgerError.invalidEvent(index: 0, field: "data.set", reason: "must be 0…1000000")) {
            try t.ledger.append(.badgeAdjusted(.set(1_000_001)))
        }
    }

    @Test func malformedJSONNamesTheByteWhereItBroke() throws {
        let t = try TestLedger()
        #expect(throws: LedgerError.invalidEvent(index: 0, field: "data", reason: "malformed JSON at byte 11")) {
            try t.ledger.append(event("badge.adjusted", #"{"delta":1,}"#))
        }
        #expect(throws: LedgerError.invalidEvent(index: 0, field: "data", reason: "malformed JSON at byte 4")) {
            try CanonicalJSON.canonicalize(Array("[1,2".utf8))
        }
        let out = try Processes.run(Processes.product("ledger"), ["append", t.path], input: Data(#"{"type":"a","data":{]}"#.utf8 + [0x0A]))
        #expect(out.status == 1 && out.stderr.contains("line 1: invalid event: json: malformed JSON at byte 20"), "\(out.stderr)")
    }

    @Test func headSequenceHasAnAsyncForm() async throws {
        let t = try TestLedger()
        try await t.ledger.append(.badgeAdjusted(.delta(1)))
        try await t.ledger.append(.badgeAdjusted(.delta(1)))
        let head: UInt64 = try await t.ledger.read({ try $0.head() })
        #expect(head == 2)
    }
}
