// ledger-bench: the ledger side by side with raw LMDB, SQLite (WAL, FULL and NORMAL) and the
// whole-file rewrite, eight workloads, interleaved, in one run; and W9, an app's own projection
// against the same appends without it and against folding the log at launch.
//
//   swift run -c release ledger-bench [--quick] [--json] [--repetitions N] [--workloads W1,W4]
//                                     [--systems ledger,sqlite-full] [--svg PATH] [--directory PATH]
//
// Tables go to stdout (with --json: one JSON object per measurement per line on stdout, tables
// on stderr). In Benchmarks (the laboratory's package); `make compare` from the root.
// `--help` lists the options. See docs/benchmarks.md.
import ArgumentParser
import Foundation
import InboxLedger
import LedgerBenchSupport

/// The options (the `_child` modes are this executable's own child processes, not options).
struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-bench",
        abstract: "The ledger side by side with raw LMDB, SQLite (WAL, FULL and NORMAL) and the whole-file rewrite, eight workloads, interleaved; W9: an app projection.",
        discussion: "Tables go to stdout (with --json: one JSON object per measurement per line on stdout, tables on stderr). "
            + "Exit status 1 on a bad argument or a failed run. See docs/benchmarks.md.")

    @Flag(help: "Every workload briefly (CI: proves the tool works, checks no speed).")
    var quick = false
    @Flag(help: "One JSON object per measurement per line on stdout (tables on stderr).")
    var json = false
    @Option(help: ArgumentHelp("Repetitions of each workload (default 3; --quick 1).", valueName: "n"))
    var repetitions: Int?
    @Option(help: ArgumentHelp("Only these, comma-separated (W1 W2-1 W2-8 W2-64 W3 W4 W5 W6 W7 W8 W9-1 W9-B W9-R W9-C W9-O W9-U W9-L W10-0 W10-P; a prefix like W2 selects all its parts).",
                               valueName: "list"),
            transform: { Set($0.split(separator: ",").map { $0.uppercased() }) })
    var workloads: Set<String>?
    @Option(help: ArgumentHelp("Only these systems, comma-separated (ledger ledger-json ledger-single-sync ledger-async lmdb-same-job lmdb "
                                   + "sqlite-full sqlite-normal rewrite; W9: ledger+projection projection-row projection-top10 ledger-fold-log), e.g. to profile one.", valueName: "list"),
            transform: { Set($0.split(separator: ",").map(String.init)) })
    var systems: Set<String>?
    @Option(help: ArgumentHelp("Write a chart of the speeds relative to the ledger.", valueName: "path"))
    var svg: String?
    @Option(help: ArgumentHelp("Scratch directory (default: a new one under $TMPDIR, removed after).", valueName: "path"))
    var directory: String?
    /// Anything else, reported as "unknown argument" (as scripts and tests expect).
    @Argument(parsing: .allUnrecognized, help: .hidden)
    var unrecognized: [String] = []

    func validate() throws {
        if let first = unrecognized.first { throw ValidationError("unknown argument \(first)") }
        if let repetitions, repetitions <= 0 { throw ValidationError("--repetitions needs a positive number") }
        let unknown = (systems ?? []).filter { SystemKind(rawValue: $0) == nil }.sorted()
        guard unknown.isEmpty else { throw ValidationError("unknown system \(unknown.joined(separator: ", "))") }
    }

    func selects(_ id: String) -> Bool {
        guard let workloads else { return true }
        return workloads.contains { id == $0 || id.hasPrefix($0 + "-") }
    }
}

