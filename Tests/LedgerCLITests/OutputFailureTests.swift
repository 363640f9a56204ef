import Foundation
import Testing
import TestSupport

/// A ledger of `count` events of about 250 bytes each, written by the CLI.
private func ledgerOfNotes(_ count: Int, in dir: TemporaryDirectory) throws -> String {
    let path = dir.child("l")
    let pad = String(repeating: "p", count: 200)
    let lines = (0..<count).map { #"{"type":"app.note","data":{"i":\#($0),"pad":"\#(pad)"}}"# }.joined(separator: "\n")
    let out = try ledger("append", path, "--batch", "100", "--durability", "none", input: lines)
    #expect(out.status == 0, "\(out.stderr)")
    return path
}

/// The cursor of consumer `name` as `ledger consumers --json` reports it (nil: not registered).
private func cursor(of name: String, in path: String) throws -> Int? {
    let out = try ledger("consumers", path, "--json")
    let array = try #require(try JSONSerialization.jsonObject(with: Data(out.stdout.utf8)) as? [[String: Any]])
    return array.first { $0["name"] as? String == name }?["cursor"] as? Int
}

/// Runs `shell` with bash, the ledger binary as `$0` and `arguments` as `$1`…, SIGPIPE ignored
/// (as many supervisors start processes): a write to a pipe whose reader has gone fails with EPIPE.
private func withSIGPIPEIgnored(_ shell: String, _ arguments: String...) throws -> ProcessOutput {
    try Processes.run("/bin/bash", ["-c", #"trap "" PIPE; "# + shell, ledgerBinary] + arguments, timeout: hangGuardSeconds)
}

/// Issue 22, items 2 and 6: every write to stdout is checked; a failed one stops the command
/// with exit 4 and a message, before it commits anything.
@Suite struct OutputFailureTests {
    @Test func consumeCommitsNothingWhenItsReaderLeavesEarly() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerOfNotes(600, in: dir)
        // 500 lines of about 330 bytes: far more than the pipe holds and head reads before it exits.
        let out = try withSIGPIPEIgnored(#""$0" consume "$1" --name c --limit 500 | head -1; exit ${PIPESTATUS[0]}"#, path)
        #expect(out.status == 4, "\(out.stderr)")
        #expect(out.stderr.contains("cannot write to standard output: the reader of the pipe has gone (EPIPE)"), "\(out.stderr)")
        #expect(out.stdout.split(separator: "\n").count == 1)
        #expect(try cursor(of: "c", in: path) == 0, "the cursor moved past what was delivered")
        // The next run delivers the same events, from the first.
        let again = try ledger("consume", path, "--name", "c", "--limit", "500")
        #expect(again.status == 0, "\(again.stderr)")
        let sequences = try again.stdout.split(separator: "\n").map { try jsonObject(String($0))["sequence"] as? Int }
        #expect(sequences == Array(1...500))
        #expect(try cursor(of: "c", in: path) == 500)
    }

    @Test func consumeCommitsNothingOnAFullDevice() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerOfNotes(10, in: dir)
        _ = try ledger("consume", path, "--name", "c", "--limit", "2")
        let out = try withSIGPIPEIgnored(#""$0" consume "$1" --name c --limit 5 > /dev/full"#, path)
        #expect(out.status == 4, "\(out.stderr)")
        #expect(out.stderr.contains("cannot write to standard output: No space left on device"), "\(out.stderr)")
        #expect(try cursor(of: "c", in: path) == 2)
    }

    @Test func followEndsWhenTheReaderOfItsPipeLeaves() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerOfNotes(3, in: dir)
        // head takes the first line and exits; the follower must notice and end, not wait for
        // appends for ever. (Before: it never exited.)
        let out = try withSIGPIPEIgnored(#""$0" events "$1" --follow --json | head -1; exit ${PIPESTATUS[0]}"#, path)
        #expect(out.status == 4, "\(out.stderr)")
        #expect(out.stderr.contains("cannot write to standard output"), "\(out.stderr)")
        #expect(try jsonObject(out.stdout)["sequence"] as? Int == 1)
    }

    @Test func followEndsWhenItsReaderLeavesWhileItWaits() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerOfNotes(3, in: dir)
        // Nothing after 3 is ever appended, so no write can fail: only noticing the closed pipe
        // while it waits can end the follower (`true` reads nothing and exits at once).
        let out = try withSIGPIPEIgnored(#"{ "$0" events "$1" --after 3 --follow; echo "follower $?" >&2; } | true"#, path)
        #expect(out.status == 0)
        #expect(out.stderr.contains("follower 4"), "\(out.stderr)")
        #expect(out.stderr.contains("the reader of the pipe has gone"), "\(out.stderr)")
    }
}

/// Issue 22, item 8: a new consumer starts at the first retained event, and a consumer that
/// fell behind a trim can be rebased from the command line.
@Suite struct ConsumerRebaseCommandTests {
    @Test func aConsumerRegisteredOnACompactedLedgerReadsTheFirstRetainedEvent() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerOfNotes(300, in: dir)
        let compact = try ledger("compact", path, "--retained-tail", "100", "--json")
        #expect(compact.status == 0, "\(compact.stderr)")
        let first = try #require(try jsonObject(compact.stdout)["firstSequence"] as? Int)
        #expect(first > 1)
        let late = try ledger("consume", path, "--name", "late", "--limit", "3")
        #expect(late.status == 0, "\(late.stderr)")
        #expect(try late.stdout.split(separator: "\n").map { try jsonObject(String($0))["sequence"] as? Int } == [first, first + 1, first + 2])
    }

    @Test func rebaseMovesABehindConsumerToTheHead() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerOfNotes(300, in: dir)
        #expect(try ledger("consume", path, "--name", "old", "--limit", "1").status == 0)
        // A lease of 0 s: the silent consumer no longer holds trimming back.
        let compact = try ledger("compact", path, "--retained-tail", "50", "--consumer-lease", "0", "--json")
        #expect(compact.status == 0, "\(compact.stderr)")
        let behind = try ledger("consume", path, "--name", "old")
        #expect(behind.status == 1 && behind.stderr.contains("events it has not read were trimmed"), "\(behind.stderr)")

        let rebase = try ledger("consumers", "rebase", path, "old")
        #expect(rebase.status == 0, "\(rebase.stderr)")
        #expect(rebase.stdout.contains("Rebased consumer 'old' from 1 to 300"), "\(rebase.stdout)")
        #expect(try cursor(of: "old", in: path) == 300)
        let after = try ledger("consume", path, "--name", "old")
        #expect(after.status == 0 && after.stdout.isEmpty, "\(after.stderr)")

        let unknown = try ledger("consumers", "rebase", path, "nobody")
        #expect(unknown.status == 1 && unknown.stderr.contains("no consumer named 'nobody'"))
        #expect(try cursor(of: "nobody", in: path) == nil, "rebase registered a consumer")
        #expect(try ledger("consumers", "rebase", path, "old", "--read-only").status == 2)
    }
}
