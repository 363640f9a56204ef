import Foundation
import Testing
import TestSupport
@testable import InboxLedger

#if canImport(Glibc)
import Glibc
#endif

/// App projections across real processes (docs/semantics.md, "App projections"): processes
/// appending with and without the projection, SIGKILLed at random instants and suspended;
/// two versions at once; builds killed mid-way, compacted under, and writers appending while
/// they run. Every state read through a registered handle is compared with TaskListModel (an
/// independent model folded from the log by hand). Each test prints its seed; set
/// APP_PROJECTION_SEED to replay one.
@Suite(.serialized) struct AppProjectionProcessTests {
    let agent = Processes.product("LedgerTestAgent")

    // MARK: Helpers

    func seed(_ test: String) -> UInt64 {
        let seed = ProcessInfo.processInfo.environment["APP_PROJECTION_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("AppProjectionProcessTests.\(test): seed \(seed) (APP_PROJECTION_SEED=\(seed) replays it)")
        return seed
    }

    /// A handle with `projections` registered; a writable one runs their builds before it is
    /// returned (`ledger.projections.build()`, what a host app calls).
    func open(_ path: String, _ role: String, _ projections: [any LedgerProjection.Type] = [], readOnly: Bool = false) throws -> Ledger {
        var options = LedgerOptions(role: role)
        options.projections = projections
        options.readOnly = readOnly
        options.durability = .none
        let ledger = try Ledger(path: path, options: options)
        if !readOnly, !projections.isEmpty { try ledger.projections.build() }
        return ledger
    }

    /// Every event of the log from its first retained one, checking they are dense.
    func retained(_ ledger: Ledger) throws -> [Event] {
        var events: [Event] = []
        var iterator = EventIterator(ledger, after: 0, pageSize: 4096)
        while let e = try iterator.next() {
            if let last = events.last { #expect(e.sequence == last.sequence + 1, "a gap before \(e.sequence)") }
            events.append(e)
        }
        return events
    }

    func model(_ rules: TaskListModel.Rules, _ events: [Event], through limit: UInt64 = .max) throws -> TaskListModel {
        var model = TaskListModel(rules)
        try model.fold(events, through: limit)
        return model
    }

    /// The acknowledged events of an agent's ack file: sequence → (type, task ID or "-").
    /// A line cut short by a kill lacks its final "." and is ignored.
    func acknowledged(_ ackPath: String) -> [UInt64: (type: String, id: String)] {
        guard let text = try? String(contentsOfFile: ackPath, encoding: .utf8) else { return [:] }
        var acks: [UInt64: (type: String, id: String)] = [:]
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ").map(String.init)
            guard f.count == 5, f[0] == "ack", f[4] == ".", let seq = UInt64(f[1]) else { continue }
            acks[seq] = (f[2], f[3])
        }
        return acks
    }

    /// The lines of an agent's output saying a projection read was refused.
    func refusals(_ stdout: String) -> [Substring] { stdout.split(separator: "\n").filter { $0.hasPrefix("refused ") } }

    /// How many reads an agent checked against its model.
    func checks(_ stdout: String) -> Int { stdout.split(separator: "\n").count { $0.hasPrefix("checked ") } }

    /// How many events an agent's ack file acknowledges (one line each).
    func ackCount(_ ackPath: String) -> Int {
        guard let text = try? String(contentsOfFile: ackPath, encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").count
    }

    /// Every acknowledged event is in the log, at its sequence, with its type and task.
    func checkAcknowledged(_ ackPath: String, in events: [Event], _ note: String) {
        guard let first = events.first?.sequence else { return }
        let acks = acknowledged(ackPath)
        for (seq, ack) in acks.sorted(by: { $0.key < $1.key }) where seq >= first {
            let index = Int(seq - first)
            guard index < events.count else {
                Issue.record("\(note): acknowledged \(seq) (\(ack.type) \(ack.id)) is past the head \(events.last?.sequence ?? 0)")
                continue
            }
            let event = events[index]
            let id = (try? JSONDecoder().decode([String: AnyDecodable].self, from: Data(event.payload)))?["id"]?.string ?? "-"
            #expect(event.type == ack.type && id == ack.id, "\(note): sequence \(seq) is \(event.type) \(id), acknowledged as \(ack.type) \(ack.id)")
        }
    }

    struct AnyDecodable: Decodable {
        var string: String?
        init(from decoder: any Decoder) throws { string = try? decoder.singleValueContainer().decode(String.self) }
    }

    /// The projection's record and the first retained sequence, from one read transaction.
    func recordAndFirst(_ ledger: Ledger, version: Int = TaskList.version) throws -> (info: ProjectionInfo?, first: UInt64) {
        try ledger.read("test: record and first") { tables in
            let meta = try AppProjectionTable.meta(TaskList.name, version: version, in: tables.projections, path: tables.path)
            return (meta.map(ProjectionInfo.init), try tables.firstSequence())
        }
    }

    /// Appends `count` task events with many distinct tasks through a handle without the
    /// projection (nothing built yet), in commits of 500.
    func fill(_ ledger: Ledger, count: Int, tasks: Int, using generator: inout SeededGenerator) throws {
        var pending: [NewEvent] = []
        var written = 0
        while written < count {
            let role = ["host", "host", "host", "widget", "extension"].randomElement(using: &generator) ?? "host"
            pending += try TaskWorkload.batch(role: role, using: &generator, tasks: tasks)
            if pending.count >= 500 || written + pending.count >= count {
                let take = Array(pending.prefix(count - written))
                try ledger.append(contentsOf: take)
                written += take.count
                pending = []
            }
        }
    }

    func expectAgrees<P: LedgerProjection>(_ model: TaskListModel, _ contents: ProjectionContents<P>, _ note: String = "",
                                           sourceLocation: SourceLocation = #_sourceLocation) where P.Row == TaskList.Row, P.Document == TaskList.Document {
        let mismatch = model.mismatch(contents)
        #expect(mismatch == nil, "\(note) \(mismatch ?? "")", sourceLocation: sourceLocation)
    }

    func isUnavailable(_ body: () throws -> Void) -> Bool {
        do {
            try body()
            return false
        } catch {
            switch error as? LedgerError {
            case .projectionUnavailable?, .projectionBuilding?: return true
            default: return false
            }
        }
    }

    /// Starts a build (`task-open`) and kills it once `kill(info)` says so, while the test
    /// polls the stored record; returns the record seen last before the kill, or nil when the
    /// opening finished first. Checks the build's progress never goes backwards.
    func startBuild(_ path: String, version: Int, observer: Ledger, killWhen kill: (ProjectionInfo) -> Bool,
                    onPoll: (ProjectionInfo?, UInt64) throws -> Void = { _, _ in }) throws -> (killedAt: ProjectionInfo?, output: ProcessOutput) {
        let builder = try Processes.start(agent, ["task-open", path, String(version), "none"])
        var lastBuilding: UInt64 = 0
        var killedAt: ProjectionInfo?
        _ = try waitUntil {
            let (info, first) = try recordAndFirst(observer, version: version)
            try onPoll(info, first)
            if let info, info.version == version {
                if info.status == "building" {
                    #expect(info.appliedThrough >= lastBuilding, "the build went back from \(lastBuilding) to \(info.appliedThrough)")
                    lastBuilding = info.appliedThrough
                }
                if kill(info) {
                    builder.kill()
                    killedAt = info
                    return true
                }
            }
            return !builder.process.isRunning
        }
        let output = try builder.wait(timeout: hangGuardSeconds)
        if killedAt != nil, !output.signalled { killedAt = nil }  // it had finished before the signal
        return (killedAt, output)
    }

    // MARK: 1. Host, widget and extension, killed and suspended

    /// The host (TaskAdded, version 1), the widget (TaskDone, version 1) and an extension
    /// without the projection (TaskRemoved, badge deltas) append at once, the first two
    /// suspended and resumed at random instants and checking their own reads against the
    /// model; some are SIGKILLed at random instants each round. Every read through a
    /// registered handle — theirs and the test's, during and between rounds — agrees with the
    /// model folded from the log through the head it reflects, and every acknowledged append
    /// is in the log.
    @Test(.timeLimit(.minutes(10)))
    func hostWidgetAndExtensionKilledAndSuspendedAgreeWithTheLog() throws {
        var generator = SeededGenerator(seed: seed("hostWidgetAndExtension"))
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let app = try open(path, "test", [TaskList.self])
        try app.append(TaskAdded(id: "t0", title: "first", day: 1))
        let roles: [(role: String, version: Int, suspend: Int)] = [("host", 1, 1), ("widget", 1, 1), ("extension", 0, 0)]
        var kills = 0
        var suspendedCalls = 0
        for round in 0..<6 {
            let stop = dir.child("stop-\(round)")
            let processes = try roles.map { r in
                try Processes.start(agent, ["task-actor", path, r.role, String(r.version), String(generator.next() >> 1),
                                            dir.child("\(r.role)-\(round).ack"), "-1", String(r.suspend), "4", stop])
            }
            defer { for p in processes { p.kill(); _ = try? p.wait(timeout: 30) } }
            // A victim is killed once it has acknowledged a random number of events, after a
            // random pause: a random instant of its work (mid-append, mid-suspend, mid-check).
            let victims = roles.indices.map { _ in Bool.random(using: &generator) }
            for (k, p) in processes.enumerated() {
                let target = Int.random(in: 10...120, using: &generator)
                let ackPath = dir.child("\(roles[k].role)-\(round).ack")
                _ = waitUntil { ackCount(ackPath) >= target || !p.process.isRunning }
                #expect(p.process.isRunning, "round \(round): \(roles[k].role) ended early: \(p.stdoutSoFar.suffix(300))")
                // A read while the others write: agrees with the log through its head.
                let contents = try app.read({ try $0.projection(TaskList.self).contents() })
                let live = try model(.v1, try retained(app), through: contents.head)
                expectAgrees(live, contents, "round \(round), live:")
                if victims[k] {
                    usleep(UInt32.random(in: 0...3000, using: &generator))
                    p.kill()
                }
            }
            _ = FileManager.default.createFile(atPath: stop, contents: nil)
            for (k, p) in processes.enumerated() {
                let out = try p.wait(timeout: hangGuardSeconds)
                let name = "round \(round) \(roles[k].role)"
                #expect(out.signalled == victims[k], "\(name): \(out.signalled ? "killed" : "exited") \(out.stderr)")
                if out.signalled {
                    kills += 1
                } else {
                    #expect(out.status == 0 && out.stdout.contains("appended"), "\(name): \(out.stderr)")
                }
                #expect(!out.stderr.contains("mismatch"), "\(name): \(out.stderr)")
                #expect(refusals(out.stdout).isEmpty, "\(name): a read was refused: \(refusals(out.stdout).prefix(3))")
                if roles[k].version > 0, !out.signalled {
                    #expect(out.stdout.contains("checked"), "\(name) never checked its reads")
                }
                if roles[k].suspend > 0, !out.signalled, let last = out.stdout.split(separator: "\n").last(where: { $0.hasPrefix("appended") }) {
                    let fields = last.split(separator: " ")
                    #expect(fields.count == 6 && (Int(fields[3]) ?? 0) > 0, "\(name) was never suspended: \(last)")
                    suspendedCalls += fields.count == 6 ? Int(fields[5]) ?? 0 : 0
                }
            }
            // Quiescent: the state read through a registered handle is the model of the whole log.
            let events = try retained(app)
            let expected = try model(.v1, events)
            let contents = try app.read({ try $0.projection(TaskList.self).contents() })
            #expect(contents.head == events.last?.sequence)
            expectAgrees(expected, contents, "round \(round):")
            for r in roles { checkAcknowledged(dir.child("\(r.role)-\(round).ack"), in: events, "round \(round) \(r.role)") }
        }
        #expect(kills > 0, "no process was killed: the rounds tested no crash")
        print("AppProjectionProcessTests: \(kills) processes killed, \(suspendedCalls) calls refused while suspended (retried)")
        // A fresh registered handle reads the same; its next append records everything applied.
        let fresh = try open(path, "app", [TaskList.self])
        try fresh.append(TaskAdded(id: "t-last", title: "last", day: 0))
        let events = try retained(fresh)
        let expected = try model(.v1, events)
        let contents = try fresh.read({ try $0.projection(TaskList.self).contents() })
        expectAgrees(expected, contents)
        let info = try #require(try fresh.projections.list().first)
        #expect(info.status == "ready" && info.version == 1)
        #expect(info.appliedThrough == events.last?.sequence)
        #expect(info.rows == expected.rows.count)
        #expect(try fresh.maintenance.verify().isHealthy)
    }

    // MARK: 2. Two versions at once

    /// The rule (docs/semantics.md, "App projections": upgrades): the process with version 2
    /// builds it beside version 1 — its opening applies nothing, its builder works in steps —
    /// while the process still running version 1 appends and reads version 1 throughout, never
    /// refused; once version 2 is ready both are kept, each by the processes that register it
    /// (and caught up with the others' events); version 1 is dropped by the first build after
    /// the last live process registering it is gone, and never taken back.
    @Test(.timeLimit(.minutes(10)))
    func twoProcessesRunningTwoVersionsAtOnce() throws {
        var generator = SeededGenerator(seed: seed("twoVersions"))
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let v1 = try open(path, "test-v1", [TaskList.self])
        try fill(v1, count: 300, tasks: 60, using: &generator)
        expectAgrees(try model(.v1, try retained(v1)), try v1.read({ try $0.projection(TaskList.self).contents() }))

        let stop = dir.child("stop")
        // The old widget (version 1) appends TaskDone and reads every 2 batches.
        let widget = try Processes.start(agent, ["task-actor", path, "widget", "1", String(generator.next() >> 1), dir.child("widget.ack"), "-1", "0", "2", stop])
        let ext = try Processes.start(agent, ["task-actor", path, "extension", "0", String(generator.next() >> 1), dir.child("extension.ack"), "-1", "0", "0", stop])
        defer { for p in [widget, ext] { p.kill(); _ = try? p.wait(timeout: 30) } }
        _ = waitUntil { widget.stdoutSoFar.contains("checked") || !widget.process.isRunning }
        #expect(widget.stdoutSoFar.contains("checked"), "version 1 read before version 2 came: \(widget.stdoutSoFar.suffix(300))")

        // The updated host (version 2) opens while both write: its builder builds version 2 beside version 1.
        let host = try Processes.start(agent, ["task-actor", path, "host", "2", String(generator.next() >> 1), dir.child("host.ack"), "-1", "0", "3", stop])
        defer { host.kill(); _ = try? host.wait(timeout: 30) }
        #expect(line(host, startingWith: "ready") != nil, "\(host.stdoutSoFar)")
        let switched = try waitUntil {
            try v1.projections.list().contains { $0.version == 2 && $0.status == "ready" } || !host.process.isRunning
        }
        #expect(switched && host.process.isRunning, "version 2 was never ready: \(host.stdoutSoFar.suffix(300))")
        #expect(try v1.projections.list().map(\.version) == [1, 2], "version 1 is kept while the widget registers it")
        // Both versions append concurrently, and each reads its own.
        let widgetAcksAtV2 = ackCount(dir.child("widget.ack"))
        let hostChecksAtV2 = checks(host.stdoutSoFar)
        _ = waitUntil {
            (ackCount(dir.child("widget.ack")) >= widgetAcksAtV2 + 100 && ackCount(dir.child("host.ack")) >= 100
                && checks(host.stdoutSoFar) > hostChecksAtV2 + 5) || !widget.process.isRunning || !host.process.isRunning
        }
        print("AppProjectionProcessTests: version 1 appended \(ackCount(dir.child("widget.ack")) - widgetAcksAtV2) events after version 2 was ready, version 2 \(ackCount(dir.child("host.ack"))) events, \(checks(host.stdoutSoFar)) version-2 reads")
        // The test's version-1 handle reads and appends as before (and so registers version 1 too).
        let v1Contents = try v1.read({ try $0.projection(TaskList.self).contents() })
        expectAgrees(try model(.v1, try retained(v1), through: v1Contents.head), v1Contents)  // the others append on
        try v1.append(TaskDone(id: "t1"))
        _ = FileManager.default.createFile(atPath: stop, contents: nil)
        let outputs = try [widget, host, ext].map { try $0.wait(timeout: hangGuardSeconds) }
        for (name, out) in zip(["widget", "host", "extension"], outputs) {
            #expect(out.status == 0 && out.stdout.contains("appended"), "\(name): \(out.stderr)")
        }
        // The widget: every read succeeded and matched version 1's model (a mismatch exits 1).
        #expect(refusals(outputs[0].stdout).isEmpty && checks(outputs[0].stdout) > 0, "\(refusals(outputs[0].stdout).prefix(3))")
        // The host: every read after the build matched version 2's model; only "being built" refusals before it.
        #expect(refusals(outputs[1].stdout).allSatisfy { $0.contains("being built") } && outputs[1].stdout.contains("checked"), "\(refusals(outputs[1].stdout).prefix(3))")

        // The widget is gone; the test process (which registers version 1 too) builds version 2:
        // a process's own registration never keeps a version it replaces, so version 1 is dropped.
        let v2 = try open(path, "test-v2", [TaskListV2.self])
        #expect(try waitUntil { try v2.projections.build(); return try v2.projections.list().map(\.version) == [2] })
        var events = try retained(v2)
        #expect(Set(events.map(\.origin.role)).isSuperset(of: ["widget", "host", "extension", "test-v1"]))
        var expected = try model(.v2, events)
        expectAgrees(expected, try v2.read({ try $0.projection(TaskListV2.self).contents() }))
        for name in ["widget", "host", "extension"] { checkAcknowledged(dir.child("\(name).ack"), in: events, name) }
        // Version 1's appends go through and never touch the version-2 record.
        try v2.append(TaskAdded(id: "t-sync", title: "sync", day: 0))
        let before = try #require(try v2.projections.list().first)
        for i in 0..<5 { try v1.append(TaskDone(id: "t\(i)")) }
        #expect(try v2.projections.list().first == before, "a version-1 append changed the version-2 record")
        #expect(isUnavailable { _ = try v1.read({ try $0.projection(TaskList.self).contents() }) })
        events = try retained(v2)
        expected = try model(.v2, events)
        expectAgrees(expected, try v2.read({ try $0.projection(TaskListV2.self).contents() }))
        // Version 1 reopened writable does not take the projection back.
        let v1Again = try open(path, "widget", [TaskList.self])
        #expect(try v1Again.projections.list().map(\.version) == [2])
        #expect(isUnavailable { _ = try v1Again.read({ try $0.projection(TaskList.self).rows() }) })
        #expect(try v2.maintenance.verify().isHealthy)
    }

    // MARK: 3. Builds killed at random points

    /// 30,000 task events written without the projection; openings with it registered (the
    /// build runs in `Ledger.init`, 500 events a transaction) are SIGKILLed at random points
    /// of the build. Each next opening continues where the last one stopped (the record's
    /// appliedThrough never goes back); reads meanwhile are refused; a final opening finishes
    /// it: the state is the model of the whole log, the record `ready` through the head.
    @Test(.timeLimit(.minutes(10)))
    func aBuildKilledAtRandomPointsIsFinishedByTheNextOpening() throws {
        var generator = SeededGenerator(seed: seed("buildKilled"))
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let plain = try open(path, "test")
        let total = 30_000
        try fill(plain, count: total, tasks: 12_000, using: &generator)
        #expect(try plain.projections.list().isEmpty)
        let readOnly = try open(path, "widget", [TaskList.self], readOnly: true)

        var kills = 0
        var progress: UInt64 = 0
        for round in 0..<4 {
            let target = UInt64.random(in: progress...(progress + UInt64(total) / 4), using: &generator)
            let (killedAt, output) = try startBuild(path, version: 1, observer: plain) { info in
                info.status == "building" && info.appliedThrough >= target
            }
            guard let killedAt else {
                #expect(output.status == 0, "round \(round): \(output.stderr)")
                break  // the opening finished first (a fast machine): the final check still holds
            }
            let after = try #require(try plain.projections.list().first)
            if after.status == "ready" { break }  // killed between its last commit and its exit
            kills += 1
            #expect(after.status == "building" && after.appliedThrough >= killedAt.appliedThrough && after.appliedThrough >= progress,
                    "round \(round): \(after) after a kill at \(killedAt)")
            progress = after.appliedThrough
            // Half-built: reads are refused, never a partial state — or, with at most the
            // catch-up bound left, answered whole (the rest replayed in memory).
            if UInt64(total) > after.appliedThrough + UInt64(AppProjectionBounds.catchUp) {
                #expect(isUnavailable { _ = try readOnly.read({ try $0.projection(TaskList.self).contents() }) }, "round \(round)")
            } else {
                expectAgrees(try model(.v1, try retained(plain)), try readOnly.read({ try $0.projection(TaskList.self).contents() }), "round \(round), nearly built:")
            }
        }
        #expect(kills > 0, "no build was killed mid-way")
        // The next opening finishes it.
        let final = try open(path, "app", [TaskList.self])
        let info = try #require(try final.projections.list().first)
        let events = try retained(final)
        #expect(info.status == "ready" && info.version == 1 && info.builtFrom == 0)
        #expect(info.appliedThrough == events.last?.sequence)
        let expected = try model(.v1, events)
        #expect(info.rows == expected.rows.count)
        expectAgrees(expected, try final.read({ try $0.projection(TaskList.self).contents() }))
        expectAgrees(expected, try readOnly.read({ try $0.projection(TaskList.self).contents() }), "read-only handle:")
    }

    /// iOS suspends an app in the middle of a build (docs/operations.md: a suspended process
    /// holding a file lock in the shared container is killed). `Ledger.suspend()` while the
    /// background builder is working ends in time and leaves nothing held — no lock on
    /// lock.mdb, no reader slot — and no step runs while suspended; after `resume()`, the
    /// process's reads (refused with `projectionBuilding`) start the builder again and the
    /// build finishes, equal to the model of the log.
    @Test(.timeLimit(.minutes(10)))
    func aProcessSuspendedMidBuildHoldsNothingAndItsReadsFinishTheBuildAfterResume() throws {
        var generator = SeededGenerator(seed: seed("suspendMidBuild"))
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let control = dir.child("control")
        try FileManager.default.createDirectory(atPath: control, withIntermediateDirectories: true)
        let plain = try open(path, "test")
        try fill(plain, count: 60_000, tasks: 20_000, using: &generator)
        let app = try Processes.start(agent, ["task-build-suspend", path, control])
        defer { app.kill(); _ = try? app.wait(timeout: 10) }
        let suspended = try #require(line(app, startingWith: "suspended"), "\(app.stdoutSoFar)")
        let atSuspension = try #require(try plain.projections.list().first)
        #expect(atSuspension.status == "building" && atSuspension.appliedThrough >= UInt64(suspended.split(separator: " ").last ?? "") ?? .max,
                "\(suspended), then \(atSuspension)")
        // From /proc/locks, not with `lockHolder` (F_GETLK): this process has the ledger open,
        // and closing any descriptor of lock.mdb would drop its own LMDB locks (the resumed
        // agent then found data.mdb in use through "another" lock table, and was refused).
        #expect(posixLocks(of: app.pid).isEmpty, "suspended mid-build but still holding: \(posixLocks(of: app.pid))")
        let readers = try plain.maintenance.statistics().readers
        #expect(!readers.contains { $0.pid == app.pid }, "a reader slot of the suspended process: \(readers)")
        // No step ran while the checks above did (a running builder commits every ~10 ms).
        #expect(try plain.projections.list().first?.appliedThrough == atSuspension.appliedThrough, "the build moved while suspended")

        _ = FileManager.default.createFile(atPath: control + "/resume", contents: nil)
        guard let ready = line(app, startingWith: "ready") else {
            Issue.record("no build finished after the resume: \(app.stdoutSoFar) \((try? app.wait(timeout: 10))?.stderr ?? "")")
            return
        }
        let events = try retained(plain)
        let expected = try model(.v1, events)
        #expect(ready == "ready \(expected.rows.count) \(events.last?.sequence ?? 0) ready", "\(ready)")
        let readOnly = try open(path, "widget", [TaskList.self], readOnly: true)
        expectAgrees(expected, try readOnly.read({ try $0.projection(TaskList.self).contents() }), "after the resumed build:")
        _ = FileManager.default.createFile(atPath: control + "/exit", contents: nil)
        #expect(try app.wait(timeout: hangGuardSeconds).status == 0)
    }

