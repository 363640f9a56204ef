// W5 and W9-C of ledger-bench: a new process opens a store, reads what the widget shows, prints its
// peak resident memory (bytes) and exits. It links no Foundation (only its essentials), as a
// widget extension would keep its footprint small.
//
//   ledger-bench-cold SYSTEM DIRECTORY
//
// W9-C (SYSTEM `ledger+projection` or `ledger-fold-log`): the first 10 rows of the task list,
// from the app projection or folded from the log; a second line names their keys (the two
// systems must agree). W9-O (SYSTEM `ledger+build-due`): opens writable with the task
// projection registered while its build is due; the second line says "building" or "ready".
#if canImport(Glibc)
import Glibc
#endif
import LedgerBenchSupport

/// VmHWM of this process in bytes (not ru_maxrss: Linux carries that across exec).
func peakRSSBytes() -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmHWM:"), let kib = Int(text.split(separator: " ").dropFirst().first ?? "") { return kib * 1024 }
    }
    return 0
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let system = SystemKind(rawValue: arguments[1]) else {
    print("usage: ledger-bench-cold SYSTEM DIRECTORY")
    exit(2)
}
do {
    if system == .ledgerBuildDue {
        let state = try coldReadTasks(system, directory: arguments[2])
        print(peakRSSBytes())
        print(state.joined())
    } else if system == .ledgerProjection || system == .ledgerFoldLog {
        let keys = try coldReadTasks(system, directory: arguments[2])
        guard keys.count == 10 else { throw BenchFailure("read \(keys.count) task rows, expected 10") }
        print(peakRSSBytes())
        print(keys.joined(separator: ","))
    } else {
        let rows = try openStore(system, directory: arguments[2]).readWidget()
        guard rows == 10 else { throw BenchFailure("read \(rows) widget rows, expected 10") }
        print(peakRSSBytes())
    }
} catch {
    print("ledger-bench-cold: \(error)")
    exit(1)
}
