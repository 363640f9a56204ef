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

struct MountFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { "mount tmpfs failed: \(message)" }
}

/// A small tmpfs mounted inside `directory` for the life of this value (tests run as root;
/// see `canMount`): a device that fills up, or that can be remounted read-only. Keep it alive
/// to the end of the test with `defer { withExtendedLifetime(mount) {} }`.
final class TmpfsMount {
    let path: String

    init(in directory: TemporaryDirectory, name: String, size: String) throws {
        path = directory.child(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let out = try Processes.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", path])
        guard out.status == 0 else { throw MountFailure(message: out.stderr) }
    }

    // A failed unmount leaves a mount under a temporary directory: nothing to recover here.
    deinit { _ = try? Processes.run("/bin/umount", ["-l", path]) }
}

/// A ledger in `dir` with `count` custom events of about 300 bytes (appended 500 a transaction),
/// then whatever `finish` adds; closed when this returns. Returns its path.
func notesLedger(_ dir: TemporaryDirectory, count: Int, finish: (Ledger) throws -> Void) throws -> String {
    let path = dir.child("ledger")
    let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
    let pad = String(repeating: "p", count: 300)
    for start in stride(from: 0, to: count, by: 500) {
        try ledger.append(contentsOf: (start..<min(start + 500, count)).map { i in
            NewEvent(type: "app.note", payload: Array(#"{"i":\#(i),"pad":"\#(pad)"}"#.utf8))
        })
    }
    try finish(ledger)
    return path
}