/// Human-readable output: stdout, or stderr when stdout carries JSON.
func say(_ text: String, json: Bool) {
    if json {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    } else {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
}

func run(_ options: Options) throws {
    var sizes = options.quick ? Sizes.quick : Sizes()
    if let repetitions = options.repetitions { sizes.repetitions = repetitions }
    let root = options.directory ?? NSTemporaryDirectory() + "ledger-bench-\(getpid())"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { if options.directory == nil { try? FileManager.default.removeItem(atPath: root) } }

    let bench = Bench(root: root, sizes: sizes)
    let selected = bench.workloads.filter { options.selects($0.id) }
    guard !selected.isEmpty else { throw BenchFailure("no workload matches \(options.workloads ?? [])") }
    say("ledger-bench: \(options.quick ? "quick" : "full") run, \(sizes.repetitions) repetition(s), LMDB \(lmdbVersion()), SQLite \(sqliteVersion()), scratch \(root)\n", json: options.json)

    var all: [Measurement] = []
    for var workload in selected {
        if let systems = options.systems { workload.systems = workload.systems.filter { systems.contains($0.rawValue) } }
        guard !workload.systems.isEmpty else { continue }
        for system in workload.systems { try workload.prepare?(system, bench) }
        var observations: [SystemKind: [Observation]] = [:]
        for rep in 0..<min(sizes.repetitions, workload.maxRepetitions ?? .max) {
            for system in workload.systems {  // interleaved: every system once per repetition
                observations[system, default: []].append(try workload.run(system, rep, bench))
            }
        }
        let rows = workload.systems.map { Measurement(workload: workload, system: $0, observations: observations[$0] ?? []) }
        all += rows
        say(table(workload, rows), json: options.json)
        if options.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            for row in rows { FileHandle.standardOutput.write(try encoder.encode(row) + Data("\n".utf8)) }
        }
    }
    say(targets(all), json: options.json)
    if let svg = options.svg {
        let title = "ledger-bench \(options.quick ? "(quick) " : "")— speed relative to the ledger (log scale; right of 1× is faster)"
        try svgChart(selected, all, title: title).write(toFile: svg, atomically: true, encoding: .utf8)
        say("chart written to \(svg)", json: options.json)
    }
}

// MARK: - Child processes (this executable, started by W3 and W8; W5 and W9-C start ledger-bench-cold)

func child(_ arguments: [String]) async throws {
    func argument(_ i: Int) throws -> String {
        guard i < arguments.count else { throw BenchFailure("child: missing argument \(i)") }
        return arguments[i]
    }
    func emit(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    switch try argument(0) {
    case "w3":  // system directory firstDelta count: append batches when told, print own p99
        guard let system = SystemKind(rawValue: try argument(1)), let first = Int(try argument(3)), let count = Int(try argument(4)) else {
            throw BenchFailure("child w3: bad arguments")
        }
        let store = try openStore(system, directory: try argument(2))
        let batches = stride(from: first, to: first + count, by: 1000).map { Inbox.deltas($0..<min($0 + 1000, first + count)) }
        emit("ready")
        guard readLine() == "go" else { throw BenchFailure("child w3: no go") }
        var latencies: [Double] = []
        for batch in batches { latencies.append(try timeMicros { try store.appendBatch(batch[...]) }) }
        emit(String(percentile(latencies, 0.99) ?? 0))
    case "w8":  // directory rounds idleSeconds: print the monotonic time of each wake-up, then idle CPU
        guard let rounds = Int(try argument(2)), let idle = Double(try argument(3)) else { throw BenchFailure("child w8: bad arguments") }
        let ledger = try Ledger(path: try argument(1), options: LedgerOptions(role: "waiter"))
        var seen = try await ledger.read({ try $0.head() })
        emit("ready")
        for _ in 0..<rounds {
            seen = try await ledger.waitForChange(after: seen)
            emit(String(monotonicNanos()))
        }
        // Idle: one task parked in waitForChange, nothing appended for `idle` seconds.
        let parked = Task { [seen] in try await ledger.waitForChange(after: seen) }
        try await Task.sleep(for: .milliseconds(50))
        let cpu0 = processCPUMicros()
        try await Task.sleep(for: .seconds(idle))
        emit(String(processCPUMicros() - cpu0))
        parked.cancel()
    default:
        throw BenchFailure("unknown child mode \(arguments.first ?? "")")
    }
}

do {
    let arguments = CommandLine.arguments.dropFirst()
    if arguments.first == "_child" {
        try await child(Array(arguments.dropFirst()))
    } else {
        let options: Options
        do { options = try Options.parse(Array(arguments)) } catch {
            // --help: ArgumentParser's help and status 0; a usage error: its message and status 1.
            if Options.exitCode(for: error) == .success { Options.exit(withError: error) }
            FileHandle.standardError.write(Data((Options.fullMessage(for: error) + "\n").utf8))
            exit(1)
        }
        try run(options)
    }
} catch {
    FileHandle.standardError.write(Data("ledger-bench: \(error)\n".utf8))
    exit(1)
}
