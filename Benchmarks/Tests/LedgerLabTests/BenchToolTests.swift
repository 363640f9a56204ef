import Foundation
import Testing
import TestSupport

/// `ledger-bench --quick`: proves the comparison tool runs every workload for every system and
/// writes what docs/benchmarks.md says. It checks no speed (CI machines vary; speeds are
/// measured by the tool, not asserted by tests).
@Suite struct BenchToolTests {
    @Test func quickRunMeasuresEveryWorkloadForEverySystem() async throws {
        let dir = TemporaryDirectory()
        let svg = dir.child("chart.svg")
        let out = try await offThePool {
            try Processes.run(Processes.product("ledger-bench"),
                              ["--quick", "--json", "--svg", svg, "--directory", dir.child("scratch")], timeout: 600)
        }
        #expect(out.status == 0, "\(out.stderr)")
        let rows = try out.stdout.split(separator: "\n").map { try jsonObject(String($0)) }
        var seen: [String: Set<String>] = [:]
        for row in rows {
            let workload = try #require(row["workload"] as? String)
            let system = try #require(row["system"] as? String)
            seen[workload, default: []].insert(system)
            #expect((row["repetitions"] as? Int ?? 0) >= 1)
            let numbers = ["opsPerSecond", "p50Micros", "p99Micros", "peakRSSBytes", "cpuPercent", "seconds", "writtenBytesPerOp"].compactMap { row[$0] as? Double }
            #expect(!numbers.isEmpty, "\(workload) \(system) measured nothing")
            #expect(numbers.allSatisfy { $0.isFinite && $0 >= 0 }, "\(row)")
            let allowed: Set<String> = ["workload", "system", "opsPerSecond", "p50Micros", "p99Micros", "peakRSSBytes", "cpuPercent", "seconds", "writtenBytesPerOp", "repetitions"]
            #expect(Set(row.keys).isSubset(of: allowed), "\(row.keys)")
        }
        let writers: Set<String> = ["ledger", "ledger-json", "lmdb-same-job", "lmdb", "sqlite-full", "sqlite-normal", "rewrite"]
        #expect(seen["W1"] == writers)
        #expect(seen["W2-1"] == writers.union(["ledger-single-sync"]))
        #expect(seen["W2-8"] == writers.union(["ledger-single-sync"]))
        #expect(seen["W2-64"] == ["ledger", "ledger-async"])
        #expect(seen["W3"] == writers)
        #expect(seen["W4"] == ["ledger", "lmdb", "sqlite-full", "rewrite"])
        #expect(seen["W5"] == ["ledger", "lmdb", "sqlite-full", "rewrite"])
        #expect(seen["W6"] == ["ledger", "lmdb", "sqlite-full"])
        #expect(seen["W7"] == ["ledger", "lmdb", "sqlite-full"])
        #expect(seen["W8"] == ["ledger"])
        // Tables and the target lines go to stderr with --json; the chart is an SVG.
        #expect(out.stderr.contains("W8  change notification"))
        #expect(out.stderr.contains("Targets (this run):"))
        let chart = try String(contentsOfFile: svg, encoding: .utf8)
        #expect(chart.hasPrefix("<svg") && chart.contains("sqlite-full"))
    }

    @Test func rejectsUnknownArgumentsAndWorkloads() throws {
        let unknown = try Processes.run(Processes.product("ledger-bench"), ["--fast"])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("unknown argument --fast"))
        let none = try Processes.run(Processes.product("ledger-bench"), ["--workloads", "W99"])
        #expect(none.status == 1)
        #expect(none.stderr.contains("no workload matches"))
    }
}
