// ledger-torture: rounds of real processes (writers, widget readers, the action consumer, the
// compactor) SIGKILLed at random instants and restarted, with acknowledged-write accounting.
//
//   ledger-torture [--rounds N] [--round-seconds S] [--seed N] [--json] [--directory PATH]
//
// After every round: `verify` passes, every acknowledged event is in the log exactly once at
// its acknowledged sequence, no batch is partly visible, the projections equal an independent
// model folded from the log, every action was completed at most once, and no process hung.
// Exit status 0 when all of that held in every round, 1 otherwise. See docs/reliability.md.
import ArgumentParser
import Foundation
import InboxLedger
import TestSupport

enum Torture {
    /// Children open with this initial map, so that each generation's ledger grows while
    /// processes write (and are killed while growing).
    static let initialMapSize = 256 << 10
    /// Rounds sharing one ledger; then a fresh one (small map again).
    static let roundsPerGeneration = 10
    /// How long a child may take to stop after being asked before it counts as hung.
    static let stopDeadline = 30.0
}

/// The options (the `_child` roles are this executable's own child processes, not options).
struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-torture",
        abstract: "Rounds of real processes SIGKILLed at random instants and restarted, with acknowledged-write accounting.",
        discussion: "Exit status 0 when nothing was lost, duplicated or partly visible and no process hung, 1 otherwise, "
            + "2 on a bad argument. See docs/reliability.md.")

    @Option(help: ArgumentHelp("Rounds to run.", valueName: "n"))
    var rounds = 20
    @Option(help: ArgumentHelp("Seconds of each round (0.2…3600).", valueName: "s"))
    var roundSeconds = 2.0
    @Option(help: ArgumentHelp("Seed of the round mixes and kill instants (a run is repeatable by its seed).", valueName: "n"))
    var seed: UInt64 = 1
    @Flag(help: "Progress on stderr and the summary as one JSON object on stdout.")
    var json = false
    @Option(help: ArgumentHelp("Where the ledgers and the reports of failures go (default: a new one under $TMPDIR, removed after).",
                               valueName: "path"))
    var directory: String?
    /// Anything else, reported as "unknown argument" (as scripts and tests expect).
    @Argument(parsing: .allUnrecognized, help: .hidden)
    var unrecognized: [String] = []

    func validate() throws {
        if let first = unrecognized.first { throw ValidationError("unknown argument \(first)") }
        guard rounds > 0 else { throw ValidationError("--rounds needs a positive number") }
        guard roundSeconds >= 0.2, roundSeconds <= 3600 else { throw ValidationError("--round-seconds needs 0.2…3600") }
    }
}

/// The run's totals; `--json` prints them.
struct Summary: Codable {
    var rounds = 0
    var processesKilled = 0
    var processesRestarted = 0
    /// Processes SIGSTOPped for a while, then continued.
    var processesStopped = 0
    var eventsAcknowledged = 0
    var eventsAudited = 0
    var eventsLost = 0
    var eventsDuplicated = 0
    var partialBatches = 0
    var verifyFailures = 0
    var hangs = 0
    var eventsTrimmed = 0
    var seconds = 0.0

    var clean: Bool { eventsLost == 0 && eventsDuplicated == 0 && partialBatches == 0 && verifyFailures == 0 && hangs == 0 }
}

/// One child process of a round, restartable with the same arguments.
final class Member {
    let role: String
    let arguments: [String]
    var process: RunningProcess
    var killedByUs = false

    init(role: String, arguments: [String]) throws {
        self.role = role
        self.arguments = arguments
        process = try Processes.start(executable, ["_child", role] + arguments)
    }

    func restart() throws {
        process = try Processes.start(executable, ["_child", role] + arguments)
        killedByUs = false
    }
}

/// This executable: the children are it, in a child role.
let executable = Processes.product("ledger-torture")

/// Every thread's stack of process `pid` (gdb, when installed), for the report of a hang.
func threadStacks(of pid: Int32) -> String {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb"),
          let out = try? Processes.run("/usr/bin/gdb", ["-p", String(pid), "-batch", "-ex", "thread apply all bt"], timeout: 60)
    else { return "(no gdb: install it to see where a hung process waits)" }
    return out.stdout + out.stderr
}

/// Progress and summary: stdout, or stderr when stdout carries the JSON summary.
func say(_ text: String, json: Bool) {
    (json ? FileHandle.standardError : FileHandle.standardOutput).write(Data((text + "\n").utf8))
}

