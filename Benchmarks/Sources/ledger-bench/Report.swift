// Aggregation over repetitions, the tables, the targets, JSON lines and the SVG chart.
import Foundation
import LedgerBenchSupport

/// One row of the output: `--json` prints one of these per line.
struct Measurement: Codable {
    var workload: String
    var system: String
    var opsPerSecond: Double?
    var p50Micros: Double?
    var p99Micros: Double?
    var peakRSSBytes: Int?
    /// W8 only: CPU of the idle waiting process, percent of one core.
    var cpuPercent: Double?
    /// W7 only: seconds the compaction took.
    var seconds: Double?
    /// W2-1 only: bytes written per commit (/proc/self/io `wchar`; 4,096 a page).
    var writtenBytesPerOp: Double?
    var repetitions: Int

    init(workload: Workload, system: SystemKind, observations: [Observation]) {
        self.workload = workload.id
        self.system = system.rawValue
        repetitions = observations.count
        opsPerSecond = median(observations.compactMap(\.opsPerSecond))
        let latencies = observations.flatMap(\.latencies)
        if workload.id == "W3" {
            p99Micros = latencies.max()  // the worst process's p99
        } else {
            p50Micros = percentile(latencies, 0.5)
            p99Micros = percentile(latencies, 0.99)
        }
        peakRSSBytes = observations.compactMap(\.peakRSSBytes).max()
        cpuPercent = median(observations.compactMap(\.cpuPercent))
        seconds = median(observations.compactMap(\.seconds))
        writtenBytesPerOp = median(observations.compactMap(\.writtenBytesPerOp))
    }

    /// How many times the ledger's speed this is: throughput over the ledger's, or for
    /// latency-only rows the ledger's p50 over this one's (above 1: faster than the ledger).
    func speed(relativeTo ledger: Measurement) -> Double? {
        if let mine = opsPerSecond, let theirs = ledger.opsPerSecond, theirs > 0 { return mine / theirs }
        if let mine = p50Micros, let theirs = ledger.p50Micros, mine > 0 { return theirs / mine }
        return nil
    }
}

func formatCount(_ value: Double) -> String {
    let formatter = NumberFormatter()
    formatter.numberStyle = .decimal
    formatter.maximumFractionDigits = 0
    return formatter.string(from: NSNumber(value: value.rounded())) ?? String(Int(value))
}

func formatMicros(_ micros: Double) -> String {
    switch micros {
    case ..<10: String(format: "%.2f µs", micros)
    case ..<1000: String(format: "%.0f µs", micros)
    case ..<10_000: String(format: "%.2f ms", micros / 1000)
    case ..<1_000_000: String(format: "%.1f ms", micros / 1000)
    default: String(format: "%.2f s", micros / 1e6)
    }
}

/// The table of one workload, in 80 columns.
func table(_ workload: Workload, _ rows: [Measurement]) -> String {
    func pad(_ s: String, _ width: Int, right: Bool = true) -> String {
        let gap = String(repeating: " ", count: max(0, width - s.count))
        return right ? gap + s : s + gap
    }
    var out = "\(workload.id)  \(workload.title)\n"
    let extra = workload.id == "W8" ? "idle CPU" : workload.id == "W7" ? "seconds" : workload.id == "W2-1" ? "pages/op" : "peak RSS"
    let versus = workload.baseline == .ledger ? "vs ledger" : "vs 1st row"
    out += pad("system", 20, right: false) + pad("ops/s", 12) + pad("p50", 11) + pad("p99", 11) + pad(extra, 11) + pad(versus, 12) + "\n"
    let ledger = rows.first { $0.system == workload.baseline.rawValue }
    for row in rows {
        var line = pad(row.system, 20, right: false)
        line += pad(row.opsPerSecond.map(formatCount) ?? "—", 12)
        line += pad(row.p50Micros.map(formatMicros) ?? "—", 11)
        line += pad(row.p99Micros.map(formatMicros) ?? "—", 11)
        if let cpu = row.cpuPercent {
            line += pad(String(format: "%.2f %%", cpu), 11)
        } else if let seconds = row.seconds {
            line += pad(String(format: "%.2f s", seconds), 11)
        } else if let written = row.writtenBytesPerOp {
            line += pad(String(format: "%.1f", written / 4096), 11)
        } else {
            line += pad(row.peakRSSBytes.map { String(format: "%.1f MiB", Double($0) / 1_048_576) } ?? "—", 11)
        }
        let speed = ledger.flatMap { row.speed(relativeTo: $0) }
        line += pad(speed.map { String(format: "%.2f×", $0) } ?? "—", 12)
        out += line + "\n"
    }
    return out
}

