import Foundation
import Testing
import TestSupport

/// The torture runner (`ledger-torture`, docs/reliability.md): a short run in CI, and proof
/// that its accounting catches what it exists to catch.
@Suite struct TortureTests {
    let runner = Processes.product("ledger-torture")

    func summary(_ out: ProcessOutput) throws -> [String: Int] {
        let last = try #require(out.stdout.split(separator: "\n").last)
        let object = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        return (object ?? [:]).compactMapValues { $0 as? Int }
    }

    @Test func shortRunLosesNothing() async throws {
        let dir = TemporaryDirectory()
        let out = try await offThePool { [runner] in
            try Processes.run(runner, ["--rounds", "6", "--round-seconds", "1", "--seed", "7", "--json", "--directory", dir.path], timeout: 600)
        }
        let s = try summary(out)
        #expect(out.status == 0, "\(out.stderr.suffix(2000))")
        #expect(s["rounds"] == 6)
        #expect((s["processesKilled"] ?? 0) >= 6)
        #expect((s["eventsAcknowledged"] ?? 0) > 0)
        for field in ["eventsLost", "eventsDuplicated", "partialBatches", "verifyFailures", "hangs"] {
            #expect(s[field] == 0, "\(field): \(out.stderr.suffix(2000))")
        }
    }

    @Test func anAcknowledgementOfANeverWrittenBatchCountsAsLost() async throws {
        let dir = TemporaryDirectory()
        let out = try await offThePool { [runner] in
            try Processes.run(runner, ["--rounds", "1", "--round-seconds", "1", "--json", "--directory", dir.path],
                              timeout: 300, environment: ["LEDGER_TORTURE_FAULT": "phantom-ack"])
        }
        #expect(out.status == 1)
        #expect((try summary(out)["eventsLost"] ?? 0) >= 1, "\(out.stderr.suffix(1000))")
        #expect(out.stderr.contains("is not in the log"))
    }

    @Test func aBlindRetryWithoutKeysCountsAsDuplicated() async throws {
        let dir = TemporaryDirectory()
        let out = try await offThePool { [runner] in
            try Processes.run(runner, ["--rounds", "1", "--round-seconds", "1", "--json", "--directory", dir.path],
                              timeout: 300, environment: ["LEDGER_TORTURE_FAULT": "double-append"])
        }
        #expect(out.status == 1)
        #expect((try summary(out)["eventsDuplicated"] ?? 0) >= 1, "\(out.stderr.suffix(1000))")
        #expect(out.stderr.contains("appears twice"))
    }

    @Test func badArgumentsAreRejected() throws {
        let out = try Processes.run(runner, ["--rounds", "0"])
        #expect(out.status == 2)
        #expect(out.stderr.contains("--rounds needs a positive number"))
    }
}