func runTorture(_ options: Options) throws -> Summary {
    let root = options.directory ?? NSTemporaryDirectory() + "ledger-torture-\(getpid())"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { if options.directory == nil { try? FileManager.default.removeItem(atPath: root) } }
    var rng = SeededGenerator(seed: options.seed)
    var summary = Summary()
    let started = Date()
    var auditor: Auditor?

    for round in 1...options.rounds {
        let generation = (round - 1) / Torture.roundsPerGeneration
        let directory = "\(root)/gen-\(generation)/ledger"
        let logs = "\(root)/gen-\(generation)/logs"
        if auditor == nil || auditor?.generation != generation {
            if generation > 0 { try? FileManager.default.removeItem(atPath: "\(root)/gen-\(generation - 1)") }
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
            auditor = try Auditor(directory: directory, logs: logs, generation: generation)
        }
        guard let audit = auditor else { break }
        let stopFile = "\(root)/stop-\(round)"

        // The mix of this round.
        var members: [Member] = []
        let durabilities: [String] = ["durable", "single-sync", "none"]
        for w in 0..<Int.random(in: 1...3, using: &rng) {
            let role = ["app", "widget", "notification-service"][w % 3]
            members.append(try Member(role: "writer", arguments: [
                directory, "w\(w)", role, String(Int.random(in: 1...3, using: &rng)), String(options.seed), String(generation),
                durabilities[Int.random(in: 0..<3, using: &rng)], logs, stopFile,
            ]))
        }
        for _ in 0..<Int.random(in: 1...2, using: &rng) { members.append(try Member(role: "reader", arguments: [directory, stopFile])) }
        members.append(try Member(role: "consumer", arguments: [directory, stopFile]))
        if Double.random(in: 0..<1, using: &rng) < 0.8 { members.append(try Member(role: "compactor", arguments: [directory, stopFile])) }

        // Kills at random instants; most victims come back.
        let kills = (0..<Int.random(in: 1...4, using: &rng)).map { _ in Double.random(in: 0.05..<(options.roundSeconds * 0.9), using: &rng) }.sorted()
        var elapsed = 0.0
        var killedThisRound = 0
        for at in kills {
            Thread.sleep(forTimeInterval: max(0, at - elapsed))
            elapsed = at
            let victim = members[Int.random(in: 0..<members.count, using: &rng)]
            if !victim.killedByUs, Double.random(in: 0..<1, using: &rng) < 0.35 {
                // Stopped (as iOS suspends a process), perhaps inside its write, then continued:
                // the others must not hang on it (their writes time out and are sent again).
                let pause = Double.random(in: 0.1...1.5, using: &rng)
                kill(victim.process.pid, SIGSTOP)
                Thread.sleep(forTimeInterval: pause)
                kill(victim.process.pid, SIGCONT)
                elapsed += pause
                summary.processesStopped += 1
                continue
            }
            victim.process.kill()
            _ = try? victim.process.wait(timeout: 10)
            victim.killedByUs = true
            killedThisRound += 1
            if Double.random(in: 0..<1, using: &rng) < 0.7 {
                try victim.restart()
                summary.processesRestarted += 1
            }
        }
        Thread.sleep(forTimeInterval: max(0, options.roundSeconds - elapsed))

        // Stop: every live child must exit by itself within the deadline.
        _ = FileManager.default.createFile(atPath: stopFile, contents: nil)
        var problems: [String] = []
        let live = members.filter { !$0.killedByUs }
        func saveStacks(_ label: String) -> String {
            let running = live.filter { $0.process.process.isRunning }
            // Which process holds LMDB's writer lock is not visible from a waiter's stack: list
            // every process's state too (D = waiting for I/O, Z = exiting).
            let states = (try? Processes.run("/bin/ps", ["-eo", "pid,stat,wchan:32,etime,args"], timeout: 30).stdout) ?? ""
            let stacks = running.map { "== \($0.role) \($0.process.pid)\n" + threadStacks(of: $0.process.pid) }.joined(separator: "\n")
                + "\n== ps\n" + states
            let file = "\(root)/\(label)-round-\(round).txt"
            _ = FileManager.default.createFile(atPath: file, contents: Data(stacks.utf8))
            return file
        }
        // A stop that takes more than 5 s is worth a look even when it ends in time.
        if !live.allSatisfy({ $0.process.exits(within: 5) }) {
            say("  slow stop: stacks in \(saveStacks("slow-stop"))", json: options.json)
        }
        for member in live {
            guard member.process.exits(within: Torture.stopDeadline - 5) else {
                summary.hangs += 1
                problems.append("\(member.role) \(member.process.pid) hung: stacks in \(saveStacks("hang"))")
                member.process.kill()
                _ = try? member.process.wait(timeout: 10)
                continue
            }
            guard let out = try? member.process.wait(timeout: 10) else { continue }
            if out.status != 0 || out.signalled {
                let file = "\(root)/failure-round-\(round)-\(member.role)-\(member.process.pid).txt"
                _ = FileManager.default.createFile(atPath: file, contents: Data(out.stderr.utf8))
                problems.append("\(member.role) exited with \(out.status)\(out.signalled ? " (signal)" : ""): "
                    + "\(out.stderr.split(separator: "\n").first ?? "") — stderr in \(file)")
            }
        }
        try? FileManager.default.removeItem(atPath: stopFile)
        summary.processesKilled += killedThisRound

        // Audit.
        let result = try audit.check()
        summary.rounds = round
        summary.eventsAcknowledged += result.acknowledged
        summary.eventsAudited += result.audited
        summary.eventsLost += result.lost
        summary.eventsDuplicated += result.duplicated
        summary.partialBatches += result.partial
        summary.eventsTrimmed += result.trimmed
        problems += result.problems
        if !result.problems.isEmpty || problems.contains(where: { $0.contains("exited") }) { summary.verifyFailures += 1 }
        let line = "round \(round)/\(options.rounds): \(members.count) processes, \(killedThisRound) killed; "
            + "\(result.acknowledged) acknowledged, \(result.audited) audited (log \(result.first)…\(result.head)); "
            + "lost \(result.lost), duplicated \(result.duplicated), partial \(result.partial)"
            + (problems.isEmpty ? ", verify ok" : "")
        say(line, json: options.json)
        for problem in problems { say("  PROBLEM: \(problem)", json: options.json) }
    }
    summary.seconds = Date().timeIntervalSince(started)
    return summary
}

