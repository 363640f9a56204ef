// swift-tools-version: 6.1
// ledger-server: the sync server of docs/sync.md, in a package of its own so that an app that
// depends on InboxLedger resolves none of its dependencies (Hummingbird, postgres-nio, swift-crypto).
import PackageDescription

let package = Package(
    name: "ledger-server",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ledger-server", targets: ["ledger-server"]),
        .executable(name: "sync-device", targets: ["sync-device"]),
        .executable(name: "sync-bench", targets: ["sync-bench"]),
    ],
    dependencies: [
        .package(name: "InboxLedger", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // Verifies the identity provider's JWTs (HS256, RS256, ES256, JWKS): docs/sync.md, "Authentication".
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        // TLS to PostgreSQL (the URL's sslmode); postgres-nio depends on it already.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Metrics (docs/operations.md, "Watching the sync server"): swift-metrics' API, Prometheus's text format.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .executableTarget(
            name: "ledger-server",
            dependencies: [
                .product(name: "InboxLedger", package: "InboxLedger"),
                .product(name: "InboxLedgerSync", package: "InboxLedger"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // A device in a process of its own, for the tests to kill (fault injection by environment).
        .executableTarget(
            name: "sync-device",
            dependencies: [
                .product(name: "InboxLedger", package: "InboxLedger"),
                .product(name: "InboxLedgerSync", package: "InboxLedger"),
            ]
        ),
        // The sync workloads (scripts/sync-bench.sh): up, 50-device ingest, down.
        .executableTarget(
            name: "sync-bench",
            dependencies: [
                .product(name: "InboxLedger", package: "InboxLedger"),
                .product(name: "InboxLedgerSync", package: "InboxLedger"),
            ]
        ),
        // Real processes and a real PostgreSQL (started by scripts/sync-postgres.sh).
        .testTarget(
            name: "LedgerServerTests",
            dependencies: [
                "ledger-server", "sync-device",
                .product(name: "InboxLedger", package: "InboxLedger"),
                .product(name: "InboxLedgerSync", package: "InboxLedger"),
                // The independent models (SyncFlowModel) of the root's tests.
                .product(name: "LedgerTestSupport", package: "InboxLedger"),
                // Mints the identity provider's tokens and serves a JWKS URL on loopback.
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                // buildApplication in-process (InProcessServerTests).
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
