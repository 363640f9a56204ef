import Foundation
import Testing
import TestSupport
@testable import InboxLedger
import LMDB

/// `verify` of the app projections (docs/format.md, "App projections"): the structure of the
/// table, which a handle without the app's code checks (the CLI), and the rebuild of every
/// projection a handle registers, compared with what is stored — from the log, or from a
/// snapshot once the log was trimmed.
@Suite struct AppProjectionVerifyTests {
    func options(_ role: String, _ projections: [any LedgerProjection.Type] = [TaskList.self]) -> LedgerOptions {
        var options = LedgerOptions(role: role)
        options.projections = projections
        return options
    }

    /// A task list of 12 tasks, 4 done, 1 removed, with built-in events between.
    func populate(_ ledger: Ledger) throws {
        for i in 0..<12 {
            try ledger.append(TaskAdded(id: "t\(i)", title: "task \(i % 5)", day: Int64(i % 4)))
            if i % 3 == 0 { try ledger.append(contentsOf: [NewEvent(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8))]) }
        }
        for i in [1, 4, 7, 10] { try ledger.append(TaskDone(id: "t\(i)")) }
        try ledger.append(TaskRemoved(id: "t11"))
    }

    /// The ledger's environment (this process's, while a handle has it open), with the table.
    func environment(_ path: String) throws -> Environment {
        var configuration = EnvironmentConfiguration()
        configuration.databases = [Schema.metaName: [], Schema.countersName: []]
        configuration.createDatabases = false
        return try Environment.open(directory: path, configuration: configuration)
    }

    /// Changes the app projections' rows behind the ledger's back, in one raw LMDB write.
    func damage(_ path: String, _ body: (Transaction, RawProjectionTable) throws -> Void) throws {
        let env = try environment(path)
        let table = try RawProjectionTable(env, .apps)
        try env.write { txn in try body(txn, table) }
    }

    /// The stored row `key` of the task list (order bytes and JSON).
    func storedRow(_ path: String, _ key: String) throws -> AppProjectionRow {
        let env = try environment(path)
        let table = try RawProjectionTable(env, .apps)
        let bytes = try #require(try env.read { try $0.get(table, key: AppProjectionSpace(TaskList.self).row(key)) })
        return try #require(AppProjectionRow.decode(bytes))
    }

    func problems(_ report: VerificationReport) -> [String] {
        report.findings.compactMap { finding in
            guard case .appProjection(let name, let problem) = finding, name == TaskList.name else { return nil }
            return problem
        }
    }

    @Test func aHealthyProjectionVerifiesWithAndWithoutItsCode() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try populate(app)
        let plain = try Ledger(path: path, options: LedgerOptions(role: "cli"))
        // Events the projection has not applied yet (a process without it appended them).
        try plain.append(TaskDone(id: "t0"))
        for ledger in [app, plain] {
            let report = try ledger.maintenance.verify()
            #expect(report.isHealthy, "\(report.findings)")
        }
        try app.append(TaskDone(id: "t2"))
        #expect(try app.maintenance.verify().isHealthy)
    }

    @Test func aRowWhoseValueDiffersFromTheEventsIsFoundByTheRebuildOnly() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try populate(app)
        // Valid JSON, the same order, another title: the structure is intact.
        let row = try storedRow(path, "t3")
        var changed = try JSONDecoder().decode(TaskList.Row.self, from: Data(row.json))
        changed.title = "forged"
        let json = try AppProjectionJSON.encode(changed, projection: TaskList.name)
        try damage(path) { txn, table in
            try txn.put(table, key: AppProjectionSpace(TaskList.self).row("t3"), value: AppProjectionRow.encode(order: row.order, json: json))
        }
        let plain = try Ledger(path: path, options: LedgerOptions(role: "cli"))
        #expect(try plain.maintenance.verify().isHealthy, "without the app's code only the structure is checked")
        let report = try app.maintenance.verify()
        #expect(problems(report).count == 1, "\(report.findings)")
        let problem = try #require(problems(report).first)
        #expect(problem.hasPrefix("row 't3' differs from a rebuild"), "\(problem)")
        #expect(problem.contains("forged"))
        #expect(report.findings.first?.description.hasPrefix("app projection 'com.example.tasks': row 't3'") == true)
    }

    /// Rows and documents are canonical JSON since the ledger's own codec; earlier versions
    /// stored `JSONEncoder`'s output (sorted keys), which a rebuild compares canonically.
    @Test func rowsAndADocumentWrittenByJSONEncoderVerifyHealthy() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try populate(app)
        try app.append(TaskAdded(id: "t20", title: "read/write — ünïcode \"quoted\"\t", day: 2))
        let before = try app.read({ try $0.projection(TaskList.self).contents() })
        // Each row and the document as JSONEncoder writes them: sorted keys without escaped
        // slashes (what earlier versions stored), and its other forms (escaped slashes, key
        // order, whitespace), written behind the ledger's back.
        let formats: [JSONEncoder.OutputFormatting] = [[.sortedKeys, .withoutEscapingSlashes], [], [.prettyPrinted, .sortedKeys]]
        var differing = 0
        try damage(path) { txn, table in
            for (i, entry) in before.rows.enumerated() {
                let rowKey = AppProjectionSpace(TaskList.self).row(entry.key)
                let stored = try #require(try txn.get(table, key: rowKey))
                let row = try #require(AppProjectionRow.decode(stored))
                let encoder = JSONEncoder()
                encoder.outputFormatting = formats[i % formats.count]
                let legacy = Array(try encoder.encode(entry.row))
                if legacy != Array(row.json) { differing += 1 }
                try txn.put(table, key: rowKey, value: AppProjectionRow.encode(order: row.order, json: legacy))
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted]
            try txn.put(table, key: AppProjectionSpace(TaskList.self).document, value: Array(try encoder.encode(before.document)))
        }
        #expect(differing >= 2, "the legacy forms must differ from the canonical bytes somewhere")
        for ledger in [app, try Ledger(path: path, options: LedgerOptions(role: "cli"))] {
            let report = try ledger.maintenance.verify()
            #expect(report.isHealthy, "\(report.findings)")
        }
        // They read as they were, and a value that really differs is still found.
        let reread = try app.read({ try $0.projection(TaskList.self).contents() })
        #expect(reread.rows.map(\.key) == before.rows.map(\.key) && reread.rows.map(\.row) == before.rows.map(\.row) && reread.document == before.document)
        try damage(path) { txn, table in
            let rowKey = AppProjectionSpace(TaskList.self).row("t20")
            let stored = try #require(try txn.get(table, key: rowKey))
            let row = try #require(AppProjectionRow.decode(stored))
            try txn.put(table, key: rowKey, value: AppProjectionRow.encode(order: row.order, json: Array(#"{ "title": "read/write", "day": 2, "done": false }"#.utf8)))
        }
        #expect(problems(try app.maintenance.verify()).first?.hasPrefix("row 't20' differs from a rebuild") == true)
    }

    @Test func rowsAddedOrRemovedAndADocumentChangedAreFoundByTheRebuild() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try populate(app)
        // A row removed with its index entry, and the record's count lowered: structurally whole.
        let row = try storedRow(path, "t5")
        try damage(path) { txn, table in
            _ = try txn.delete(table, key: AppProjectionSpace(TaskList.self).row("t5"))
            _ = try txn.delete(table, key: AppProjectionSpace(TaskList.self).order(row.order, "t5"))
            let metaKey = AppProjectionSpace(TaskList.self).record
            var meta = try AppProjectionMeta.decode(try #require(try txn.get(table, key: metaKey)), path: path)
            meta.rows -= 1
            try txn.put(table, key: metaKey, value: try meta.encoded())
        }
        #expect(try Ledger(path: path, options: LedgerOptions(role: "cli")).maintenance.verify().isHealthy)
        let missing = try app.maintenance.verify()
        #expect(problems(missing).first?.hasPrefix("row 't5' is missing (a rebuild has") == true, "\(missing.findings)")

        // Restored by hand, then the document changed.
        try damage(path) { txn, table in
            try txn.put(table, key: AppProjectionSpace(TaskList.self).row("t5"), value: AppProjectionRow.encode(order: row.order, json: Array(row.json)))
            try txn.put(table, key: AppProjectionSpace(TaskList.self).order(row.order, "t5"), value: Array("t5".utf8))
            let metaKey = AppProjectionSpace(TaskList.self).record
            var meta = try AppProjectionMeta.decode(try #require(try txn.get(table, key: metaKey)), path: path)
            meta.rows += 1
            try txn.put(table, key: metaKey, value: try meta.encoded())
        }
        let restored = try app.maintenance.verify()
        #expect(restored.isHealthy, "\(restored.findings)")
        try damage(path) { txn, table in
            try txn.put(table, key: AppProjectionSpace(TaskList.self).document, value: Array(#"{"done":4,"open":99}"#.utf8))
        }
        let problem = try #require(problems(try app.maintenance.verify()).first)
        #expect(problem.hasPrefix("the document differs from a rebuild"), "\(problem)")
        #expect(problem.contains("99"))
    }

    @Test func structuralDamageIsNamedWithoutTheAppsCode() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try populate(app)
        let t2 = try storedRow(path, "t2")
        let t6 = try storedRow(path, "t6")
        try damage(path) { txn, table in
            // A row whose JSON is cut short, an index entry deleted, a row without its 0x01 header,
            // an index entry naming a row that does not exist, a document that is not JSON.
            try txn.put(table, key: AppProjectionSpace(TaskList.self).row("t0"), value: AppProjectionRow.encode(order: [], json: Array(#"{"title":"#.utf8)))
            _ = try txn.delete(table, key: AppProjectionSpace(TaskList.self).order(t2.order, "t2"))
            try txn.put(table, key: AppProjectionSpace(TaskList.self).row("t6"), value: [0x02] + Array(t6.json))
            try txn.put(table, key: AppProjectionSpace(TaskList.self).order([0x10, 0x00], "ghost"), value: Array("ghost".utf8))
            try txn.put(table, key: AppProjectionSpace(TaskList.self).document, value: Array("open=3".utf8))
        }
        let plain = try Ledger(path: path, options: LedgerOptions(role: "cli"))
        for ledger in [plain, app] {
            let found = problems(try ledger.maintenance.verify())
            #expect(found.contains { $0.hasPrefix("row 't0' is not JSON") }, "\(found)")
            // t0's old index entry (its order was not empty) names it at another order, and its
            // new order (empty) has no entry.
            #expect(found.contains("row 't0' has no order-index entry"), "\(found)")
            #expect(found.contains("an order-index entry names row 't0' at another order than the row's"), "\(found)")
            #expect(found.contains("row 't2' has no order-index entry"), "\(found)")
            #expect(found.contains("row 't6' is malformed (no 0x01 header, or an order length past its end)"), "\(found)")
            #expect(found.contains("the order index names row 'ghost', which does not exist"), "\(found)")
            #expect(found.contains { $0.hasPrefix("its document is not JSON") }, "\(found)")
            #expect(!found.contains { $0.contains("rebuild") }, "a damaged projection is not also rebuilt: \(found)")
        }
    }

    @Test func aRecordThatDisagreesWithItsRowsOrTheHeadIsNamed() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try populate(app)
        let head = try app.read({ try $0.head() })
        try damage(path) { txn, table in
            let metaKey = AppProjectionSpace(TaskList.self).record
            var meta = try AppProjectionMeta.decode(try #require(try txn.get(table, key: metaKey)), path: path)
            meta.rows += 2
            meta.appliedThrough = head + 5
            try txn.put(table, key: metaKey, value: try meta.encoded())
            // Another projection's record that is not JSON, and state of a projection without one.
            try txn.put(table, key: AppProjectionSpace(name: "broken", version: 1).record, value: Array("{".utf8))
            try txn.put(table, key: AppProjectionSpace(name: "orphan", version: 1).document, value: Array("{}".utf8))
        }
        let report = try Ledger(path: path, options: LedgerOptions(role: "cli")).maintenance.verify()
        let found = problems(report)
        #expect(found.contains("its record counts 13 rows, the table holds 11"), "\(found)")
        #expect(found.contains("its record is applied through \(head + 5), past the head \(head)"), "\(found)")
        #expect(report.findings.contains { if case .appProjection("broken", let p) = $0 { p.hasPrefix("its record does not decode") } else { false } })
        #expect(report.findings.contains(.appProjection(name: "orphan", problem: "the table holds its state but no record (version 1)")))
    }

    @Test func aTrimmedLogIsRebuiltFromTheSnapshotThatHoldsTheProjection() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try populate(app)
        let trimmedThrough = try app.read({ try $0.head() })
        // A process without the projection compacts everything: the projection applied it all.
        let plain = try Ledger(path: path, options: LedgerOptions(role: "compactor"))
        var policy = CompactionPolicy()
        policy.retainedTail = 0
        let report = try Compactor(ledger: plain, policy: policy).runOnce()
        #expect(report.trimmed?.upperBound == trimmedThrough, "\(report.blockers)")
        #expect(try app.read({ try $0.firstSequence() }) > 1)
        #expect(try app.projections.list().first?.builtFrom == 0, "its events before the log's start are gone: only the snapshot has them")
        // Events after the trim: some applied by the app, some by nobody yet.
        try app.append(TaskDone(id: "t0"))
        try app.append(TaskAdded(id: "t20", title: "new", day: 0))
        try plain.append(TaskRemoved(id: "t2"))
        for ledger in [app, plain] {
            let verified = try ledger.maintenance.verify()
            #expect(verified.isHealthy, "\(verified.findings)")
        }
        // A second compaction: a newer snapshot, the first one possibly deleted.
        try app.append(TaskDone(id: "t3"))
        try Compactor(ledger: plain, policy: policy).runOnce()
        try app.append(TaskDone(id: "t5"))
        let again = try app.maintenance.verify()
        #expect(again.isHealthy, "\(again.findings)")

        // A row changed behind its back is still found, rebuilt from the snapshot.
        let row = try storedRow(path, "t20")
        var changed = try JSONDecoder().decode(TaskList.Row.self, from: Data(row.json))
        changed.day = 3
        let json = try AppProjectionJSON.encode(changed, projection: TaskList.name)
        try damage(path) { txn, table in
            try txn.put(table, key: AppProjectionSpace(TaskList.self).row("t20"), value: AppProjectionRow.encode(order: row.order, json: json))
        }
        let forged = try app.maintenance.verify()
        #expect(problems(forged).first?.hasPrefix("row 't20' differs from a rebuild") == true, "\(forged.findings)")
    }

    @Test func aProjectionThatCannotBeRebuiltAnyMoreIsAWarningNotAFinding() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        for i in 0..<50 { try app.append(TaskAdded(id: "t\(i)", title: "task", day: 0)) }
        // 50 events the projection has not applied: the snapshot at 100 holds it through 50.
        let plain = try Ledger(path: path, options: LedgerOptions(role: "compactor"))
        for i in 0..<50 { try plain.append(TaskDone(id: "t\(i)")) }
        var policy = CompactionPolicy()
        policy.retainedTail = 0
        let first = try Compactor(ledger: plain, policy: policy).runOnce()
        #expect(first.snapshotSequence == 100 && first.trimmed?.upperBound == 50)
        #expect(try app.maintenance.verify().isHealthy)
        // Caught up, then trimmed through 90 with the snapshot at 100 kept (it covers 90): the
        // events 51–90 this projection would need are gone, and no snapshot holds it past 50.
        try app.append(TaskAdded(id: "t99", title: "last", day: 1))
        policy.retainedTail = 11
        let second = try Compactor(ledger: plain, policy: policy).runOnce()
        #expect(second.trimmed?.upperBound == 90 && !second.snapshotWritten, "\(second)")
        let report = try app.maintenance.verify()
        #expect(report.isHealthy, "\(report.findings)")
        #expect(report.warnings.contains { if case .appProjectionNotRebuilt(TaskList.name, _) = $0 { true } else { false } }, "\(report.warnings)")
    }

    @Test func aVersionBuiltAfterTheTrimIsRebuiltFromTheRetainedLog() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let v1 = try Ledger(path: path, options: options("app"))
        try populate(v1)
        let plain = try Ledger(path: path, options: LedgerOptions(role: "compactor"))
        var policy = CompactionPolicy()
        policy.retainedTail = 0
        try Compactor(ledger: plain, policy: policy).runOnce()
        try plain.append(TaskAdded(id: "t30", title: "later", day: 1))
        try plain.append(TaskDone(id: "t30"))
        // Version 2 is built from what the log still holds (after the trim).
        let v2 = try Ledger(path: path, options: options("app", [TaskListV2.self]))
        try v2.projections.build()
        let info = try #require(try v2.projections.list().last)
        let first = try v2.read({ try $0.firstSequence() })
        #expect(info.version == 2 && info.builtFrom == first - 1)
        try v2.append(TaskAdded(id: "t31", title: "latest", day: 2))
        let v2Report = try v2.maintenance.verify()
        #expect(v2Report.isHealthy, "\(v2Report.findings)")
        // Version 1 no longer matches what is stored: it is not compared (nor reported).
        #expect(try v1.maintenance.verify().isHealthy)
    }

    @Test func aProjectionBeingClearedHasOnlyItsRecordCheckedAndIsRebuiltByTheNextOpening() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        var rows: [ProjectionRow<TaskList>] = []
        do {
            let app = try Ledger(path: path, options: options("app"))
            try populate(app)
            rows = try app.read({ try $0.projection(TaskList.self).rows() })
        }
        // What a drop (or a new version's build) killed between two of its transactions leaves:
        // the record says `clearing`, part of the state is gone, the rest is still there.
        let t4 = try storedRow(path, "t4")
        try damage(path) { txn, table in
            let metaKey = AppProjectionSpace(TaskList.self).record
            var meta = try AppProjectionMeta.decode(try #require(try txn.get(table, key: metaKey)), path: path)
            meta.status = .clearing
            meta.rows = 0
            try txn.put(table, key: metaKey, value: try meta.encoded())
            _ = try txn.delete(table, key: AppProjectionSpace(TaskList.self).document)
            _ = try txn.delete(table, key: AppProjectionSpace(TaskList.self).order(t4.order, "t4"))
        }
        let plain = try Ledger(path: path, options: LedgerOptions(role: "cli"))
        let report = try plain.maintenance.verify()
        #expect(report.isHealthy, "\(report.findings)")
        #expect(try plain.projections.list().first?.status == "clearing")
        // The app's next writable handle clears what is left and builds it again.
        let app = try Ledger(path: path, options: options("app"))
        try app.projections.build()
        #expect(try app.read({ try $0.projection(TaskList.self).rows() }) == rows)
        let rebuilt = try app.maintenance.verify()
        #expect(rebuilt.isHealthy, "\(rebuilt.findings)")
    }

    @Test func aDroppedProjectionLeavesNothingAndVerifies() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try populate(app)
        let plain = try Ledger(path: path, options: LedgerOptions(role: "cli"))
        try plain.projections.drop(named: TaskList.name)
        #expect(try plain.projections.list().isEmpty)
        #expect(try plain.maintenance.verify().isHealthy)
    }

    @Test func theStoredLayoutIsTheDocumentedOne() throws {
        // docs/format.md, "App projections": the worked example, byte for byte.
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try app.append(TaskAdded(id: "t0", title: "Milk", day: 0))
        let name = Array("com.example.tasks".utf8)
        let order: [UInt8] = [0x10, 0x00, 0x20, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x4D, 0x69, 0x6C, 0x6B, 0x00, 0x01]
        let env = try Environment.open(directory: path, configuration: EnvironmentConfiguration())
        // The table's rows sit in the row tree `counters` under its prefix 0x00 0x08 (docs/format.md,
        // "The projection tables in two trees"), written down here rather than taken from the library.
        let rows = try env.database("counters")
        let table: [UInt8] = [0x00, 0x08]
        try env.read { txn in
            // Version 1's space: `name ‖ 0x01 ‖ "1" ‖ 0x00`; its record `0x00 ‖ name ‖ 0x01 ‖ "1"`.
            let space = table + name + [0x01, UInt8(ascii: "1"), 0x00]
            let row = try txn.get(rows, key: space + [UInt8(ascii: "R")] + Array("t0".utf8))
            #expect(row == [0x01, 0x00, 0x12] + order + Array(#"{"day":0,"done":false,"title":"Milk"}"#.utf8))
            #expect(try txn.get(rows, key: space + [UInt8(ascii: "O")] + order + Array("t0".utf8)) == Array("t0".utf8))
            #expect(try txn.get(rows, key: space + [UInt8(ascii: "D")]) == Array(#"{"done":0,"open":1}"#.utf8))
            let record = try #require(try txn.get(rows, key: table + [0x00] + name + [0x01, UInt8(ascii: "1")]))
            #expect(String(decoding: record, as: UTF8.self) == #"{"appliedThrough":1,"builtFrom":0,"eventTypes":["com.example.task-added","com.example.task-done","com.example.task-removed"],"name":"com.example.tasks","rows":1,"status":"ready","version":1}"#)
        }
    }

    @Test func byteComparisonsAgreeWithTheElementwiseOnes() {
        // The caches' and the overlay's comparisons (one memcmp) against Swift's own, byte by byte.
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let a = (0..<Int.random(in: 0...6, using: &rng)).map { _ in UInt8.random(in: 0...3, using: &rng) * 85 }
            let b = (0..<Int.random(in: 0...6, using: &rng)).map { _ in UInt8.random(in: 0...3, using: &rng) * 85 }
            #expect(a.sameBytes(as: b) == (a == b), "\(a) \(b)")
            #expect(a.bytesPrecede(b) == a.lexicographicallyPrecedes(b), "\(a) \(b)")
            #expect((StateKey(bytes: a) < StateKey(bytes: b)) == a.lexicographicallyPrecedes(b))
        }
    }

    @Test func orderBytesSortAsTheDeclaredComponents() {
        // docs/format.md, "Order bytes": memcmp order of the bytes is the components compared in
        // turn — false < true, ints and doubles numerically (-0 is 0), strings by UTF-8 bytes,
        // `descending` reversed. The model compares the components themselves.
        enum Value { case bool(Bool), int(Int64), double(Double), string(String) }
        func model(_ a: [(Value, Bool)], _ b: [(Value, Bool)]) -> Int {
            for ((x, xDown), (y, _)) in zip(a, b) {
                var c: Int
                switch (x, y) {
                case (.bool(let p), .bool(let q)): c = p == q ? 0 : (p ? 1 : -1)
                case (.int(let p), .int(let q)): c = p == q ? 0 : (p < q ? -1 : 1)
                case (.double(let p), .double(let q)): c = p == q ? 0 : (p < q ? -1 : 1)
                case (.string(let p), .string(let q)):
                    c = Array(p.utf8) == Array(q.utf8) ? 0 : (Array(p.utf8).lexicographicallyPrecedes(Array(q.utf8)) ? -1 : 1)
                default: c = 0
                }
                if xDown { c = -c }
                if c != 0 { return c }
            }
            return 0
        }
        func component(_ value: Value, _ down: Bool) -> ProjectionOrder.Component {
            let c: ProjectionOrder.Component = switch value {
            case .bool(let v): .bool(v)
            case .int(let v): .int(v)
            case .double(let v): .double(v)
            case .string(let v): .string(v)
            }
            return down ? .descending(c) : c
        }
        var rng = SystemRandomNumberGenerator()
        let strings = ["", "a", "a\u{0}", "a\u{0}b", "ab", "b", "é", "\u{0}", "zz\u{0}\u{0}"]
        let doubles: [Double] = [-.infinity, -1e300, -2.5, -0.0, 0.0, 1e-300, 2.5, .infinity]
        let ints: [Int64] = [.min, -1, 0, 1, .max]
        // One shape of components per round (same kinds, same directions), random values.
        for _ in 0..<300 {
            let kinds = (0..<Int.random(in: 1...3, using: &rng)).map { _ in (Int.random(in: 0..<4, using: &rng), Bool.random(using: &rng)) }
            func draw() -> [(Value, Bool)] {
                kinds.map { kind, down in
                    let value: Value = switch kind {
                    case 0: .bool(Bool.random(using: &rng))
                    case 1: .int(ints.randomElement(using: &rng) ?? 0)
                    case 2: .double(doubles.randomElement(using: &rng) ?? 0)
                    default: .string(strings.randomElement(using: &rng) ?? "")
                    }
                    return (value, down)
                }
            }
            let a = draw(), b = draw()
            let x = ProjectionOrder(a.map { component($0.0, $0.1) }).bytes, y = ProjectionOrder(b.map { component($0.0, $0.1) }).bytes
            let bytes = x == y ? 0 : (x.lexicographicallyPrecedes(y) ? -1 : 1)
            #expect(bytes == model(a, b), "\(a) vs \(b): bytes \(x) vs \(y)")
        }
        // Each kind's bytes as docs/format.md writes them: stores keep them, so they never change.
        #expect(ProjectionOrder(.descending(.bool(true))).bytes == [0xEF, 0xFE])
        #expect(ProjectionOrder(.bool(false), .bool(true)).bytes == [0x10, 0x00, 0x10, 0x01])
        #expect(ProjectionOrder(.int(-2)).bytes == [0x20, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE])
        #expect(ProjectionOrder(.int(1)).bytes == [0x20, 0x80, 0, 0, 0, 0, 0, 0, 0x01])
        #expect(ProjectionOrder(.double(1.5)).bytes == [0x30, 0xBF, 0xF8, 0, 0, 0, 0, 0, 0])
        #expect(ProjectionOrder(.double(-1.5)).bytes == [0x30, 0x40, 0x07, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(ProjectionOrder(.double(-0.0)).bytes == ProjectionOrder(.double(0)).bytes)
        #expect(ProjectionOrder(.string("a\u{0}é")).bytes == [0x40, 0x61, 0x00, 0xFF, 0xC3, 0xA9, 0x00, 0x01])
        #expect(ProjectionOrder(.descending(.int(1))).bytes == [0xDF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE])
    }
}