// MARK: - Entry

let arguments = CommandLine.arguments.dropFirst()
do {
    if arguments.first == "_child" {
        let a = Array(arguments.dropFirst())
        func arg(_ i: Int) throws -> String {
            guard i < a.count else { throw TortureFailure("child: missing argument \(i)") }
            return a[i]
        }
        switch try arg(0) {
        case "writer":  // directory name role threads seed generation durability logs stopFile
            guard let threads = Int(try arg(4)), let seed = UInt64(try arg(5)), let generation = Int(try arg(6)) else {
                throw TortureFailure("writer: bad arguments")
            }
            let durability: LedgerDurability = switch try arg(7) { case "none": .none; case "single-sync": .singleSync; default: .durable }
            try runWriter(directory: try arg(1), name: try arg(2), role: try arg(3), threads: threads, seed: seed,
                          generation: generation, durability: durability, logDirectory: try arg(8), stopFile: try arg(9))
        case "reader": try runReader(directory: try arg(1), stopFile: try arg(2))
        case "consumer": try runConsumer(directory: try arg(1), stopFile: try arg(2))
        case "compactor": try runCompactor(directory: try arg(1), stopFile: try arg(2))
        default: throw TortureFailure("unknown child role \(a.first ?? "")")
        }
        exit(0)
    }
    let options: Options
    do { options = try Options.parse(Array(arguments)) } catch {
        // --help: ArgumentParser's help and status 0; a usage error: its message and status 2.
        if Options.exitCode(for: error) == .success { Options.exit(withError: error) }
        FileHandle.standardError.write(Data((Options.fullMessage(for: error) + "\n").utf8))
        exit(2)
    }
    let summary = try runTorture(options)
    let text = """
        \(summary.rounds) rounds in \(Int(summary.seconds)) s: \(summary.processesKilled) processes killed (\(summary.processesRestarted) restarted), \(summary.processesStopped) stopped and continued, \
        \(summary.eventsAcknowledged) events acknowledged, \(summary.eventsAudited) audited, \(summary.eventsTrimmed) trimmed by compaction
        lost \(summary.eventsLost), duplicated \(summary.eventsDuplicated), partial batches \(summary.partialBatches), \
        verify failures \(summary.verifyFailures), hangs \(summary.hangs)
        """
    say(text, json: options.json)
    if options.json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        FileHandle.standardOutput.write(try encoder.encode(summary) + Data("\n".utf8))
    }
    exit(summary.clean ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("ledger-torture: \(error)\n".utf8))
    exit(2)
}
