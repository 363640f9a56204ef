import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
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
    @Option(help: "Largest request body, in bytes.") var maxBody = 1_048_576
    @Option(help: "PostgreSQL connections per process.") var connections = 8
    @OptionGroup var secret: SecretOption

    func run() async throws {
        var log = Logger(label: "ledger-server")
        log.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .notice
        let logger = log
        guard let url = databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"],
              let parts = URLComponents(string: url), let dbHost = parts.host, let user = parts.user else {
            throw ValidationError("--database-url postgres://USER@HOST:PORT/DATABASE is required")
        }
        var config = PostgresClient.Configuration(
            host: dbHost, port: parts.port ?? 5432, username: user, password: parts.password,
            database: parts.path.isEmpty ? nil : String(parts.path.dropFirst()), tls: .disable)
        config.options.maximumConnections = connections
        let client = PostgresClient(configuration: config, backgroundLogger: logger)
        let notifier = FeedNotifier(client: client, logger: logger)
        let api = API(store: Store(client: client, logger: logger), notifier: notifier,
                      signer: TokenSigner(secret: try secret.resolve()), maxBodyBytes: maxBody)
        let router = Router(context: BasicRequestContext.self)
        api.routes(router)
        var app = Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: "ledger-server"),
            services: [client, notifier],
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? 0
                // The line scripts and tests wait for; written unbuffered.
                FileHandle.standardOutput.write(Data("ledger-server listening on \(host):\(bound)\n".utf8))
            },
            logger: logger)
        app.beforeServerStarts { try await Migrations.run(client, logger: logger) }
        try await app.runService()
    }
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
