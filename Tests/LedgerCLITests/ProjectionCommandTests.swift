import Foundation
import InboxLedger
import LMDB
import Testing
import TestSupport

/// A second projection reading completions: one row per task done.
struct DoneCount: LedgerProjection {
    struct Row: Codable, Sendable, Equatable { var times: Int }
    static let name = "com.example.done-count"
    static let version = 1
    static let eventTypes: Set<String> = [TaskDone.eventType]

    static func apply(_ event: Event, to state: inout ProjectionUpdate<DoneCount>) throws {
        let done = try event.decode(as: TaskDone.self)
        try state.set(Row(times: (try state.row(done.id)?.times ?? 0) + 1), for: done.id)
    }
}

/// The CLI's side of app projections (docs/cli.md): `inspect` lists them, `ledger projection`
/// dumps one without the app's code, `verify` checks the stored state's structure. The ledger is
/// written by this process with the task list registered (the app); the CLI runs as its own
/// processes, knowing nothing of it.
@Suite struct ProjectionCommandTests {
    /// A ledger at `path` holding the task list: 6 tasks, 2 done, 1 removed, and a badge event.
    @discardableResult
    func makeLedger(_ path: String) throws -> [ProjectionRow<TaskList>] {
        var options = LedgerOptions(role: "app")
        options.projections = [TaskList.self]
        let app = try Ledger(path: path, options: options)
        for (i, title) in ["Milk", "Eggs", "Bread", "Tea", "Jam", "Rice"].enumerated() {
            try app.append(TaskAdded(id: "t\(i)", title: title, day: Int64(i % 3)))
        }
        try app.append(contentsOf: [NewEvent(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8))])
        try app.append(TaskDone(id: "t1"))
        try app.append(TaskDone(id: "t3"))
        try app.append(TaskRemoved(id: "t5"))
        return try app.read({ try $0.projection(TaskList.self).rows() })
    }

    /// What the `app-projections` table's keys start with in the row tree `counters`, where
    /// format 3 keeps it (docs/format.md, "The projection tables in two trees").
    let tablePrefix: [UInt8] = [0x00, 0x08]
    /// Where version 1 of the task list is stored: `name ‖ 0x01 ‖ "1" ‖ 0x00` (docs/format.md,
    /// "App projections") under the table's prefix.
    var space: [UInt8] { tablePrefix + Array(TaskList.name.utf8) + [0x01, UInt8(ascii: "1"), 0x00] }
    /// The stored key of the task list's row `key`: the space's `"R" ‖ key`.
    func rowKey(_ key: String) -> [UInt8] { space + [UInt8(ascii: "R")] + Array(key.utf8) }
    var orderPrefix: [UInt8] { space + [UInt8(ascii: "O")] }

    /// Changes the table behind the ledger's back, in one raw LMDB write (`counters`, which holds it).
    func damage(_ path: String, _ body: (Transaction, Database) throws -> Void) throws {
        var configuration = EnvironmentConfiguration()
        configuration.databases = ["counters": []]
        configuration.createDatabases = false
        let env = try Environment.open(directory: path, configuration: configuration)
        let table = try env.database("counters")
        try env.write { txn in try body(txn, table) }
    }

    /// Every order-index entry of the task list: (key, the row key it names).
    func indexEntries(_ txn: Transaction, _ table: Database) throws -> [(key: [UInt8], row: String)] {
        try txn.withCursor(table) { cursor in
            var found: [(key: [UInt8], row: String)] = []
            var entry = try cursor.seek(atLeast: orderPrefix)
            while let e = entry, e.key.starts(with: orderPrefix) {
                found.append((e.key, String(decoding: e.value, as: UTF8.self)))
                entry = try cursor.next()
            }
            return found
        }
    }

    @Test func inspectListsTheProjectionsInTextAndJSON() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        // None yet: the section says so.
        #expect(try ledger("append", path, input: #"{"type":"badge.adjusted","data":{"delta":1}}"#).status == 0)
        let empty = try ledger("inspect", path)
        #expect(empty.status == 0, "\(empty.stderr)")
        #expect(empty.stdout.contains("\n  app projections  none\n"), "\(empty.stdout)")
        #expect((try jsonObject(try ledger("inspect", path, "--json").stdout)["projections"] as? [Any])?.isEmpty == true)

        try makeLedger(path)
        let text = try ledger("inspect", path)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("\n  app projections\n    com.example.tasks v1 ready · 5 rows · applied through 11\n"), "\(text.stdout)")
        let object = try jsonObject(try ledger("inspect", path, "--json").stdout)
        let projections = try #require(object["projections"] as? [[String: Any]])
        #expect(projections.count == 1)
        let p = try #require(projections.first)
        #expect(Set(p.keys) == ["name", "version", "status", "appliedThrough", "builtFrom", "rows", "eventTypes", "failure"])
        #expect(p["name"] as? String == TaskList.name && p["version"] as? Int == 1 && p["status"] as? String == "ready")
        #expect(p["rows"] as? Int == 5 && p["appliedThrough"] as? Int == 11 && p["builtFrom"] as? Int == 0)
        #expect(p["eventTypes"] as? [String] == TaskList.eventTypes.sorted())
        #expect(p["failure"] is NSNull)

        // The by-type counts say which app projection reads the app's types; none is "not projected".
        #expect(text.stdout.contains("com.example.task-added (projected by com.example.tasks) 6"), "\(text.stdout)")
        #expect(text.stdout.contains("com.example.task-done (projected by com.example.tasks) 2"), "\(text.stdout)")
        #expect(text.stdout.contains("com.example.task-removed (projected by com.example.tasks) 1"), "\(text.stdout)")
        #expect(!text.stdout.contains("(unknown)") && !text.stdout.contains("not projected"), "\(text.stdout)")
        // A type nothing reads is unknown; a later version of a projected type is still projected.
        let custom = #"{"type":"custom.note","data":1}"# + "\n" + #"{"type":"com.example.task-done@2","data":{"id":"t0"}}"#
        #expect(try ledger("append", path, input: custom).status == 0)
        let mixed = try ledger("inspect", path).stdout
        #expect(mixed.contains("custom.note (unknown) 1"), "\(mixed)")
        #expect(mixed.contains("com.example.task-done@2 (projected by com.example.tasks) 1"), "\(mixed)")
        #expect(mixed.contains("com.example.task-added (projected by com.example.tasks) 6"), "\(mixed)")
        #expect(mixed.contains("\n             (unknown: not interpreted here; kept, delivered, not projected)\n"), "\(mixed)")
        #expect(try jsonObject(try ledger("inspect", path, "--json").stdout)["unknownTypes"] as? [String]
            == ["com.example.task-added", "com.example.task-done", "com.example.task-done@2", "com.example.task-removed", "custom.note"])
    }

    @Test func inspectNamesEveryAppProjectionThatReadsAType() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        var options = LedgerOptions(role: "app")
        options.projections = [TaskList.self, DoneCount.self]
        let app = try Ledger(path: path, options: options)
        try app.append(TaskAdded(id: "t0", title: "Milk", day: 0))
        try app.append(TaskDone(id: "t0"))
        let out = try ledger("inspect", path)
        #expect(out.status == 0, "\(out.stderr)")
        let lines = out.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("  by type    com.example.task-added (projected by com.example.tasks) 1"), "\(out.stdout)")
        // Too wide for a line: broken at a space, continued further in.
        #expect(lines.contains("             com.example.task-done (projected by com.example.done-count,"), "\(out.stdout)")
        #expect(lines.contains("               com.example.tasks) 1"), "\(out.stdout)")
        #expect(!out.stdout.contains("(unknown)"), "\(out.stdout)")
    }

    @Test func aRowIsOneLineWhateverItsKeyHolds() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        var options = LedgerOptions(role: "app")
        options.projections = [TaskList.self]
        let app = try Ledger(path: path, options: options)
        // Keys the app chose (a pasted title, say), in the projection's order (by day).
        let tasks: [(key: String, title: String)] = [
            ("line\nbreak", "a"), ("carriage\rreturn", "b"), ("tab\there", "c"), ("esc\u{1B}[31mred", "d"),
            ("crlf\r\nnext", "e"), ("nel\u{85}sep\u{2028}par\u{2029}del\u{7F}", "f"), (#"back\slash"#, "g"),
            ("Grüße, 東京 👋🏽 café", "h"), ("plain", "title\u{2028}with a separator"),
        ]
        for (day, task) in tasks.enumerated() { try app.append(TaskAdded(id: task.key, title: task.title, day: Int64(day))) }

        let text = try ledger("projection", path, TaskList.name)
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let rowLines = Array(lines.drop { !$0.hasPrefix("  rows ") }.dropFirst())
        #expect(rowLines == [
            #"line\nbreak  {"day":0,"done":false,"title":"a"}"#,
            #"carriage\rreturn  {"day":1,"done":false,"title":"b"}"#,
            #"tab\there  {"day":2,"done":false,"title":"c"}"#,
            #"esc\u001B[31mred  {"day":3,"done":false,"title":"d"}"#,
            #"crlf\r\nnext  {"day":4,"done":false,"title":"e"}"#,
            #"nel\u0085sep\u2028par\u2029del\u007F  {"day":5,"done":false,"title":"f"}"#,
            #"back\\slash  {"day":6,"done":false,"title":"g"}"#,
            #"Grüße, 東京 👋🏽 café  {"day":7,"done":false,"title":"h"}"#,  // printed as it is
            #"plain  {"day":8,"done":false,"title":"title\u2028with a separator"}"#,  // the same JSON
            "",
        ], "\(text.stdout)")
        // Nothing else of the output breaks a line or hides one either.
        let breaking: Set<Unicode.GeneralCategory> = [.control, .lineSeparator, .paragraphSeparator]
        #expect(!text.stdout.unicodeScalars.contains { $0 != "\n" && breaking.contains($0.properties.generalCategory) }, "\(text.stdout)")
        // --json keeps the keys as they are.
        let dumped = try #require(try jsonObject(try ledger("projection", path, TaskList.name, "--json").stdout)["rows"] as? [[String: Any]])
        #expect(dumped.map { $0["key"] as? String } == tasks.map(\.key))
    }

    @Test func projectionDumpsTheRowsInTheProjectionsOrder() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let rows = try makeLedger(path)
        #expect(rows.map(\.key) == ["t0", "t4", "t2", "t3", "t1"], "open first, by day, then title")

        let text = try ledger("projection", path, TaskList.name)
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "Projection com.example.tasks in \(path)")
        #expect(lines.contains("  version 1 · ready · 5 rows · applied through 10"), "\(lines)")
        #expect(lines.contains(#"  document {"done":2,"open":3}"#), "\(lines)")
        let rowLines = Array(lines.drop { !$0.hasPrefix("  rows ") }.dropFirst())
        #expect(rowLines == [
            #"t0  {"day":0,"done":false,"title":"Milk"}"#,
            #"t4  {"day":1,"done":false,"title":"Jam"}"#,
            #"t2  {"day":2,"done":false,"title":"Bread"}"#,
            #"t3  {"day":0,"done":true,"title":"Tea"}"#,
            #"t1  {"day":1,"done":true,"title":"Eggs"}"#,
        ])

        // --json parses, and its rows are what the app reads through its own types.
        let out = try ledger("projection", path, TaskList.name, "--json")
        #expect(out.status == 0, "\(out.stderr)")
        let object = try jsonObject(out.stdout)
        #expect(Set(object.keys) == ["projection", "document", "rows"])
        let record = try #require(object["projection"] as? [String: Any])
        #expect(record["name"] as? String == TaskList.name && record["rows"] as? Int == 5 && record["appliedThrough"] as? Int == 10)
        let document = try #require(object["document"] as? [String: Any])
        #expect(document["open"] as? Int == 3 && document["done"] as? Int == 2)
        let dumped = try #require(object["rows"] as? [[String: Any]])
        #expect(dumped.map { $0["key"] as? String } == rows.map(\.key))
        for (entry, expected) in zip(dumped, rows) {
            let json = try JSONSerialization.data(withJSONObject: try #require(entry["row"]))
            #expect(try JSONDecoder().decode(TaskList.Row.self, from: json) == expected.row)
        }

        // --limit: the first rows in the order.
        let limited = try jsonObject(try ledger("projection", path, TaskList.name, "--json", "--limit", "2").stdout)
        #expect((limited["rows"] as? [[String: Any]])?.map { $0["key"] as? String } == ["t0", "t4"])
        let limitedText = try ledger("projection", path, TaskList.name, "--limit", "2").stdout
        #expect(limitedText.contains("  rows     first 2 of 5, in the projection's order"), "\(limitedText)")
        #expect(try ledger("projection", path, TaskList.name, "--limit", "-1").status == 2)
    }

    @Test func anUnknownNameIsAnErrorNamingIt() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        try makeLedger(path)
        let out = try ledger("projection", path, "com.example.notes")
        #expect(out.status == 1)
        #expect(out.stdout.isEmpty)
        #expect(out.stderr.contains("no app projection named 'com.example.notes' (stored: com.example.tasks)"), "\(out.stderr)")
        let json = try ledger("projection", path, "com.example.notes", "--json")
        #expect(json.status == 1 && json.stdout.isEmpty)
        // A ledger without any.
        #expect(try ledger("append", dir.child("m"), input: #"{"type":"a","data":1}"#).status == 0)
        let none = try ledger("projection", dir.child("m"), "x")
        #expect(none.status == 1 && none.stderr.contains("no app projection named 'x' (none is stored)"), "\(none.stderr)")
    }

    @Test func verifyFindsARowWhoseJSONWasDamaged() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        try makeLedger(path)
        #expect(try ledger("verify", path).status == 0)
        try damage(path) { txn, table in
            var bytes = try #require(try txn.get(table, key: rowKey("t2")))
            bytes.removeLast(3)  // the JSON cut short
            try txn.put(table, key: rowKey("t2"), value: bytes)
        }
        let out = try ledger("verify", path)
        #expect(out.status == 1)
        #expect(out.stdout.contains("problem: app projection 'com.example.tasks': row 't2' is not JSON"), "\(out.stdout)")
        let json = try jsonObject(try ledger("verify", path, "--json").stdout)
        #expect(json["healthy"] as? Bool == false)
        #expect((json["findings"] as? [String])?.count == 1, "\(json)")
        // The dump still shows the rest, and says what it cannot show.
        let dump = try ledger("projection", path, TaskList.name)
        #expect(dump.status == 0)
        #expect(dump.stdout.contains("t2  (not JSON: "), "\(dump.stdout)")
    }

    @Test func verifyFindsADeletedIndexEntryAndARowChangedBehindItsBack() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        try makeLedger(path)
        try damage(path) { txn, table in
            // t4's index entry deleted; t0's row given another order (its index entry left as it was).
            let entry = try #require(try indexEntries(txn, table).first { $0.row == "t4" })
            #expect(try txn.delete(table, key: entry.key))
            var t0 = try #require(try txn.get(table, key: rowKey("t0")))
            let orderLength = Int(t0[1]) << 8 | Int(t0[2])
            t0[3 + orderLength - 3] ^= 0x01  // a byte of the title in the order
            try txn.put(table, key: rowKey("t0"), value: t0)
        }
        let out = try ledger("verify", path)
        #expect(out.status == 1)
        for problem in [
            "row 't4' has no order-index entry",
            "row 't0' has no order-index entry",
            "an order-index entry names row 't0' at another order than the row's",
        ] {
            #expect(out.stdout.contains("problem: app projection 'com.example.tasks': \(problem)"), "\(problem): \(out.stdout)")
        }
    }

    @Test func verifyFindsARecordThatDisagreesWithTheTable() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        try makeLedger(path)
        try damage(path) { txn, table in
            // A row deleted with its index entry: the record still counts it.
            let entry = try #require(try indexEntries(txn, table).first { $0.row == "t3" })
            #expect(try txn.delete(table, key: entry.key))
            #expect(try txn.delete(table, key: rowKey("t3")))
        }
        let out = try ledger("verify", path, "--json")
        #expect(out.status == 1)
        let findings = try #require(try jsonObject(out.stdout)["findings"] as? [String])
        #expect(findings == ["app projection 'com.example.tasks': its record counts 5 rows, the table holds 4"])
    }

    @Test func aLedgerCompactedByTheCLIStillVerifiesAndDumps() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let rows = try makeLedger(path)
        // `ledger compact` has no app code: the projection applied everything, so all is trimmed.
        let compact = try ledger("compact", path, "--retained-tail", "0", "--json")
        #expect(compact.status == 0, "\(compact.stderr)")
        #expect(try jsonObject(compact.stdout)["trimmedThrough"] as? Int == 10, "\(compact.stdout)")
        let verify = try ledger("verify", path)
        #expect(verify.status == 0, "\(verify.stdout)")
        let dumped = try jsonObject(try ledger("projection", path, TaskList.name, "--json").stdout)
        #expect((dumped["rows"] as? [[String: Any]])?.map { $0["key"] as? String } == rows.map(\.key))
        // The app's own verify rebuilds it from the snapshot the compaction wrote.
        var options = LedgerOptions(role: "app")
        options.projections = [TaskList.self]
        let app = try Ledger(path: path, options: options)
        try app.append(TaskDone(id: "t0"))
        let report = try app.maintenance.verify()
        #expect(report.isHealthy, "\(report.findings)")
        #expect(report.firstSequence == 11)
    }

    @Test func aDamagedRecordIsAWarningOfInspectAndAProblemOfVerify() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        try makeLedger(path)
        try damage(path) { txn, table in
            try txn.put(table, key: tablePrefix + [0x00] + Array(TaskList.name.utf8) + [0x01, UInt8(ascii: "1")], value: Array(#"{"name":"#.utf8))
        }
        let text = try ledger("inspect", path)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("  app projections  cannot be listed: "), "\(text.stdout)")
        let object = try jsonObject(try ledger("inspect", path, "--json").stdout)
        #expect((object["projections"] as? [Any])?.isEmpty == true)
        #expect((object["warnings"] as? [String])?.contains { $0.hasPrefix("app projections cannot be listed: ") } == true, "\(object)")
        let verify = try ledger("verify", path)
        #expect(verify.status == 1)
        #expect(verify.stdout.contains("problem: app projection 'com.example.tasks': its record does not decode"), "\(verify.stdout)")
        let dump = try ledger("projection", path, TaskList.name)
        #expect(dump.status == 3 && dump.stderr.contains("corrupt store"), "\(dump.stderr)")
    }
}