/// The issue's targets, checked against one run's measurements.
func targets(_ all: [Measurement]) -> String {
    func find(_ workload: String, _ system: String) -> Measurement? {
        all.first { $0.workload == workload && $0.system == system }
    }
    var lines: [String] = []
    func check(_ label: String, _ value: Double?, _ goal: String, _ met: (Double) -> Bool, _ unit: String = "×") {
        guard let value else { return }
        let shown = unit == "×" ? String(format: "%.2f×", value) : unit == "%" ? String(format: "%.2f %%", value) : formatMicros(value)
        lines.append("\(met(value) ? "met   " : "MISSED") \(label): \(shown) (target \(goal))")
    }
    func ratio(_ a: Measurement?, _ b: Measurement?) -> Double? {
        guard let x = a?.opsPerSecond, let y = b?.opsPerSecond, y > 0 else { return nil }
        return x / y
    }
    // The targets of docs/benchmarks.md ("Targets"), each from this run's rows.
    let sqliteW1 = find("W1", "sqlite-full")
    check("W1 ledger (typed) vs sqlite-full", ratio(find("W1", "ledger"), sqliteW1), "≥ 2×") { $0 >= 2 }
    check("W1 ledger (typed) vs lmdb-same-job", ratio(find("W1", "ledger"), find("W1", "lmdb-same-job")), "≥ 0.6×") { $0 >= 0.6 }
    check("W1 ledger-json vs sqlite-full", ratio(find("W1", "ledger-json"), sqliteW1), "≥ 1.5×") { $0 >= 1.5 }
    check("W2-1 ledger vs lmdb", ratio(find("W2-1", "ledger"), find("W2-1", "lmdb")), "≥ 0.9×") { $0 >= 0.9 }
    check("W2-1 ledger vs sqlite-full", ratio(find("W2-1", "ledger"), find("W2-1", "sqlite-full")), "≥ 1×") { $0 >= 1 }
    check("W2-1 ledger-single-sync vs sqlite-full", ratio(find("W2-1", "ledger-single-sync"), find("W2-1", "sqlite-full")), "≥ 1.3×") { $0 >= 1.3 }
    check("W2-8 ledger vs its 1 thread", ratio(find("W2-8", "ledger"), find("W2-1", "ledger")), "≥ 5×") { $0 >= 5 }
    check("W2-64 async tasks vs blocking threads", ratio(find("W2-64", "ledger-async"), find("W2-64", "ledger")), "≥ 0.9×") { $0 >= 0.9 }
    check("W3 ledger aggregate vs sqlite-full", ratio(find("W3", "ledger"), find("W3", "sqlite-full")), "≥ 2×") { $0 >= 2 }
    check("W4 ledger p50", find("W4", "ledger")?.p50Micros, "≤ 2 µs", { $0 <= 2 }, "µs")
    if let l = find("W4", "ledger")?.p50Micros, let s = find("W4", "sqlite-full")?.p50Micros, l > 0 {
        check("W4 ledger vs sqlite-full (p50)", s / l, "≥ 5×") { $0 >= 5 }
    }
    check("W5 ledger wall (p50)", find("W5", "ledger")?.p50Micros, "≤ 10 ms", { $0 <= 10_000 }, "µs")
    if let rss = find("W5", "ledger")?.peakRSSBytes {
        lines.append("\(rss <= 20 << 20 ? "met   " : "MISSED") W5 ledger peak RSS: \(String(format: "%.1f MiB", Double(rss) / 1_048_576)) (target ≤ 20 MiB)")
    }
    if let ops = find("W6", "ledger")?.opsPerSecond {
        lines.append("\(ops >= 2_000_000 ? "met   " : "MISSED") W6 ledger catch-up: \(formatCount(ops)) events/s (target ≥ 2,000,000)")
    }
    check("W6 ledger vs sqlite-full", ratio(find("W6", "ledger"), find("W6", "sqlite-full")), "≥ 1.5×") { $0 >= 1.5 }
    check("W7 ledger compaction", find("W7", "ledger")?.seconds.map { $0 * 1e6 }, "≤ 2 s", { $0 <= 2e6 }, "µs")
    check("W7 concurrent writer p99", find("W7", "ledger")?.p99Micros, "≤ 5 ms", { $0 <= 5_000 }, "µs")
    check("W8 wake-up p99", find("W8", "ledger")?.p99Micros, "≤ 1 ms", { $0 <= 1_000 }, "µs")
    check("W8 idle CPU", find("W8", "ledger")?.cpuPercent, "≤ 1 % of a core", { $0 <= 1 }, "%")
    // Issue 28 (W9): an app projection of one row per event.
    check("W9-1 ledger+projection vs ledger (single durable)", ratio(find("W9-1", "ledger+projection"), find("W9-1", "ledger")), "≥ 0.9×") { $0 >= 0.9 }
    check("W9-B ledger+projection vs ledger (batched)", ratio(find("W9-B", "ledger+projection"), find("W9-B", "ledger")), "≥ 0.8×") { $0 >= 0.8 }
    check("W9-R projection-row p50", find("W9-R", "projection-row")?.p50Micros, "≤ 2 µs", { $0 <= 2 }, "µs")
    check("W9-C ledger+projection wall (p50)", find("W9-C", "ledger+projection")?.p50Micros, "≤ 10 ms", { $0 <= 10_000 }, "µs")
    if let rss = find("W9-C", "ledger+projection")?.peakRSSBytes {
        lines.append("\(rss <= 20 << 20 ? "met   " : "MISSED") W9-C ledger+projection peak RSS: \(String(format: "%.1f MiB", Double(rss) / 1_048_576)) (target ≤ 20 MiB)")
    }
    // Issue 38: builds off the opening, at engine speed; bounded catch-up.
    if let ops = find("W9-U", "ledger+projection")?.opsPerSecond {
        lines.append("\(ops >= 500_000 ? "met   " : "MISSED") W9-U build: \(formatCount(ops)) events/s (target ≥ 500,000)")
    }
    check("W9-O opening with a build due vs W5 (p50)", find("W9-O", "ledger+build-due")?.p50Micros.flatMap { o in find("W5", "ledger")?.p50Micros.map { $0 / o } },
          "≥ 1× (no slower)") { $0 >= 1 }
    check("W9-L read 40,000 behind (p50)", find("W9-L", "projection-behind")?.p50Micros, "≤ 10 ms", { $0 <= 10_000 }, "µs")
    check("W9-R projection-top10 vs W4 widget read (p50)", find("W9-R", "projection-top10")?.p50Micros.flatMap { t in find("W9-R", "ledger")?.p50Micros.map { t / $0 } },
          "≤ 2×") { $0 <= 2 }
    // Issue 39: a page of the feed over 100 pending own events, rebase included.
    check("W10-P page of 1,000 over 100 pending (p50)", find("W10-P", "ledger+projection")?.p50Micros, "≤ 50 ms", { $0 <= 50_000 }, "µs")
    return lines.isEmpty ? "" : "Targets (this run):\n" + lines.joined(separator: "\n") + "\n"
}

