import Foundation
import Testing
import TestSupport

let scenarioLines = """
    {"type":"inbox.synced","data":{"mode":"full","messages":[{"id":"m1","title":"Welcome","sentAt":"2026-11-20T08:00:00Z"},{"id":"m2","title":"Shipped","subheading":"Tuesday","iconURL":"https://x/i.png","sentAt":"2026-11-21T08:00:00Z"}]},"key":"sync-1"}
    {"type":"widget.action","data":{"actionID":"a1","kind":"markRead","target":"m2"}}
    {"type":"widget.action","data":{"actionID":"a2","kind":"markTaskDone","target":"task-7"}}
    {"type":"badge.adjusted","data":{"delta":3}}
    {"type":"app.custom","data":{"anything":[1,2,3]}}
    """

@Suite struct WidgetCommandTests {
    @Test func jsonShowsWhatTheWidgetShows() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        #expect(try ledger("append", path, input: scenarioLines).status == 0)
        let out = try ledger("widget", path, "--json")
        #expect(out.status == 0, "\(out.stderr)")
        let object = try jsonObject(out.stdout)
        let items = try #require(object["items"] as? [[String: Any]])
        #expect(items.map { $0["id"] as? String } == ["m2", "m1"])
        #expect(items.map { $0["read"] as? Bool } == [true, false])
        #expect(items[0]["subheading"] as? String == "Tuesday")
        #expect(items[0]["iconURL"] as? String == "https://x/i.png")
        #expect(items[0]["sentAt"] as? String == "2026-11-21T08:00:00Z")
        #expect(items[1]["subheading"] is NSNull)
        #expect(object["unreadCount"] as? Int == 1)
        #expect(object["badge"] as? Int == 4)
        #expect(object["version"] as? Int == 4)
        #expect(object["updatedAt"] is String)
        let pending = try #require(object["pendingActions"] as? [[String: Any]])
        #expect(pending.map { $0["actionID"] as? String } == ["a1", "a2"])
        let limited = try jsonObject(try ledger("widget", path, "--json", "--limit", "1").stdout)
        #expect((limited["items"] as? [Any])?.count == 1)
    }

    @Test func humanOutput() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, input: scenarioLines)
        let out = try ledger("widget", path)
        #expect(out.status == 0)
        #expect(out.stdout.contains("badge 4 · 1 unread · 2 pending actions"))
        #expect(out.stdout.contains("• 2026-11-20 08:00  Welcome"))
        for line in out.stdout.split(separator: "\n") where !line.hasPrefix("Widget ") { #expect(line.count <= 80) }
    }

    /// What the text shows adds up to the badge: an announced message is named, as in the JSON.
    @Test func humanOutputNamesAnnouncedMessages() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let lines = #"{"type":"inbox.synced","data":{"mode":"full","messages":[{"id":"a","title":"A","sentAt":"2026-11-20T08:00:00Z"},{"id":"b","title":"B","sentAt":"2026-11-20T09:00:00Z"}]}}"# + "\n"
            + #"{"type":"push.received","key":"push-c","data":{"messageID":"c"}}"# + "\n"
        #expect(try ledger("append", path, input: lines).status == 0)
        let out = try ledger("widget", path)
        #expect(out.stdout.contains("badge 3 · 2 unread · 1 announced by pushes · 0 pending actions"), "\(out.stdout)")
        #expect(try jsonObject(try ledger("widget", path, "--json").stdout)["announced"] as? Int == 1)
    }

    @Test func invalidDomainEventNamesTheField() throws {
        let dir = TemporaryDirectory()
        let out = try ledger("append", dir.child("l"), input: #"{"type":"inbox.synced","data":{"mode":"full","messages":[{"id":"m","title":"t","sentAt":"yesterday"}]}}"#)
        #expect(out.status == 1)
        #expect(out.stderr.contains(#"line 1: invalid event: data.messages[0].sentAt: not an ISO 8601 date: "yesterday""#))
    }
}

