// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "InboxLedger",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "InboxLedger", targets: ["InboxLedger"]),
        .library(name: "LMDB", targets: ["LMDB"]),
        // Sync with a server (docs/sync.md): InboxLedger and Foundation only.
        .library(name: "InboxLedgerSync", targets: ["InboxLedgerSync"]),
        .executable(name: "ledger", targets: ["ledger"]),
        .executable(name: "ledger-bench", targets: ["ledger-bench"]),
        .executable(name: "ledger-bench-cold", targets: ["ledger-bench-cold"]),
        .executable(name: "ledger-torture", targets: ["ledger-torture"]),
        .executable(name: "ledger-crash-states", targets: ["ledger-crash-states"]),
        // LD_PRELOAD recorder of data.mdb writes and syncs for the crash-state explorer.
        .library(name: "LedgerIORecorder", type: .dynamic, targets: ["CIORecorder"]),
        // The independent models of docs/semantics.md (InboxModel, FlowModel) and test helpers, for
        // the packages under Tools/ that depend on this one by path (the sync server's tests).
        .library(name: "LedgerTestSupport", targets: ["TestSupport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // C module: the system's liblmdb (Debian liblmdb-dev, Homebrew lmdb).
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        // Thin, safe LMDB layer: the only code that touches CLMDB.
        .target(name: "LMDB", dependencies: ["CLMDB"]),
        // CRC-32C with the CPU's instruction (SSE 4.2, ARMv8 CRC); the ledger keeps a table fallback.
        .target(name: "CChecksum", path: "Sources/CChecksum"),
        // The ledger: log, envelope, group commit, idempotency.
        .target(name: "InboxLedger", dependencies: ["LMDB", "CChecksum"]),
        // The sync client (docs/sync.md): URLSession, no package dependency.
        .target(name: "InboxLedgerSync", dependencies: ["InboxLedger"]),
        .testTarget(name: "InboxLedgerSyncTests", dependencies: ["InboxLedgerSync", "InboxLedger"]),
        // The `ledger` command-line tool.
        .executableTarget(
            name: "ledger",
            dependencies: ["InboxLedger", "InboxLedgerSync", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tools/ledger"
        ),
        // A helper the tests spawn as real writer / reader / crash-victim processes.
        .executableTarget(name: "LedgerTestAgent", dependencies: ["InboxLedger", "LMDB", "TestSupport"], path: "Tests/LedgerTestAgent"),
        .target(name: "TestSupport", dependencies: ["InboxLedger", "LMDB"], path: "Tests/TestSupport"),
        // Every Swift snippet of README.md and docs/, compiled (DocumentationTests checks they match).
        .target(name: "DocSnippets", dependencies: ["InboxLedger", "InboxLedgerSync", "LMDB"], path: "Tests/DocSnippets"),
        .testTarget(name: "LMDBTests", dependencies: ["LMDB", "CLMDB", "TestSupport", "LedgerTestAgent"]),
        .testTarget(name: "InboxLedgerTests", dependencies: ["InboxLedger", "LMDB", "TestSupport", "LedgerTestAgent", "ledger", "ledger-torture", "ledger-crash-states"]),
        .testTarget(name: "LedgerCLITests", dependencies: ["TestSupport", "DocSnippets", "ledger", "ledger-bench", "ledger-bench-cold"]),
        // package-benchmark suite: `swift package benchmark`.
        .executableTarget(
            name: "LedgerBenchmarks",
            dependencies: ["InboxLedger", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/LedgerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // SQLite's C API (Debian libsqlite3-dev): a baseline of the comparison benchmark only.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // Side-by-side comparison with raw LMDB, SQLite and whole-file rewrite:
        // `swift run -c release ledger-bench` (see docs/benchmarks.md).
        // (Under Tools/: package-benchmark runs every executable directly under Benchmarks/.)
        // The raw-LMDB baseline uses the C API directly, on purpose: it is the physical limit.
        .target(name: "LedgerBenchSupport", dependencies: ["InboxLedger", "CLMDB", "CSQLite"], path: "Tools/ledger-bench-support"),
        .executableTarget(name: "ledger-bench", dependencies: ["LedgerBenchSupport", "InboxLedger", "LMDB"], path: "Tools/ledger-bench"),
        // Crash/contention torture with acknowledged-write accounting (docs/reliability.md). It shares
        // the independent reference model of the inbox with the tests (TestSupport).
        .executableTarget(name: "ledger-torture", dependencies: ["InboxLedger", "TestSupport"], path: "Tools/ledger-torture"),
        // Power-cut exploration: records what processes write and sync (CIORecorder, loaded
        // with LD_PRELOAD), builds the files a power cut could leave, checks each (docs/reliability.md).
        .target(name: "CIORecorder", path: "Sources/CIORecorder", linkerSettings: [.linkedLibrary("dl")]),
        .executableTarget(
            name: "ledger-crash-states",
            dependencies: ["InboxLedger", "TestSupport", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tools/ledger-crash-states"
        ),
        // libFuzzer target for the decoders of untrusted bytes, and its corpus replayer (`make fuzz`).
        .executableTarget(name: "ledger-fuzz", dependencies: ["InboxLedger"], path: "Tools/ledger-fuzz"),
        // W5's cold reader: a process as small as a widget's (no Foundation, only its essentials).
        .executableTarget(name: "ledger-bench-cold", dependencies: ["LedgerBenchSupport"], path: "Tools/ledger-bench-cold"),
    ],
    swiftLanguageModes: [.v6]
)