    /// A version bump killed at random points of its build: version 1 processes keep appending
    /// and reading version 1 all along (the version-2 record untouched by them), and the next
    /// version-2 build finishes it: the state is version 2's model of the log, and version 1,
    /// which no live process registers, is dropped.
    @Test(.timeLimit(.minutes(10)))
    func aVersionBumpKilledMidBuildIsFinishedByTheNextBuildWhileVersionOneKeepsWorking() throws {
        var generator = SeededGenerator(seed: seed("bumpKilled"))
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let plain = try open(path, "test")
        try fill(plain, count: 30_000, tasks: 15_000, using: &generator)
        let v1 = try open(path, "widget", [TaskList.self])  // builds version 1 here
        #expect(try v1.projections.list().first?.status == "ready")

        var buildingKills = 0
        for round in 0..<3 {
            let target = UInt64.random(in: 1...20_000, using: &generator)
            let (killedAt, output) = try startBuild(path, version: 2, observer: plain) { info in
                info.status == "building" && info.appliedThrough >= target
            }
            guard killedAt != nil else {
                #expect(output.status == 0, "round \(round): \(output.stderr)")
                break
            }
            buildingKills += 1
            // The old widget: appends go through, reads of version 1 too, the version-2 record untouched.
            let record = try #require(try recordAndFirst(plain, version: 2).info)
            try v1.append(TaskAdded(id: "t-old-\(round)", title: "from version 1", day: 3))
            expectAgrees(try model(.v1, try retained(v1)), try v1.read({ try $0.projection(TaskList.self).contents() }), "round \(round):")
            #expect(try recordAndFirst(plain, version: 2).info == record)
        }
        print("AppProjectionProcessTests: building kills \(buildingKills)")
        #expect(buildingKills > 0, "no build was killed mid-way")

        let v2 = try open(path, "app", [TaskListV2.self])
        let info = try #require(try v2.projections.list().last)
        let events = try retained(v2)
        #expect(info.version == 2 && info.status == "ready" && info.appliedThrough == events.last?.sequence)
        let expected = try model(.v2, events)
        #expect(info.rows == expected.rows.count)
        expectAgrees(expected, try v2.read({ try $0.projection(TaskListV2.self).contents() }))
        #expect(try waitUntil { try v2.projections.build(); return try v2.projections.list().map(\.version) == [2] }, "version 1 dropped")
        #expect(isUnavailable { _ = try v1.read({ try $0.projection(TaskList.self).contents() }) })
        #expect(try v2.maintenance.verify().isHealthy)
    }