@Suite struct EventsCommandTests {
    @Test func filtersAndJSONLines() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, "--origin", "app", input: scenarioLines)
        _ = try ledger("append", path, "--origin", "widget", input: #"{"type":"message.read","data":{"ids":["m1"],"read":true}}"#)
        let all = try ledger("events", path, "--json")
        #expect(all.status == 0)
        let lines = all.stdout.split(separator: "\n")
        #expect(lines.count == 6)
        let first = try jsonObject(String(lines[0]))
        #expect(first["sequence"] as? Int == 1)
        #expect(first["type"] as? String == "inbox.synced")
        #expect((first["origin"] as? [String: Any])?["role"] as? String == "app")
        #expect(first["key"] as? String == "sync-1")
        #expect(first["timestamp"] is String)
        #expect((first["data"] as? [String: Any])?["mode"] as? String == "full")
        let actions = try ledger("events", path, "--type", "widget.action", "--json").stdout.split(separator: "\n")
        #expect(try actions.map { try jsonObject(String($0))["sequence"] as? Int } == [2, 3])
        let widget = try ledger("events", path, "--origin", "widget", "--json").stdout.split(separator: "\n")
        #expect(widget.count == 1)
        let window = try ledger("events", path, "--after", "2", "--limit", "2", "--json").stdout.split(separator: "\n")
        #expect(try window.map { try jsonObject(String($0))["sequence"] as? Int } == [3, 4])
        let human = try ledger("events", path)
        #expect(human.stdout.contains("#5  app["))
        #expect(try ledger("events", path, "--limit", "-1").status == 2)
    }
}

@Suite struct ConsumerCommandTests {
    @Test func consumePrintsAndCommits() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, input: scenarioLines)
        let first = try ledger("consume", path, "--name", "host-app", "--limit", "3")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try first.stdout.split(separator: "\n").map { try jsonObject(String($0))["sequence"] as? Int } == [1, 2, 3])
        let second = try ledger("consume", path, "--name", "host-app")
        #expect(try second.stdout.split(separator: "\n").map { try jsonObject(String($0))["sequence"] as? Int } == [4, 5])
        let third = try ledger("consume", path, "--name", "host-app")
        #expect(third.status == 0 && third.stdout.isEmpty)

        let list = try ledger("consumers", path, "--json")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 1)
        #expect(array[0]["name"] as? String == "host-app")
        #expect(array[0]["cursor"] as? Int == 5)
        #expect(array[0]["lag"] as? Int == 0)
        #expect((array[0]["leaseAgeSeconds"] as? Double ?? -1) >= 0)
        let human = try ledger("consumers", path)
        #expect(human.stdout.contains("host-app"))
        #expect(try ledger("consume", path, "--name", "x", "--read-only").status == 2)
    }
}

