import ArgumentParser
import Foundation
import InboxLedger

/// The inbox scenario, played by real processes: this binary re-executes itself as each role.
struct Simulate: AsyncParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the inbox scenario across real processes, then verify the ledger.",
        discussion: """
            Spawns: the host app syncing the inbox from a generated server feed, widgets reading
            the list and recording actions, a notification extension recording pushes, the host
            app's consumer completing every action exactly once, and a compaction worker. Runs for
            --duration seconds or until --events events were appended, shows progress each second,
            then stops the writers, lets the host finish its queue, and prints a summary and the
            verify result. Exits 0 when the ledger is healthy and every action was completed.

            Example:
              ledger simulate /tmp/inbox --duration 10 --seed 42
            """
    )

    @OptionGroup var location: LedgerLocation

    @Option(help: "Seconds to run.")
    var duration: Double = 10

    @Option(help: "Stop earlier once the head reaches this many events.")
    var events: Int?

    @Option(help: "Seed of the generated feed and actions (repeatable runs).")
    var seed: UInt64 = 1

    @Option(help: "Widget processes.")
    var widgets = 2

    func validate() throws {
        guard duration > 0, widgets >= 0, (events ?? 1) > 0 else {
            throw ValidationError("--duration and --events must be positive, --widgets not negative")
        }
        guard !location.readOnly else { throw ValidationError("simulate writes: drop --read-only") }
    }

    func run() async throws {
        let ledger = try openLedger(location, role: "simulate", writes: true, create: true)
        do { _ = try await ledger.consumers.consumer(named: "host-app") } catch { throw fail(error) }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let me = FileManager.default.isExecutableFile(atPath: executable) ? executable : CommandLine.arguments[0]
        func spawn(_ role: SimulationRole, _ extra: [String] = []) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: me)
            p.arguments = ["_role", role.rawValue, location.path, "--seed", String(seed)] + extra
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            return p
        }
        let startHead = (try? await ledger.read({ try $0.head() })) ?? 0
        var writers = [try spawn(.app), try spawn(.notificationService)]
        for w in 0..<widgets { writers.append(try spawn(.widget, ["--name", "widget-\(w + 1)"])) }
        let host = try spawn(.host)
        let compactor = try spawn(.compactor)
        /// A progress line; when stdout cannot be written, the role processes are stopped first.
        func progress(_ line: String) throws {
            do { try emit(line) } catch {
                for p in writers + [host, compactor] { p.terminate() }
                for p in writers + [host, compactor] { p.waitUntilExit() }
                throw error
            }
        }
        try progress("Simulating on \(location.path): app, \(widgets) widgets, notification service, host consumer, compactor")
        try progress("   time      head   events/s  pending  badge  unread")

        let started = Date()
        var lastHead = startHead
        var lastTime = started
        while true {
            try await Task.sleep(for: .seconds(1))
            let head = (try? await ledger.read({ try $0.head() })) ?? lastHead
            let now = Date()
            let list = try? await ledger.read({ try $0.widgetList(limit: 0) })
            let rate = Double(head - lastHead) / now.timeIntervalSince(lastTime)
            try progress(String(format: "%6.1f s %9llu %10.0f %8d %6d %7d", now.timeIntervalSince(started), head, rate,
                        list?.pendingActions ?? 0, list?.badge ?? 0, list?.unreadCount ?? 0))
            lastHead = head
            lastTime = now
            let writerDied = writers.contains { !$0.isRunning }
            if now.timeIntervalSince(started) >= duration || (events.map { head - startHead >= UInt64($0) } ?? false) || writerDied { break }
        }
        for p in writers { p.terminate() }
        for p in writers { p.waitUntilExit() }
        compactor.terminate()
        compactor.waitUntilExit()
        // Let the host finish every queued action, then stop it.
        do { try ledger.append(NewEvent(type: "simulate.end", payload: Array("{}".utf8))) } catch { throw fail(error) }
        let deadline = Date().addingTimeInterval(60)
        while host.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        if host.isRunning { host.terminate() }

        let failedRoles = writers.filter { $0.terminationReason == .exit && $0.terminationStatus != 0 }
        let stats: LedgerStatistics
        let report: VerificationReport
        let pending: Int
        do {
            stats = try ledger.maintenance.statistics()
            report = try ledger.maintenance.verify()
            pending = try await ledger.read({ try $0.pendingActions(limit: 1_000_000) }).count
        } catch {
            throw fail(error)
        }
        var lines = ["", "Summary"]
        lines.append("  \(stats.headSequence - startHead) events appended in \(String(format: "%.1f", Date().timeIntervalSince(started))) s; log now \(stats.firstSequence)–\(stats.headSequence) (\(stats.eventCount) retained)")
        lines.append("  retained by origin: " + stats.countsByOrigin.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: " · "))
        lines.append("  pending actions after the host drained its queue: \(pending)")
        if let c = stats.lastCompaction { lines.append("  last compaction trimmed \(c.eventsTrimmed) events through \(c.trimmedThrough)") }
        if !failedRoles.isEmpty { lines.append("  \(failedRoles.count) role process(es) failed") }
        lines.append(report.isHealthy ? "  verify: OK (\(report.eventsChecked) records, projections equal a rebuild)" : "  verify: DAMAGED")
        for f in report.findings { lines.append("    problem: \(f)") }
        try emit(lines.joined(separator: "\n"))
        if !report.isHealthy || pending > 0 || !failedRoles.isEmpty || host.terminationStatus != 0 { throw ExitCode(ExitStatus.problems) }
    }
}

