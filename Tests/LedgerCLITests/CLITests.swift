import Foundation
import Testing
import TestSupport

let ledgerBinary = Processes.product("ledger")

func ledger(_ arguments: String..., input: String? = nil) throws -> ProcessOutput {
    try Processes.run(ledgerBinary, arguments, input: input.map { Data($0.utf8) }, timeout: 120)
}

func jsonObject(_ text: String) throws -> [String: Any] {
    let value = try JSONSerialization.jsonObject(with: Data(text.utf8))
    return try #require(value as? [String: Any])
}

@Suite struct AppendCommandTests {
    @Test func printsEachSequenceAsItsBatchCommits() throws {
        let dir = TemporaryDirectory()
        let input = (1...5).map { #"{"type":"badge.adjusted","data":{"delta":\#($0)},"key":"k\#($0)"}"# }.joined(separator: "\n") + "\n"
        let out = try ledger("append", dir.child("l"), "--origin", "widget", "--batch", "2", input: input)
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout == "1\n2\n3\n4\n5\n")
        // Retrying the same keyed lines writes nothing new.
        let retry = try ledger("append", dir.child("l"), input: input)
        #expect(retry.stdout == "1\n2\n3\n4\n5\n")
    }

    @Test func malformedLineStopsWithItsLineNumberAndKeepsEarlierBatches() throws {
        let dir = TemporaryDirectory()
        let input = """
            {"type":"a","data":1}
            {"type":"a","data":2}

            {"type":"a","data":3}
            {"type":"a"}
            {"type":"a","data":5}
            """
        let out = try ledger("append", dir.child("l"), "--batch", "2", input: input)
        #expect(out.status == 1)
        #expect(out.stdout == "1\n2\n")
        #expect(out.stderr.contains("line 5: invalid event: data: missing"))
        let inspect = try jsonObject(try ledger("inspect", dir.child("l"), "--json").stdout)
        #expect(inspect["eventCount"] as? Int == 2)
    }