@Suite struct CompactCommandTests {
    func ledgerWith(_ count: Int, in dir: TemporaryDirectory) throws -> String {
        let path = dir.child("l")
        let lines = (0..<count).map { #"{"type":"badge.adjusted","data":{"delta":1},"key":"p\#($0)"}"# }.joined(separator: "\n")
        #expect(try ledger("append", path, "--batch", "100", "--durability", "none", input: lines).status == 0)
        return path
    }

    @Test func dryRunThenCompactThenInspect() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerWith(1500, in: dir)
        _ = try ledger("consume", path, "--name", "host", "--limit", "1200")
        let dry = try jsonObject(try ledger("compact", path, "--dry-run", "--retained-tail", "100", "--json").stdout)
        #expect(dry["dryRun"] as? Bool == true)
        #expect(dry["trimmedThrough"] as? Int == 1200)
        #expect((dry["blockers"] as? [String])?.contains("consumer 'host' has read only up to 1200") == true)
        #expect(try jsonObject(try ledger("inspect", path, "--json").stdout)["firstSequence"] as? Int == 1)

        let out = try ledger("compact", path, "--retained-tail", "100", "--chunk-size", "250")
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout.contains("Trimmed 1200 events (1–1200) in 5 chunks"))
        let inspect = try jsonObject(try ledger("inspect", path, "--json").stdout)
        #expect(inspect["firstSequence"] as? Int == 1201)
        #expect(inspect["eventCount"] as? Int == 300)
        #expect((inspect["snapshots"] as? [[String: Any]])?.first?["sequence"] as? Int == 1500)
        #expect((inspect["lastCompaction"] as? [String: Any])?["eventsTrimmed"] as? Int == 1200)
        #expect((inspect["consumers"] as? [[String: Any]])?.first?["cursor"] as? Int == 1200)
        let human = try ledger("inspect", path)
        #expect(human.stdout.contains("1200 events trimmed through 1200"))
        #expect(human.stdout.contains("host at 1200, lag 300"))
        // The widget shows the same badge after trimming.
        #expect(try jsonObject(try ledger("widget", path, "--json").stdout)["badge"] as? Int == 1500)
    }

    @Test func compactedCopyIsASmallerWorkingLedger() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerWith(3000, in: dir)
        _ = try ledger("compact", path, "--retained-tail", "10")
        let copy = try ledger("compact", path, "--copy-to", dir.child("copy"), "--json")
        #expect(copy.status == 0, "\(copy.stderr)")
        let copied = try jsonObject(try ledger("inspect", dir.child("copy"), "--json").stdout)
        let original = try jsonObject(try ledger("inspect", path, "--json").stdout)
        #expect(copied["eventCount"] as? Int == 10)
        #expect(copied["ledgerID"] as? String == original["ledgerID"] as? String)
        #expect((copied["fileBytes"] as? Int ?? .max) < (original["fileBytes"] as? Int ?? 0))
        // Not into a non-empty directory.
        #expect(try ledger("compact", path, "--copy-to", dir.child("copy")).status == 3)
    }

    @Test func badPolicyFlagsExitTwo() throws {
        let dir = TemporaryDirectory()
        let path = try ledgerWith(10, in: dir)
        #expect(try ledger("compact", path, "--chunk-size", "0").status == 2)
        #expect(try ledger("compact", path, "--retained-tail", "-5").status == 2)
        #expect(try ledger("compact", path, "--watch", "--dry-run").status == 2)
        #expect(try ledger("compact", "--help").stdout.contains("Examples:"))
    }
}

@Suite struct VerifyCommandTests {
    @Test func healthyExitsZeroAndDamageExitsOneWithTheSequence() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, input: scenarioLines)
        let ok = try ledger("verify", path)
        #expect(ok.status == 0, "\(ok.stdout) \(ok.stderr)")
        #expect(ok.stdout.contains("OK: \(path) is healthy"))
        let json = try jsonObject(try ledger("verify", path, "--json").stdout)
        #expect(json["healthy"] as? Bool == true && json["eventsChecked"] as? Int == 5)

        // Flip one byte inside record 3's payload, straight in the data file (in every copy of
        // the page: copy-on-write leaves older versions in free pages).
        var data = try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
        let needle = Data(#"{"actionID":"a2""#.utf8)
        var from = data.startIndex
        var flipped = 0
        while let range = data.range(of: needle, in: from..<data.endIndex) {
            data[range.lowerBound + 3] ^= 0x20
            from = range.upperBound
            flipped += 1
        }
        #expect(flipped > 0)
        try data.write(to: URL(fileURLWithPath: path + "/data.mdb"))
        let bad = try ledger("verify", path)
        #expect(bad.status == 1)
        #expect(bad.stdout.contains("DAMAGED"))
        #expect(bad.stdout.contains("problem: record 3: checksum mismatch"), "\(bad.stdout)")
        // Reading the damaged record is a clear error, not a crash.
        let events = try ledger("events", path)
        #expect(events.status == 1)
        #expect(events.stderr.contains("corrupt record at sequence 3"))
    }
}