    // MARK: 4. Compaction during a build

    /// A compactor in another process (retainedTail 0) runs while the projection is built: it
    /// trims exactly up to what the build has applied, never past it (checked in one read
    /// transaction with the record, all along), and the build completes with the model of the
    /// whole log, though most of the log is gone by then.
    @Test(.timeLimit(.minutes(10)))
    func compactionWhileAProjectionIsBeingBuiltNeverTrimsPastIt() throws {
        var generator = SeededGenerator(seed: seed("compaction"))
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let plain = try open(path, "test")
        try fill(plain, count: 30_000, tasks: 8_000, using: &generator)
        let all = try retained(plain)
        // A consumer at the head keeps what is appended from now on (the model needs it), so
        // the compactor trims only the events written so far, as far as the build lets it.
        _ = try plain.consumers.consumer(named: "model", startingAt: .end)

        // A build stopped half-way (killed), then a compaction: it trims exactly up to the build's progress.
        let target = UInt64.random(in: 1_000...6_000, using: &generator)
        let (killedAt, output) = try startBuild(path, version: 1, observer: plain) { info in
            info.status == "building" && info.appliedThrough >= target
        }
        if killedAt != nil {
            let before = try #require(try recordAndFirst(plain).info)
            let compacted = try Processes.run(agent, ["compact", path, "0", "200"])
            #expect(compacted.status == 0 && compacted.stdout.hasPrefix("trimmed"), "\(compacted.stdout) \(compacted.stderr)")
            let (after, first) = try recordAndFirst(plain)
            #expect(after == before)
            #expect(first == before.appliedThrough + 1, "trimmed through \(first - 1), the build had applied through \(before.appliedThrough)")
        } else {
            #expect(output.status == 0, "\(output.stderr)")
        }

        // The build continued while a compactor runs over and over; writers append meanwhile.
        let stop = dir.child("stop")
        let compactor = try Processes.start(agent, ["compact-until", path, stop])
        let writer = try Processes.start(agent, ["task-actor", path, "extension", "0", String(generator.next() >> 1), dir.child("writer.ack"), "-1", "0", "0", stop])
        defer { for p in [compactor, writer] { p.kill(); _ = try? p.wait(timeout: 30) } }
        #expect(line(compactor, startingWith: "compacting") != nil)
        var polls = 0
        var firstWhileBuilding: (lowest: UInt64, highest: UInt64)?
        var joining: RunningProcess?
        defer { joining?.kill(); _ = try? joining?.wait(timeout: 30) }
        let (_, built) = try startBuild(path, version: 1, observer: plain, killWhen: { _ in false }) { info, first in
            polls += 1
            guard let info else { return }
            #expect(first <= info.appliedThrough + 1, "trimmed through \(first - 1) while the record (\(info.status)) had applied through \(info.appliedThrough)")
            guard info.status == "building" else { return }
            firstWhileBuilding = (min(firstWhileBuilding?.lowest ?? first, first), max(firstWhileBuilding?.highest ?? first, first))
            // A second opening with the projection joins the build under way.
            if joining == nil { joining = try Processes.start(agent, ["task-open", path, "1", "none"]) }
        }
        #expect(built.status == 0 && built.stdout.hasPrefix("open ready"), "\(built.stdout) \(built.stderr)")
        let joined = try #require(joining).wait(timeout: hangGuardSeconds)
        #expect(joined.status == 0 && joined.stdout.hasPrefix("open ready"), "\(joined.stdout) \(joined.stderr)")
        let trimmedWhileBuilding = firstWhileBuilding.map { $0.highest > $0.lowest } ?? false
        #expect(trimmedWhileBuilding, "the compactor trimmed nothing while the build ran: \(String(describing: firstWhileBuilding))")
        _ = FileManager.default.createFile(atPath: stop, contents: nil)
        let compactorOut = try compactor.wait(timeout: hangGuardSeconds)
        let writerOut = try writer.wait(timeout: hangGuardSeconds)
        #expect(compactorOut.status == 0 && compactorOut.stdout.contains("runs"), "\(compactorOut.stderr)")
        #expect(writerOut.status == 0, "\(writerOut.stderr)")
        print("AppProjectionProcessTests: \(polls) polls, compactor \(compactorOut.stdout.split(separator: "\n").last ?? "")")

        // The whole log as written (before any trim) and what was appended since.
        let tail = try retained(plain)
        let (info, first) = try recordAndFirst(plain)
        let record = try #require(info)
        #expect(first > 1, "the compactor trimmed nothing")
        #expect(first <= record.appliedThrough + 1)
        #expect(record.status == "ready" && record.builtFrom == 0, "\(record)")
        var expected = try model(.v1, all)
        try expected.fold(tail)
        #expect(expected.through == tail.last?.sequence)
        let app = try open(path, "app", [TaskList.self])
        expectAgrees(expected, try app.read({ try $0.projection(TaskList.self).contents() }))
        checkAcknowledged(dir.child("writer.ack"), in: tail, "writer")
    }