/// A bar chart of every system's speed relative to the ledger (log scale), one group per workload.
func svgChart(_ workloads: [Workload], _ all: [Measurement], title: String) -> String {
    let colors = ["ledger": "#2b6cb0", "ledger-json": "#4299e1", "ledger-single-sync": "#63b3ed", "lmdb-same-job": "#a0aec0", "lmdb": "#718096", "sqlite-full": "#c05621",
                  "sqlite-normal": "#ed8936", "rewrite": "#9b2c2c",
                  "ledger+projection": "#2c7a7b", "projection-row": "#38b2ac", "projection-top10": "#81e6d9", "ledger-fold-log": "#805ad5"]
    let barHeight = 14.0, gap = 4.0, groupGap = 22.0, left = 190.0, width = 760.0, plot = 480.0
    // log10 scale from 1/1000× to 1000×; 1× (the ledger) in the middle.
    func x(_ ratio: Double) -> Double { left + plot / 2 + log10(max(0.001, min(1000, ratio))) / 3 * (plot / 2) }
    var body = ""
    var y = 50.0
    for workload in workloads {
        let rows = all.filter { $0.workload == workload.id }
        guard let ledger = rows.first(where: { $0.system == workload.baseline.rawValue }), rows.count > 1 else { continue }
        body += "<text x=\"8\" y=\"\(y + 10)\" font-weight=\"bold\">\(workload.id)</text>\n"
        for row in rows {
            guard let speed = row.speed(relativeTo: ledger) else { continue }
            let x0 = min(x(1), x(speed)), x1 = max(x(1), x(speed))
            body += ##"<text x="\##(left - 6)" y="\##(y + barHeight - 3)" text-anchor="end">\##(row.system)</text>"##
            body += ##"<rect x="\##(x0)" y="\##(y)" width="\##(max(1, x1 - x0))" height="\##(barHeight)" fill="\##(colors[row.system] ?? "#444")"/>"##
            body += ##"<text x="\##(x1 + 4)" y="\##(y + barHeight - 3)">\##(String(format: "%.2f×", speed))</text>"## + "\n"
            y += barHeight + gap
        }
        y += groupGap
    }
    var axis = ""
    for (ratio, label) in [(0.001, "1/1000×"), (0.01, "1/100×"), (0.1, "1/10×"), (1.0, "1× ledger"), (10.0, "10×"), (100.0, "100×"), (1000.0, "1000×")] {
        axis += ##"<line x1="\##(x(ratio))" y1="40" x2="\##(x(ratio))" y2="\##(y)" stroke="#ccc"/>"##
        axis += ##"<text x="\##(x(ratio))" y="36" text-anchor="middle" fill="#555">\##(label)</text>"## + "\n"
    }
    return """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(y + 10))" font-family="sans-serif" font-size="11">
        <rect width="100%" height="100%" fill="white"/>
        <text x="8" y="16" font-size="13" font-weight="bold">\(title)</text>
        \(axis)\(body)</svg>

        """
}