@Suite struct FollowAndFilterTests {
    @Test func followSeesAnotherProcesssAppends() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, input: #"{"type":"a","data":1}"#)
        let follower = try Processes.start(ledgerBinary, ["events", path, "--follow", "--json", "--type", "b"])
        usleep(200_000)
        #expect(try ledger("append", path, "--origin", "widget", input: #"{"type":"b","data":{"n":2}}"#).status == 0)
        #expect(follower.waitForOutput(containing: #""sequence":2"#), "\(follower.stdoutSoFar)")
        #expect(!follower.stdoutSoFar.contains(#""sequence":1"#))  // filtered by type
        follower.kill()
        _ = try? follower.wait(timeout: 10)
    }

    @Test func beforeAndKeyFilters() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let lines = (1...6).map { #"{"type":"t","data":\#($0),"key":"k\#($0)"}"# }.joined(separator: "\n")
        _ = try ledger("append", path, input: lines)
        let window = try ledger("events", path, "--after", "1", "--before", "4", "--json").stdout.split(separator: "\n")
        #expect(try window.map { try jsonObject(String($0))["sequence"] as? Int } == [2, 3])
        let keyed = try ledger("events", path, "--key", "k5", "--json").stdout.split(separator: "\n")
        #expect(try keyed.map { try jsonObject(String($0))["sequence"] as? Int } == [5])
        #expect(try ledger("events", path, "--follow", "--before", "3").status == 2)
    }

    @Test func consumersDrop() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, input: #"{"type":"t","data":1}"#)
        _ = try ledger("consume", path, "--name", "old")
        let drop = try ledger("consumers", "drop", path, "old")
        #expect(drop.status == 0 && drop.stdout.contains("Dropped consumer 'old'"))
        #expect(try ledger("consumers", path).stdout.contains("No consumers."))
        let again = try ledger("consumers", "drop", path, "old")
        #expect(again.status == 1 && again.stderr.contains("no consumer named 'old'"))
    }
}

@Suite struct SimulateCommandTests {
    @Test func simulateEndsWithAHealthyLedger() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("sim")
        let out = try Processes.run(ledgerBinary, ["simulate", path, "--duration", "3", "--seed", "7"], timeout: 180)
        #expect(out.status == 0, "\(out.stdout) \(out.stderr)")
        #expect(out.stdout.contains("time      head   events/s"))
        #expect(out.stdout.contains("pending actions after the host drained its queue: 0"))
        #expect(out.stdout.contains("verify: OK"))
        let inspect = try jsonObject(try ledger("inspect", path, "--json").stdout)
        let origins = inspect["countsByOrigin"] as? [String: Int] ?? [:]
        #expect(Set(origins.keys).isSuperset(of: ["app", "widget", "notification-service"]))
        #expect(try ledger("verify", path).status == 0)
        #expect(try ledger("simulate", path, "--duration", "0").status == 2)
    }
}

@Suite struct CLIExperienceTests {
    @Test func everySubcommandHasHelpWithAnExample() throws {
        for sub in [["inspect"], ["append"], ["events"], ["widget"], ["consume"], ["consumers", "list"], ["consumers", "drop"],
                    ["compact"], ["verify"], ["simulate"]] {
            let out = try Processes.run(ledgerBinary, sub + ["--help"])
            #expect(out.status == 0, "\(sub)")
            #expect(out.stdout.contains("Example"), "\(sub): \(out.stdout)")
        }
        // The hidden role command stays out of the overview.
        #expect(!(try ledger("--help").stdout.contains("_role")))
    }