    @Test func eachKindOfBadLineIsNamed() throws {
        let dir = TemporaryDirectory()
        let cases: [(String, String)] = [
            ("not json", "line 1: invalid event: json: malformed JSON"),
            ("[1,2]", "line 1: invalid event: json: expected an object"),
            (#"{"data":1}"#, "line 1: invalid event: type: missing"),
            (#"{"type":7,"data":1}"#, "line 1: invalid event: type: must be a string"),
            (#"{"type":"","data":1}"#, "line 1: invalid event: type: must be 1–128 bytes, got 0"),
            (#"{"type":"a","data":1,"key":5}"#, "line 1: invalid event: key: must be a string"),
            (#"{"type":"a","data":1,"extra":true}"#, "line 1: invalid event: extra: unknown field"),
        ]
        for (line, message) in cases {
            let out = try ledger("append", dir.child("l"), input: line + "\n")
            #expect(out.status == 1, "\(line)")
            #expect(out.stderr.contains(message), "\(line): \(out.stderr)")
        }
        let conflict1 = try ledger("append", dir.child("l"), input: #"{"type":"a","data":1,"key":"k"}"#)
        #expect(conflict1.status == 0)
        let conflict2 = try ledger("append", dir.child("l"), input: #"{"type":"a","data":2,"key":"k"}"#)
        #expect(conflict2.status == 1)
        #expect(conflict2.stderr.contains("idempotency key 'k' was already used by event 1"))
    }

    @Test func emptyInputWritesNothing() throws {
        let dir = TemporaryDirectory()
        let out = try ledger("append", dir.child("l"), input: "")
        #expect(out.status == 0)
        #expect(out.stdout.isEmpty)
    }

    @Test func usageErrorsExitTwo() throws {
        let dir = TemporaryDirectory()
        #expect(try ledger("append", dir.child("l"), "--batch", "0", input: "").status == 2)
        #expect(try ledger("append", dir.child("l"), "--durability", "sometimes", input: "").status == 2)
        #expect(try ledger("append").status == 2)
        #expect(try ledger("frobnicate").status == 2)
    }

    @Test func severalProcessesAppendAtOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let roles = ["app", "widget", "notification-service"]
        let processes = try roles.map { role in
            let lines = (0..<300).map { #"{"type":"t.\#(role)","data":{"i":\#($0)}}"# }.joined(separator: "\n")
            return try Processes.start(ledgerBinary, ["append", path, "--origin", role, "--batch", "7"], input: Data(lines.utf8))
        }
        var all: [Int] = []
        for p in processes {
            let out = try p.wait(timeout: 120)
            #expect(out.status == 0, "\(out.stderr)")
            all += out.stdout.split(separator: "\n").compactMap { Int($0) }
        }
        #expect(all.sorted() == Array(1...900))
        let inspect = try jsonObject(try ledger("inspect", path, "--json").stdout)
        #expect(inspect["countsByOrigin"] as? [String: Int] == ["app": 300, "widget": 300, "notification-service": 300])
        #expect(inspect["headSequence"] as? Int == 900)
    }
}

@Suite struct InspectCommandTests {
    @Test func jsonHasTheContractFields() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, "--origin", "app", input: #"{"type":"inbox.synced","data":{"mode":"full","messages":[]}}"#)
        _ = try ledger("append", path, "--origin", "widget", input: #"{"type":"message.read","data":{"ids":["m1"],"read":true}}"#)
        let out = try ledger("inspect", path, "--json")
        #expect(out.status == 0, "\(out.stderr)")
        let object = try jsonObject(out.stdout)
        for field in ["formatVersion", "ledgerID", "durabilityFloor", "headSequence", "firstSequence", "eventCount", "countsByType",
                      "countsByOrigin", "fileBytes", "mapBytes", "readers"] {
            #expect(object[field] != nil, "missing \(field)")
        }
        #expect(object["formatVersion"] as? Int == 4)
        #expect((object["ledgerID"] as? String)?.count == 36)
        #expect(object["headSequence"] as? Int == 2)
        #expect(object["firstSequence"] as? Int == 1)
        #expect(object["eventCount"] as? Int == 2)
        #expect(object["countsByType"] as? [String: Int] == ["inbox.synced": 1, "message.read": 1])
        #expect(object["countsByOrigin"] as? [String: Int] == ["app": 1, "widget": 1])
        #expect((object["fileBytes"] as? Int ?? 0) > 0)
        #expect((object["mapBytes"] as? Int ?? 0) >= (object["fileBytes"] as? Int ?? 0))
        #expect(object["readers"] is [Any])
        let last = try #require(object["lastEvents"] as? [[String: Any]])
        #expect(last.count == 2)
        #expect((last[1]["data"] as? [String: Any])?["read"] as? Bool == true)
    }

    @Test func humanSummaryFitsEightyColumns() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let payload = String(repeating: "long text ", count: 30)
        _ = try ledger("append", path, input: #"{"type":"custom.note","data":"\#(payload)"}"#)
        let out = try ledger("inspect", path)
        #expect(out.status == 0)
        #expect(out.stdout.contains("Ledger \(path)"))
        #expect(out.stdout.contains("events     1 (sequences 1–1)"))
        #expect(out.stdout.contains("custom.note (unknown) 1"))
        for line in out.stdout.split(separator: "\n") where !line.hasPrefix("Ledger ") {
            #expect(line.count <= 80, "too wide: \(line)")
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/mdb_stat"), "needs lmdb-utils"))
    func lmdbToolsReadALedger() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        _ = try ledger("append", path, input: #"{"type":"a","data":1}"#)
        let out = try Processes.run("/usr/bin/mdb_stat", ["-a", path])
        #expect(out.status == 0, "\(out.stderr)")
        for table in ["events", "meta", "keys", "messages", "widget", "state"] {
            #expect(out.stdout.contains("Status of \(table)"), "\(table)")
        }
    }

    @Test func notALedgerExitsThree() throws {
        let dir = TemporaryDirectory()
        let missing = try ledger("inspect", dir.child("nothing"))
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("not a ledger: no such directory"))
        #expect(!FileManager.default.fileExists(atPath: dir.child("nothing")))
        let empty = try ledger("inspect", dir.path)
        #expect(empty.status == 3)
        #expect(empty.stderr.contains("no data.mdb"))
        _ = FileManager.default.createFile(atPath: dir.child("f"), contents: Data("x".utf8))
        let file = try ledger("inspect", dir.child("f"))
        #expect(file.status == 3)
        #expect(file.stderr.contains("not a directory"))
    }

    @Test func helpShowsAnExample() throws {
        for sub in ["append", "inspect"] {
            let out = try ledger(sub, "--help")
            #expect(out.status == 0)
            #expect(out.stdout.contains("Example:"), "\(sub)")
        }
        let root = try ledger("--help")
        #expect(root.stdout.contains("append") && root.stdout.contains("inspect"))
    }
}
