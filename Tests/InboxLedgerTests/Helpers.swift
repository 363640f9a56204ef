import Foundation
import InboxLedger
import TestSupport

/// A fresh ledger in a fresh temporary directory.
struct TestLedger {
    let directory = TemporaryDirectory()
    let ledger: Ledger

    init(role: String = "app", durability: LedgerDurability = .none, configure: (inout LedgerOptions) -> Void = { _ in }) throws {
        var options = LedgerOptions(role: role)
        options.durability = durability
        options.durabilityFloor = .none  // a test ledger may skip syncs when a test asks for `none`
        configure(&options)
        ledger = try Ledger(path: directory.child("ledger"), options: options)
    }

    var path: String { directory.child("ledger") }
}

func event(_ type: String = "test.event", _ json: String = "{}", key: String? = nil) -> NewEvent {
    NewEvent(type: type, payload: Array(json.utf8), key: key)
}

/// The bytes of a file, to show that a failed open changed nothing.
func fileBytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }
