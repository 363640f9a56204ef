import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import InboxLedgerSync
import PostgresNIO

/// `ledger-server`: the sync server of docs/sync.md.
@main
struct LedgerServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-server",
        abstract: "The InboxLedger sync server (docs/sync.md): HTTP on Hummingbird, state in PostgreSQL.",
        subcommands: [Serve.self, Token.self],
        defaultSubcommand: Serve.self)
}

/// The HMAC secret, from `--secret` or `LEDGER_SERVER_SECRET`.
struct SecretOption: ParsableArguments {
    @Option(help: "The token signing secret (default: $LEDGER_SERVER_SECRET).")
    var secret: String?

    func resolve() throws -> String {
        guard let value = secret ?? ProcessInfo.processInfo.environment["LEDGER_SERVER_SECRET"], value.utf8.count >= 16 else {
            throw ValidationError("a secret of at least 16 bytes is needed: --secret or LEDGER_SERVER_SECRET")
        }
        return value
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Migrate the schema, then serve (stateless: run as many as you like on one database).")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port (0: any free port; the 'listening on' line says which).") var port = 8080
    @Option(help: "PostgreSQL URL: postgres://USER[:PASSWORD]@HOST:PORT/DATABASE (default: $DATABASE_URL).")
    var databaseURL: String?
    @Option(help: "Largest request body, in bytes.") var maxBody = SyncWire.Limits.defaultMaxBodyBytes
    @Option(help: "PostgreSQL connections per process.") var connections = 8
    @Option(help: "Seconds to wait for PostgreSQL at start before giving up.") var databaseWait = 60
    @Option(help: "Seconds a connection may stay without a request (also the time a request's headers may take).") var idleTimeout = 15
    @Option(help: "Long polls one user may hold open at once.") var longPollsPerUser = 16
    @OptionGroup var secret: SecretOption

    func run() async throws {
        var log = Logger(label: "ledger-server")
        log.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .notice
        guard let url = databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            throw ValidationError("--database-url postgres://USER@HOST:PORT/DATABASE is required")
        }
        let settings = ServerSettings(
            host: host, port: port, databaseURL: url, maxBodyBytes: maxBody, connections: connections,
            databaseWait: .seconds(databaseWait), idleTimeout: .seconds(idleTimeout), longPollsPerUser: longPollsPerUser,
            secret: try secret.resolve())
        let app = try await buildApplication(settings, logger: log)
        try await app.runService()
    }
}

/// What `serve` runs with (its options, resolved).
struct ServerSettings: Sendable {
    var host = "127.0.0.1"
    var port = 8080
    var databaseURL: String
    var maxBodyBytes = SyncWire.Limits.defaultMaxBodyBytes
    var connections = 8
    var databaseWait: Duration = .seconds(60)
    var idleTimeout: Duration = .seconds(15)
    var longPollsPerUser = 16
    var secret: String
}

/// The server, composed: waits for PostgreSQL ("waiting for PostgreSQL at HOST:PORT"), checks
/// and applies the schema migrations on a connection of its own, then builds the application —
/// the pool, the feed notifier and database probe, the routes with their error answers, and
/// connections that close when idle (which bounds how long a request's headers may take).
func buildApplication(_ settings: ServerSettings, logger: Logger) async throws -> some ApplicationProtocol {
    guard let parts = URLComponents(string: settings.databaseURL), let dbHost = parts.host, let user = parts.user else {
        throw ValidationError("--database-url postgres://USER@HOST:PORT/DATABASE is required")
    }
    let dbPort = parts.port ?? 5432
    let databaseName = parts.path.isEmpty ? nil : String(parts.path.dropFirst())
    var config = PostgresClient.Configuration(host: dbHost, port: dbPort, username: user, password: parts.password,
                                              database: databaseName, tls: .disable)
    config.options.maximumConnections = settings.connections
    var single = PostgresConnection.Configuration(host: dbHost, port: dbPort, username: user, password: parts.password,
                                                  database: databaseName, tls: .disable)
    single.options.connectTimeout = .seconds(5)
    let client = PostgresClient(configuration: config, backgroundLogger: logger)
    let database = Database(client: client, address: "\(dbHost):\(dbPort)", connection: single, logger: logger)

    let setup = try await database.connectAtStartup(patience: settings.databaseWait)
    do {
        try await Migrations.run(on: setup, logger: logger)
    } catch {
        try? await setup.close()  // the error that matters is the migration's
        throw error
    }
    try await setup.close()

    let notifier = FeedNotifier(database: database)
    let api = API(store: Store(database: database), notifier: notifier, signer: TokenSigner(secret: settings.secret),
                  maxBodyBytes: settings.maxBodyBytes, longPollsPerUser: settings.longPollsPerUser)
    let router = Router(context: LedgerRequestContext.self)
    api.routes(router)
    let host = settings.host
    let idle = TimeAmount.nanoseconds(Int64(settings.idleTimeout.components.seconds) * 1_000_000_000)
    return Application(
        router: router,
        server: .http1(configuration: .init(additionalChannelHandlers: [ClientDisconnect()], idleTimeout: idle)),
        configuration: .init(address: .hostname(host, port: settings.port), serverName: "ledger-server"),
        services: [client, notifier],
        onServerRunning: { channel in
            let bound = channel.localAddress?.port ?? 0
            // The line scripts and tests wait for; written unbuffered.
            FileHandle.standardOutput.write(Data("ledger-server listening on \(host):\(bound)\n".utf8))
        },
        logger: logger)
}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mint a token for a user (prints it).")

    @Option(help: "The user id: 1–64 of A-Z a-z 0-9 . _ -") var user: String
    @Option(help: "device (sync a device) or publish (list messages for the user).") var scope = "device"
    @Option(parsing: .unconditional, help: "Lifetime in seconds (negative, as `--ttl -10`: already expired, for tests).") var ttl: Int64 = 30 * 86_400
    @OptionGroup var secret: SecretOption

    func run() throws {
        guard TokenSigner.isValidUser(user) else { throw ValidationError("user: 1–64 of A-Z a-z 0-9 . _ -") }
        guard let scope = Claims.Scope(rawValue: scope) else { throw ValidationError("scope: device or publish") }
        let claims = Claims(sub: user, scope: scope, exp: Int64(Date().timeIntervalSince1970) + ttl)
        print(try TokenSigner(secret: try secret.resolve()).sign(claims))
    }
}
