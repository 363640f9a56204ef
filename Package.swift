// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "InboxLedger",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "InboxLedger", targets: ["InboxLedger"]),
        .library(name: "LMDB", targets: ["LMDB"]),
        .executable(name: "ledger", targets: ["ledger"]),
        .executable(name: "ledger-compaction-bench", targets: ["ledger-compaction-bench"]),
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
        // The ledger: log, envelope, group commit, idempotency.
        .target(name: "InboxLedger", dependencies: ["LMDB"]),
        // The `ledger` command-line tool.
        .executableTarget(
            name: "ledger",
            dependencies: ["InboxLedger", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tools/ledger"
        ),
        // A helper the tests spawn as real writer / reader / crash-victim processes.
        .executableTarget(name: "LedgerTestAgent", dependencies: ["InboxLedger", "LMDB", "TestSupport"], path: "Tests/LedgerTestAgent"),
        .target(name: "TestSupport", dependencies: ["InboxLedger"], path: "Tests/TestSupport"),
        .testTarget(name: "LMDBTests", dependencies: ["LMDB", "CLMDB", "TestSupport", "LedgerTestAgent"]),
        .testTarget(name: "InboxLedgerTests", dependencies: ["InboxLedger", "LMDB", "TestSupport", "LedgerTestAgent", "ledger"]),
        .testTarget(name: "LedgerCLITests", dependencies: ["TestSupport", "ledger"]),
        // package-benchmark suite: `swift package benchmark`.
        .executableTarget(
            name: "LedgerBenchmarks",
            dependencies: ["InboxLedger", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/LedgerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Compaction of a large log with a concurrent writer: `swift run -c release ledger-compaction-bench`.
        // (Under Tools/: package-benchmark runs every executable directly under Benchmarks/.)
        .executableTarget(name: "ledger-compaction-bench", dependencies: ["InboxLedger"], path: "Tools/ledger-compaction-bench"),
    ],
    swiftLanguageModes: [.v6]
)
