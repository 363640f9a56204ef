import Foundation
import Hummingbird
import InboxLedgerSync
import Logging
import NIOCore
import PostgresNIO
import Prometheus

// The server composed, the pattern of the hummingbird-examples "todos" tutorial:
// `buildApplication` makes the store (PostgreSQL) and the application around it, and
// `buildRouter` the routes over any store, so that the router tests give it a `MemoryStore`.

/// What `serve` runs with (its options, resolved).
struct ServerSettings: Sendable {
    /// The address to listen on.
    var host = "127.0.0.1"
    /// The port (0: any free port).
    var port = 8080
    /// The PostgreSQL URL.
    var database: DatabaseURL
    /// The largest request body, in bytes.
    var maxBodyBytes = SyncWire.Limits.defaultMaxBodyBytes
    /// PostgreSQL connections per process.
    var connections = 8
    /// How long to wait for PostgreSQL at start.
    var databaseWait: Duration = .seconds(60)
    /// How long a connection may stay without a request.
    var idleTimeout: Duration = .seconds(15)
    /// Long polls one user may hold open at once.
    var longPollsPerUser = 16
    /// Device ledgers one user may have.
    var ledgersPerUser = 100
    /// Custom feed entries one user may hold.
    var customEntriesPerUser = RequestLimits.defaultCustomEntriesPerUser
    /// The custom types accepted (`*`: all).
    var customTypes = CustomTypes.all
    /// How tokens are verified (docs/sync.md, "Configuration").
    var identity: IdentityConfiguration
    /// Where the metrics go (``ServerMetrics``), served at `GET /metrics`; nil: no metrics.
    var metrics: PrometheusCollectorRegistry?

    /// The bounds the routes enforce.
    var requestLimits: RequestLimits {
        RequestLimits(maxBodyBytes: maxBodyBytes, longPollsPerUser: longPollsPerUser, ledgersPerUser: ledgersPerUser,
                      customEntriesPerUser: customEntriesPerUser, customTypes: customTypes)
    }
}

/// The server, composed: loads the token verification keys (a JWKS URL is fetched), connects
/// the store (``connectPostgresStore(_:logger:)``: waits for PostgreSQL, applies the
/// migrations), then builds the application — the routes of ``buildRouter(_:authenticator:limits:logger:)``,
/// the store's services (the pool, the feed notifier and database probe), and connections that
/// close when idle (which bounds how long a request's headers may take).
func buildApplication(_ settings: ServerSettings, logger: Logger) async throws -> some ApplicationProtocol {
    let verifier = try await IdentityVerifier(configuration: settings.identity, logger: logger)
    logger.notice("database \(settings.database.description); \(verifier.summary); custom types \(settings.customTypes), at most \(settings.customEntriesPerUser) custom feed entries per user")
    let store = try await connectPostgresStore(settings, logger: logger)
    let metrics = settings.metrics.map { registry in
        MetricsEndpoint(registry: registry) {
            (store.longPolls.openPolls, store.database.connectionsInUse.load(ordering: .relaxed), store.database.isUp)
        }
    }
    let router = buildRouter(store, authenticator: TokenAuthenticator(verifier: verifier), limits: settings.requestLimits,
                             metrics: metrics, logger: logger)
    let host = settings.host
    let idle = TimeAmount.nanoseconds(Int64(settings.idleTimeout.components.seconds) * 1_000_000_000)
    return Application(
        router: router,
        server: .http1(configuration: .init(additionalChannelHandlers: [ClientDisconnect()], idleTimeout: idle)),
        configuration: .init(address: .hostname(host, port: settings.port), serverName: "ledger-server"),
        services: store.services,
        onServerRunning: { channel in
            let bound = channel.localAddress?.port ?? 0
            // The line scripts and tests wait for; written unbuffered.
            FileHandle.standardOutput.write(Data("ledger-server listening on \(host):\(bound)\n".utf8))
        },
        logger: logger)
}

/// The routes over `store`: `/healthz`, and the `/v1` endpoints behind `authenticator`, with
/// ``ErrorAnswers`` turning every error into the protocol's answer; with `metrics`, every
/// request counted and timed by route and status (Hummingbird's `MetricsMiddleware`, outside
/// the error answers so it sees their statuses) and `GET /metrics`.
func buildRouter(_ store: some SyncStore, authenticator: TokenAuthenticator, limits: RequestLimits = RequestLimits(),
                 metrics: MetricsEndpoint? = nil, logger: Logger) -> Router<LedgerRequestContext> {
    let router = Router(context: LedgerRequestContext.self)
    if let metrics {
        router.add(middleware: MetricsMiddleware())
        router.get("/metrics") { _, _ in metrics.response() }
    }
    API(store: store, limits: limits, logger: logger).routes(router, authenticator: authenticator)
    return router
}

/// The PostgreSQL store of `settings`: waits for the database ("waiting for PostgreSQL at
/// HOST:PORT" on standard error while it cannot connect), checks and applies the schema
/// migrations on a connection of its own, and makes the pool. The store's ``PostgresStore/services``
/// (the pool and the notifier) must run for it to serve: `buildApplication` runs them.
func connectPostgresStore(_ settings: ServerSettings, logger: Logger) async throws -> PostgresStore {
    var config = try settings.database.clientConfiguration()
    config.options.maximumConnections = settings.connections
    var single = try settings.database.connectionConfiguration()
    single.options.connectTimeout = .seconds(5)
    let client = PostgresClient(configuration: config, backgroundLogger: logger)
    let database = Database(client: client, address: "\(settings.database.host):\(settings.database.port)", connection: single, logger: logger)

    let setup = try await database.connectAtStartup(patience: settings.databaseWait)
    do {
        try await Migrations.run(on: setup, logger: logger)
    } catch {
        try? await setup.close()  // the error that matters is the migration's
        throw error
    }
    try await setup.close()
    return PostgresStore(database: database)
}
