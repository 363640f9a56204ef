// swift-tools-version: 6.1
// The ledger's laboratory: what measures and attacks the product, in a package of its own so that
// an app that depends on InboxLedger resolves none of its dependencies (package-benchmark, SQLite).
// It depends on the root package by path, as an app would (public API and the `Testing` SPI).
//
//   swift build --build-tests && swift test --skip-build --disable-xctest   (the root's `make test` runs both)
//   swift package benchmark                                                 (package-benchmark: Benchmarks/)
import PackageDescription

let package = Package(
    name: "ledger-lab",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ledger-bench", targets: ["ledger-bench"]),
        .executable(name: "ledger-bench-cold", targets: ["ledger-bench-cold"]),
        .executable(name: "ledger-torture", targets: ["ledger-torture"]),
        .executable(name: "ledger-crash-states", targets: ["ledger-crash-states"]),
        .executable(name: "ledger-fuzz", targets: ["ledger-fuzz"]),
        // LD_PRELOAD recorder of data.mdb writes and syncs for the crash-state explorer.
        .library(name: "LedgerIORecorder", type: .dynamic, targets: ["CIORecorder"]),
    ],
    dependencies: [
        .package(name: "InboxLedger", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // package-benchmark suite: `swift package benchmark` (it runs every executable under Benchmarks/).
        .executableTarget(
            name: "LedgerBenchmarks",
            dependencies: [.product(name: "InboxLedger", package: "InboxLedger"), .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/LedgerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // SQLite's C API (Debian libsqlite3-dev): a baseline of the comparison benchmark only.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // LMDB's C API for the raw-LMDB baseline (the physical limit), a module of its own: the
        // product does not vend its C module (CLMDB).
        .systemLibrary(
            name: "CLMDBBaseline",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        // Side-by-side comparison with raw LMDB, SQLite and whole-file rewrite:
        // `swift run -c release ledger-bench` (see docs/benchmarks.md).
        .target(
            name: "LedgerBenchSupport",
            dependencies: [.product(name: "InboxLedger", package: "InboxLedger"), "CLMDBBaseline", "CSQLite"]
        ),
        .executableTarget(
            name: "ledger-bench",
            dependencies: [
                "LedgerBenchSupport",
                .product(name: "InboxLedger", package: "InboxLedger"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // W5's cold reader: a process as small as a widget's (no Foundation, only its essentials).
        .executableTarget(name: "ledger-bench-cold", dependencies: ["LedgerBenchSupport"]),
        // Crash/contention torture with acknowledged-write accounting (docs/reliability.md). It shares
        // the independent reference model of the inbox with the tests (LedgerTestSupport).
        .executableTarget(
            name: "ledger-torture",
            dependencies: [
                .product(name: "InboxLedger", package: "InboxLedger"),
                .product(name: "LedgerTestSupport", package: "InboxLedger"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Power-cut exploration: records what processes write and sync (CIORecorder, loaded
        // with LD_PRELOAD), builds the files a power cut could leave, checks each (docs/reliability.md).
        .target(name: "CIORecorder", linkerSettings: [.linkedLibrary("dl")]),
        .executableTarget(
            name: "ledger-crash-states",
            dependencies: [
                .product(name: "InboxLedger", package: "InboxLedger"),
                .product(name: "LedgerTestSupport", package: "InboxLedger"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // libFuzzer target for the decoders of untrusted bytes, and its corpus replayer (`make fuzz`).
        .executableTarget(name: "ledger-fuzz", dependencies: [.product(name: "InboxLedger", package: "InboxLedger")]),
        // The tools' own tests: they start the built tools as real processes (and the explorer its
        // recorder, libLedgerIORecorder.so, which `swift build` builds beside them).
        .testTarget(
            name: "LedgerLabTests",
            dependencies: [
                .product(name: "LedgerTestSupport", package: "InboxLedger"),
                "ledger-bench", "ledger-bench-cold", "ledger-torture", "ledger-crash-states",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