/// The processes of the simulation: a closed set.
enum SimulationRole: String, CaseIterable, ExpressibleByArgument {
    case app
    case widget
    case notificationService = "notification-service"
    case host
    case compactor

    /// The origin role its events carry (the host app's consumer appends as the app).
    var origin: String { self == .host ? SimulationRole.app.rawValue : rawValue }
}

/// One role of the simulation, run by `ledger simulate` in its own process (not for humans).
struct SimulateRole: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_role", shouldDisplay: false)

    @Argument var role: SimulationRole
    @Argument var path: String
    @Option var seed: UInt64 = 1
    @Option var name = "widget"
    @Option(help: "Events to append (0: until stopped).")
    var count = 0
    @Option(help: "Host only: pause between reading a batch and committing it (a window for crash tests).")
    var pauseMicros: UInt32 = 0

    func run() async throws {
        var rng = SimulationRandom(seed: (role.rawValue + name).utf8.reduce(seed) { $0 &* 31 &+ UInt64($1) })
        var options = LedgerOptions(role: role.origin)
        options.durability = role == .compactor ? .singleSync : .durable
        let ledger: Ledger
        do { ledger = try Ledger(path: path, options: options) } catch { throw fail(error) }
        do {
            switch role {
            case .app: try app(ledger, &rng)
            case .widget: try widget(ledger, &rng)
            case .notificationService: try notification(ledger, &rng)
            case .host: try await hostConsumer(ledger)
            case .compactor:
                var policy = CompactionPolicy()
                policy.triggerEvents = 2_000
                policy.retainedTail = 500
                try await Compactor(ledger: ledger, policy: policy).run(checkEvery: .seconds(1))
            }
        } catch let error as LedgerError {
            throw fail(error)
        }
    }

    func forever(_ body: (Int) throws -> Void) rethrows {
        var i = 0
        while count == 0 || i < count {
            try body(i)
            i += 1
        }
    }

    /// The server feed: 40 messages whose titles and read flags change; every 20th sync is full.
    func app(_ ledger: Ledger, _ rng: inout SimulationRandom) throws {
        let base: Int64 = 1_790_000_000_000_000
        try forever { i in
            var messages: [String: InboxMessage] = [:]
            for _ in 0..<rng.int(1...5) {
                let n = rng.int(0...39)
                messages["msg-\(n)"] = InboxMessage(
                    id: "msg-\(n)", title: ["Your order shipped", "Weekly digest", "New comment on your post", "Reminder: dentist at 3pm"][n % 4] + " #\(n)",
                    subheading: "From the server, revision \(i)", iconURL: "https://cdn.example.com/icons/\(n % 7).png",
                    sentAt: Timestamp(micros: base + Int64(n) * 60_000_000), read: rng.int(0...3) == 0 ? true : nil)
            }
            let sync = InboxSync(mode: i % 20 == 19 ? .full : .delta, messages: messages.values.sorted { $0.id < $1.id })
            try ledger.append(.inboxSynced(sync), key: "sync-\(rng.seed)-\(i)")
            usleep(UInt32(rng.int(2_000...8_000)))
        }
    }

    /// A widget: reads what it would show, taps rows (mark read, open) and tasks.
    func widget(_ ledger: Ledger, _ rng: inout SimulationRandom) throws {
        try forever { i in
            let list = try ledger.read({ try $0.widgetList(limit: 8) })
            let target = list.items.isEmpty ? "msg-0" : list.items[rng.int(0...(list.items.count - 1))].id
            let kind: WidgetAction.Kind = [.markRead, .openMessage, .markTaskDone][rng.int(0...2)]
            try ledger.append(.widgetAction(WidgetAction(
                actionID: "\(name)-\(rng.seed)-\(i)", kind: kind, target: kind == .markTaskDone ? "task-\(i % 12)" : target)))
            if rng.int(0...4) == 0 { try ledger.append(.messageRead(ReadChange(ids: [target], read: rng.int(0...1) == 0))) }
            usleep(UInt32(rng.int(5_000...20_000)))
        }
    }

    /// The notification service extension: a push announces a message of the feed (half of
    /// them carry it), counted once in the badge until a sync brings it; sometimes the user
    /// clears the badge.
    func notification(_ ledger: Ledger, _ rng: inout SimulationRandom) throws {
        let base: Int64 = 1_790_000_000_000_000
        try forever { i in
            if i % 30 == 29 {
                try ledger.append(.badgeAdjusted(.set(0)), key: "clear-\(rng.seed)-\(i)")
            } else {
                let n = rng.int(0...39)
                let message = rng.int(0...1) == 0 ? nil : InboxMessage(
                    id: "msg-\(n)", title: "Pushed #\(n)", sentAt: Timestamp(micros: base + Int64(n) * 60_000_000))
                try ledger.append(.pushReceived(PushReceived(messageID: "msg-\(n)", message: message)), key: "push-\(rng.seed)-\(i)")
            }
            usleep(UInt32(rng.int(10_000...40_000)))
        }
    }

    /// The host app's consumer: completes each widget action exactly once, atomically with its
    /// cursor; exits after the `simulate.end` marker.
    func hostConsumer(_ ledger: Ledger) async throws {
        let host = try await ledger.consumers.consumer(named: "host-app")
        while true {
            let batch: ConsumerBatch
            do { batch = try await host.next(limit: 100) } catch {
                guard isGap(error) else { throw error }
                try host.rebase()
                continue
            }
            if batch.events.isEmpty {
                _ = try await ledger.waitForChange(after: batch.after)
                continue
            }
            var completions: [NewEvent] = []
            var finished = false
            for event in batch.events {
                if event.type == DomainEvent.widgetActionType, case .widgetAction(let a) = try DomainEvent.decode(type: event.type, payload: event.payload) {
                    completions.append(try DomainEvent.actionCompleted(ActionCompletion(actionID: a.actionID, outcome: .done)).newEvent())
                }
                if event.type == "simulate.end" { finished = true }
            }
            if pauseMicros > 0 { usleep(pauseMicros) }
            try await host.commit(batch, appending: completions)
            if finished { return }
        }
    }
}

/// Whether `error` says the consumer fell behind a trim (it then rebases).
private func isGap(_ error: any Error) -> Bool {
    if case .consumerGap? = error as? LedgerError { return true }
    return false
}

/// SplitMix64: a small generator so `--seed` makes runs repeatable.
struct SimulationRandom: RandomNumberGenerator {
    let seed: UInt64
    private var state: UInt64

    init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
}
