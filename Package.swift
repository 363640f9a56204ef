// swift-tools-version: 6.1
import PackageDescription

// The product: the C module, the LMDB layer, the ledger, its sync client, the `ledger` CLI and their
// tests. The laboratory (package-benchmark, the comparison with SQLite, torture, the crash-state
// explorer, the fuzzer) is a package of its own, Benchmarks, and the sync server another,
// Tools/ledger-server: both depend on this one by path, so an app resolves neither's dependencies.
let package = Package(
    name: "InboxLedger",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "InboxLedger", targets: ["InboxLedger"]),
        .library(name: "LMDB", targets: ["LMDB"]),
        // Sync with a server (docs/sync.md): InboxLedger and Foundation only.
        .library(name: "InboxLedgerSync", targets: ["InboxLedgerSync"]),
        .executable(name: "ledger", targets: ["ledger"]),
        // The independent models of docs/semantics.md (InboxModel, FlowModel) and test helpers, for
        // the packages under Tools/ that depend on this one by path (the sync server's tests, the
        // laboratory's tools and tests).
        .library(name: "LedgerTestSupport", targets: ["TestSupport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // C module: the system's liblmdb (Debian liblmdb-dev, Homebrew lmdb).
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        // Thin, safe LMDB layer: the only code that touches CLMDB.
        // The package's thread primitives (a lock that owns its value, a dedicated thread, the
        // monotonic clock), below the LMDB layer and the ledger, which both use them.
        .target(name: "LedgerThreads"),
        .target(name: "LMDB", dependencies: ["CLMDB", "LedgerThreads"]),
        // CRC-32C with the CPU's instruction (SSE 4.2, ARMv8 CRC); the ledger keeps a table fallback.
        .target(name: "CChecksum", path: "Sources/CChecksum"),
        // The ledger: log, envelope, group commit, idempotency.
        .target(name: "InboxLedger", dependencies: ["LMDB", "LedgerThreads", "CChecksum"]),
        // The sync client (docs/sync.md): URLSession, no package dependency.
        .target(name: "InboxLedgerSync", dependencies: ["InboxLedger"]),
        .testTarget(name: "InboxLedgerSyncTests", dependencies: ["InboxLedgerSync", "InboxLedger", "TestSupport"]),
        // The `ledger` command-line tool.
        .executableTarget(
            name: "ledger",
            dependencies: ["InboxLedger", "InboxLedgerSync", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tools/ledger"
        ),
        // The task tracker of docs/apps.md as real processes (an app projection beside the
        // inbox): what `make demo` runs next to `ledger simulate`.
        .executableTarget(name: "task-tracker", dependencies: ["InboxLedger"], path: "Examples/TaskTracker"),
        // The shared notes and tasks of docs/apps.md with sync, on several devices: what `make
        // demo-sync` edits offline on two devices.
        .executableTarget(name: "shared-notes", dependencies: ["InboxLedger", "InboxLedgerSync"], path: "Examples/SharedNotes"),
        // A helper the tests spawn as real writer / reader / crash-victim processes.
        .executableTarget(name: "LedgerTestAgent", dependencies: ["InboxLedger", "LMDB", "LedgerThreads", "TestSupport"], path: "Tests/LedgerTestAgent"),
        .target(name: "TestSupport", dependencies: ["InboxLedger", "LMDB"], path: "Tests/TestSupport"),
        // Every Swift snippet of README.md and docs/, compiled (DocumentationTests checks they match).
        .target(name: "DocSnippets", dependencies: ["InboxLedger", "InboxLedgerSync", "LMDB"], path: "Tests/DocSnippets"),
        .testTarget(name: "LMDBTests", dependencies: ["LMDB", "LedgerThreads", "CLMDB", "TestSupport", "LedgerTestAgent"]),
        .testTarget(name: "InboxLedgerTests", dependencies: ["InboxLedger", "LMDB", "TestSupport", "LedgerTestAgent", "ledger"]),
        .testTarget(name: "LedgerCLITests", dependencies: ["InboxLedger", "LMDB", "TestSupport", "DocSnippets", "ledger"]),
    ],
    swiftLanguageModes: [.v6]
)