    @Test func readOnlyEverywhereAndNoColourWhenPiped() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, input: scenarioLines)
        for sub in [["inspect"], ["events"], ["widget"], ["verify"], ["consumers"], ["compact", "--dry-run"]] {
            let out = try Processes.run(ledgerBinary, [sub[0], path, "--read-only"] + sub.dropFirst())
            #expect(out.status == 0, "\(sub): \(out.stderr)")
            #expect(!out.stdout.contains("\u{1B}["), "\(sub) printed colour codes into a pipe")
        }
        #expect(try ledger("append", path, "--read-only", input: "").status == 2)
    }

    @Test func inspectReportsHealthAndWarnings() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let lines = (0..<300).map { _ in #"{"type":"badge.adjusted","data":{"delta":1}}"# }.joined(separator: "\n")
        _ = try ledger("append", path, "--batch", "100", input: lines)
        _ = try ledger("consume", path, "--name", "sleepy", "--limit", "10")
        // The consumer's lease expires; compaction trims past it.
        _ = try ledger("compact", path, "--retained-tail", "5", "--consumer-lease", "0")
        let object = try jsonObject(try ledger("inspect", path, "--json").stdout)
        for field in ["staleReaders", "logPages", "totalPages", "lastTransactionID", "projectionsAppliedThrough", "warnings"] {
            #expect(object[field] != nil, "missing \(field)")
        }
        let warnings = object["warnings"] as? [String] ?? []
        #expect(warnings.contains { $0.contains("consumer 'sleepy' is behind the log") }, "\(warnings)")
        let human = try ledger("inspect", path)
        #expect(human.stdout.contains("warning    consumer 'sleepy' is behind the log"))
        for line in human.stdout.split(separator: "\n") where !line.hasPrefix("Ledger ") { #expect(line.count <= 80, "\(line)") }
        let healthy = TemporaryDirectory()
        _ = try ledger("append", healthy.child("l"), input: scenarioLines)
        #expect(try ledger("inspect", healthy.child("l")).stdout.contains("health     no warnings"))
    }
}

@Suite struct HostileInputTests {
    @Test func pathsWithSpacesAndNonASCII() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.child("my inbox ✓"), withIntermediateDirectories: false)
        let path = dir.child("my inbox ✓/ledger ü")
        #expect(try ledger("append", path, input: #"{"type":"a","data":1}"#).status == 0)
        #expect(try jsonObject(try ledger("inspect", path, "--json").stdout)["eventCount"] as? Int == 1)
        #expect(try ledger("verify", path).status == 0)
    }

    @Test func badBytesAndHugeLinesAreNamedNotCrashed() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        var invalidUTF8 = Data(#"{"type":"a","data":1}"#.utf8 + [0x0A])
        invalidUTF8.append(Data(#"{"type":"a","data":""#.utf8 + [0xFF, 0xFE] + #""}"#.utf8))
        var out = try Processes.run(ledgerBinary, ["append", path], input: invalidUTF8)
        #expect(out.status == 1)
        #expect(out.stdout == "1\n")
        #expect(out.stderr.contains("line 2: invalid event: json: not valid UTF-8"))

        out = try Processes.run(ledgerBinary, ["append", path], input: Data(#"{"type":"a","data":"x"#.utf8 + [0x00] + #"y"}"#.utf8))
        #expect(out.status == 1 && out.stderr.contains("line 1: invalid event: json: malformed JSON"))

        let huge = #"{"type":"a","data":""# + String(repeating: "x", count: 10_000_000) + #""}"#
        out = try ledger("append", path, input: huge)
        #expect(out.status == 1)
        #expect(out.stderr.contains("line 1: event of 10000042 bytes exceeds the 65536-byte limit"), "\(out.stderr)")

        #expect(try jsonObject(try ledger("inspect", path, "--json").stdout)["eventCount"] as? Int == 1)
        let many = try ledger("events", path, "--limit", "999999999999999")
        #expect(many.status == 0 && many.stdout.split(separator: "\n").count == 1)
        #expect(try ledger("widget", path, "--limit", "999999999999").status == 0)
    }
}