    // MARK: 5. Writers during a build

    /// While one process builds a large projection (80 transactions of 500 events), another
    /// process's appends go through: acknowledged while the build runs, never writerBusy (an
    /// error ends the writer). LMDB's writer lock is not fair — a waiting writer polls it — so
    /// a build committing chunk after chunk with no pause kept the writer out for the whole
    /// build (the bug this test found). Then a version-1 writer appends with it inline; the
    /// projection is dropped while both write and a registered handle reads (a drop deleted
    /// the state chunk by chunk under a record still `ready`: readers saw a half-deleted state,
    /// the second bug found here); reopened, it is built again: the model of the whole log.
    @Test(.timeLimit(.minutes(10)))
    func writersAppendWhileALargeBuildRuns() throws {
        var generator = SeededGenerator(seed: seed("writersDuringBuild"))
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let plain = try open(path, "test")
        try fill(plain, count: 40_000, tasks: 10_000, using: &generator)

        let stop = dir.child("stop")
        let ackPaths = [dir.child("extension.ack"), dir.child("host.ack")]
        let writer = try Processes.start(agent, ["task-actor", path, "extension", "0", String(generator.next() >> 1), ackPaths[0], "-1", "0", "0", stop])
        defer { writer.kill(); _ = try? writer.wait(timeout: 30) }
        #expect(line(writer, startingWith: "ready") != nil)
        _ = waitUntil { ackCount(ackPaths[0]) > 0 || !writer.process.isRunning }

        var acksAtFirstPoll: Int?
        var acksAtLastPoll = 0
        var polls = 0
        let (_, built) = try startBuild(path, version: 1, observer: plain, killWhen: { _ in false }) { info, _ in
            guard let info, info.status == "building" || info.status == "clearing" else { return }
            let acks = ackCount(ackPaths[0])
            if acksAtFirstPoll == nil { acksAtFirstPoll = acks }
            acksAtLastPoll = acks
            polls += 1
        }
        #expect(built.status == 0 && built.stdout.hasPrefix("open ready"), "\(built.stdout) \(built.stderr)")
        print("AppProjectionProcessTests: the writer's acknowledged events went from \(acksAtFirstPoll ?? -1) to \(acksAtLastPoll) over \(polls) polls of the build")
        #expect(polls > 1, "the build was not seen running")
        // At least one of the writer's events per four build transactions. Without the pause
        // between chunks, 0 to a few dozen got in (some only when the loaded machine preempted
        // the builder between two chunks); with it, hundreds to thousands, idle or loaded.
        let buildTransactions = 40_000 / ProjectionBuildPacing.chunk
        #expect(acksAtLastPoll - (acksAtFirstPoll ?? .max) >= buildTransactions / 4,
                "\(acksAtLastPoll - (acksAtFirstPoll ?? 0)) appends of the other process acknowledged while the build ran")

        // Once built, a version-1 writer keeps it inline beside the writer without it.
        let registered = try Processes.start(agent, ["task-actor", path, "host", "1", String(generator.next() >> 1), ackPaths[1], "-1", "0", "5", stop])
        defer { registered.kill(); _ = try? registered.wait(timeout: 30) }
        _ = waitUntil { ackCount(ackPaths[1]) >= 30 || !registered.process.isRunning }
        // Dropping it (an app that no longer registers it) deletes its entries in chunks too,
        // and the writer gets in between them. Then the opening below builds it again.
        let dropTransactions = try #require(try plain.projections.list().first).rows * 2 / ProjectionBuildPacing.chunk
        // A registered handle reads all along: a whole state (its rows, record and document
        // agree) or a refusal once the record is gone, never a half-dropped state.
        let widget = try open(path, "widget", [TaskList.self], readOnly: true)
        let reads = DropReads()
        let readerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            while !reads.stopped {
                do throws(LedgerError) {
                    // What a widget shows: the first rows and the counts (a short read, many of them).
                    let state = try widget.read({ try $0.projection(TaskList.self).contents(limit: 3) })
                    reads.record(state.document.open + state.document.done == state.rowCount && state.rows.count == min(3, state.rowCount)
                                 ? nil : "rowCount \(state.rowCount), \(state.rows.count) rows, document \(state.document)")
                } catch {
                    switch error {
                    case .projectionUnavailable, .projectionBuilding:
                        reads.record(error, refused: true)
                    default:
                        reads.record(error, refused: false)
                    }
                }
            }
            readerDone.signal()
        }
        _ = waitUntil { reads.count > 0 }
        let acksBeforeDrop = ackCount(ackPaths[0])
        try plain.projections.drop(named: TaskList.name)
        let acksDuringDrop = ackCount(ackPaths[0]) - acksBeforeDrop
        _ = waitUntil { reads.refusedCount > 0 }
        reads.stop()
        readerDone.wait()
        print("AppProjectionProcessTests: reads during the drop: \(reads.count - reads.refusedCount) whole, \(reads.refusedCount) refused")
        #expect(reads.violations.isEmpty, "\(reads.violations.prefix(3))")
        print("AppProjectionProcessTests: \(acksDuringDrop) of the writer's events acknowledged during a drop of \(dropTransactions) transactions")
        #expect(acksDuringDrop >= max(1, dropTransactions / 4), "\(acksDuringDrop) appends of the other process acknowledged while the drop ran")
        #expect(try plain.projections.list().isEmpty)
        _ = FileManager.default.createFile(atPath: stop, contents: nil)
        for p in [writer, registered] {
            let out = try p.wait(timeout: hangGuardSeconds)
            #expect(out.status == 0 && out.stdout.contains("appended") && out.stderr.isEmpty, "\(out.stderr)")
            // The registered writer's reads: the model's state until the drop, refused after it
            // (no record), never a half-dropped state (a mismatch ends it with an error).
            let lines = out.stdout.split(separator: "\n").filter { $0.hasPrefix("checked") || $0.hasPrefix("refused ") }
            let firstRefusal = lines.firstIndex { $0.hasPrefix("refused ") } ?? lines.endIndex
            // (While the drop runs its record says `clearing`: "being built"; once it is gone: "not stored".)
            #expect(lines[firstRefusal...].allSatisfy { $0.hasPrefix("refused ") && ($0.contains("not stored") || $0.contains("being built")) },
                    "\(lines[firstRefusal...].prefix(3))")
        }
        let events = try retained(plain)
        for ack in ackPaths { checkAcknowledged(ack, in: events, ack) }
        let app = try open(path, "app", [TaskList.self])
        expectAgrees(try model(.v1, events), try app.read({ try $0.projection(TaskList.self).contents() }))
        let info = try #require(try app.projections.list().first)
        #expect(info.status == "ready" && info.builtFrom == 0)
    }
}

/// What a reader thread saw while a projection was dropped.
final class DropReads: @unchecked Sendable {
    // @unchecked: every field is only touched under `lock`.
    private let lock = NSLock()
    private var reads = 0
    private var refused = 0
    private var problems: [String] = []
    private var done = false

    var count: Int { lock.withLock { reads } }
    var refusedCount: Int { lock.withLock { refused } }
    var violations: [String] { lock.withLock { problems } }
    var stopped: Bool { lock.withLock { done } }
    func stop() { lock.withLock { done = true } }

    /// A read that returned a state: nil when it was whole, else what was wrong.
    func record(_ problem: String?) {
        lock.withLock {
            reads += 1
            if let problem { problems.append(problem) }
        }
    }

    /// A read that threw: a refusal (projectionUnavailable) or a problem.
    func record(_ error: LedgerError, refused isRefusal: Bool) {
        lock.withLock {
            reads += 1
            if isRefusal { refused += 1 } else { problems.append("\(error)") }
        }
    }
}
