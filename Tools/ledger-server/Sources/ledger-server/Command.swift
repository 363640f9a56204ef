import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import InboxLedgerSync
import Metrics
import PostgresNIO
import Prometheus

/// `ledger-server`: the sync server of docs/sync.md.
@main
struct LedgerServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-server",
        abstract: "The InboxLedger sync server (docs/sync.md): HTTP on Hummingbird, state in PostgreSQL.",
        subcommands: [Serve.self, Token.self],
        defaultSubcommand: Serve.self)
}

/// The development secret, from `--secret`, `LEDGER_SERVER_SECRET` or the file
/// `LEDGER_SERVER_SECRET_FILE` names: signs and verifies `ledger-server token`'s tokens.
struct SecretOption: ParsableArguments {
    @Option(help: "The development token secret (default: $LEDGER_SERVER_SECRET, or the file $LEDGER_SERVER_SECRET_FILE names).")
    var secret: String?

    /// The secret, if one is configured (`serve`: development tokens are optional).
    func optional(_ setting: Setting = Setting()) throws -> String? {
        guard let value = try setting.value(flag: secret, "LEDGER_SERVER_SECRET") else { return nil }
        guard value.utf8.count >= 16 else { throw ValidationError("the development secret needs at least 16 bytes") }
        return value
    }

    func resolve() throws -> String {
        guard let value = try optional() else {
            throw ValidationError("a secret of at least 16 bytes is needed: --secret, LEDGER_SERVER_SECRET or LEDGER_SERVER_SECRET_FILE")
        }
        return value
    }
}

/// How the identity provider's tokens are verified (docs/sync.md, "Authentication"); each flag
/// has an environment variable, which deployments use.
struct IdentityOptions: ParsableArguments {
    @Option(name: .customLong("jwt-key"),
            help: "A verification key, KID:ALG:file:PATH or KID:ALG:env:NAME (ALG: HS256, RS256, ES256; repeat for several; default: $LEDGER_JWT_KEYS, comma-separated).")
    var jwtKeys: [String] = []
    @Option(name: .customLong("jwks-file"), help: "A JWKS file of RS256/ES256 public keys (repeatable; default: $LEDGER_JWKS_FILE).")
    var jwksFiles: [String] = []
    @Option(name: .customLong("jwks-url"), help: "The identity provider's JWKS URL (default: $LEDGER_JWKS_URL).")
    var jwksURL: String?
    @Option(help: "Seconds between reads of the JWKS file and URL (default: $LEDGER_JWKS_REFRESH or 300).")
    var jwksRefresh: Int?
    @Option(help: "The claim that names the user (default: $LEDGER_JWT_USER_CLAIM or sub).")
    var userClaim: String?
    @Option(help: "The issuer a token's iss must equal (default: $LEDGER_JWT_ISSUER; none: not checked).")
    var issuer: String?
    @Option(help: "An audience a token's aud must name (repeatable; default: $LEDGER_JWT_AUDIENCE, comma-separated; none: not checked).")
    var audience: [String] = []
    @Option(help: "The scope that makes a JWT a publish token (default: $LEDGER_JWT_PUBLISH_SCOPE or ledger:publish).")
    var publishScope: String?
    @Option(help: "Clock skew allowed on exp and nbf, in seconds (default: $LEDGER_JWT_LEEWAY or 60).")
    var leeway: Int?

    func resolve(_ setting: Setting, developmentSecret: String?) throws -> IdentityConfiguration {
        var configuration = IdentityConfiguration()
        configuration.developmentSecret = developmentSecret
        configuration.keys = try setting.list(flags: jwtKeys, "LEDGER_JWT_KEYS").map { text throws(ConfigurationError) in
            try ConfiguredKey(parsing: text)
        }
        configuration.jwksFiles = try setting.list(flags: jwksFiles, "LEDGER_JWKS_FILE")
        if let text = try setting.value(flag: jwksURL, "LEDGER_JWKS_URL") {
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ValidationError("the JWKS URL '\(text)' is not an http(s) URL")
            }
            configuration.jwksURL = url
        }
        let refresh = try Self.number(jwksRefresh, setting, "LEDGER_JWKS_REFRESH", default: 300, range: 1...86_400)
        configuration.jwksRefresh = .seconds(refresh)
        configuration.userClaim = try setting.value(flag: userClaim, "LEDGER_JWT_USER_CLAIM") ?? "sub"
        configuration.issuer = try setting.value(flag: issuer, "LEDGER_JWT_ISSUER")
        configuration.audiences = try setting.list(flags: audience, "LEDGER_JWT_AUDIENCE")
        configuration.publishScope = try setting.value(flag: publishScope, "LEDGER_JWT_PUBLISH_SCOPE") ?? "ledger:publish"
        configuration.leeway = Int64(try Self.number(leeway, setting, "LEDGER_JWT_LEEWAY", default: 60, range: 0...3600))
        return configuration
    }

    static func number(_ flag: Int?, _ setting: Setting, _ name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        let number: Int
        if let flag {
            number = flag
        } else if let text = try setting.value(flag: nil, name) {
            guard let parsed = Int(text) else { throw ValidationError("\(name): '\(text)' is not a number") }
            number = parsed
        } else {
            number = value
        }
        guard range.contains(number) else { throw ValidationError("\(name): \(number) is not in \(range.lowerBound)…\(range.upperBound)") }
        return number
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Migrate the schema, then serve (stateless: run as many as you like on one database).",
        discussion: """
            Configured from the environment (each variable NAME may instead be NAME_FILE, a file \
            holding the value); the flags of the same names override it (tests). Examples:

              # The identity provider's published keys, users named by its `sub` claim:
              DATABASE_URL_FILE=/run/secrets/database-url \\
              LEDGER_JWKS_URL=https://idp.example.com/.well-known/jwks.json \\
              LEDGER_JWT_ISSUER=https://idp.example.com/ LEDGER_JWT_AUDIENCE=inbox-sync \\
                ledger-server serve --host 0.0.0.0 --port 8080

              # Keys one by one: a backend's HS256 secret, the provider's RS256 key;
              # the database over TLS, its certificate and host name verified:
              export LEDGER_JWT_KEYS=backend-1:HS256:env:BACKEND_SECRET
              LEDGER_JWT_KEYS+=,idp-2:RS256:file:/etc/ledger/idp-2.pem
              export DATABASE_URL='postgres://ledger@db/ledger?sslmode=verify-full'
              ledger-server serve

              # Development: `ledger-server token`'s tokens, signed with a secret:
              LEDGER_SERVER_SECRET=… DATABASE_URL=postgres://ledger@127.0.0.1/ledger \\
                ledger-server serve
            """)

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port (0: any free port; the 'listening on' line says which).") var port = 8080
    @Option(help: "PostgreSQL URL: postgres://USER[:PASSWORD]@HOST:PORT/DATABASE[?sslmode=…] (default: $DATABASE_URL, or the file $DATABASE_URL_FILE names).")
    var databaseURL: String?
    @Option(help: "Largest request body, in bytes.") var maxBody = SyncWire.Limits.defaultMaxBodyBytes
    @Option(help: "PostgreSQL connections per process.") var connections = 8
    @Option(help: "Seconds to wait for PostgreSQL at start before giving up.") var databaseWait = 60
    @Option(help: "Seconds a connection may stay without a request (also the time a request's headers may take).") var idleTimeout = 15
    @Option(help: "Long polls one user may hold open at once.") var longPollsPerUser = 16
    @Option(help: "Device ledgers one user may have.") var ledgersPerUser = 100
    @Option(help: "The custom event types accepted from devices and publishes: * (every one) or comma-separated exact type names (default: $LEDGER_CUSTOM_TYPES or *).")
    var customTypes: String?
    @Option(help: "Custom feed entries one user may hold (devices' and published custom events).")
    var customEntriesPerUser = RequestLimits.defaultCustomEntriesPerUser
    @ArgumentParser.Flag(inversion: .prefixedNo, help: "Metrics at GET /metrics, in Prometheus's text format (docs/operations.md, \"Watching the sync server\").")
    var metrics = true
    @OptionGroup var secret: SecretOption
    @OptionGroup var identity: IdentityOptions

    func run() async throws {
        var log = Logger(label: "ledger-server")
        log.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .notice
        let setting = Setting()
        guard let url = try setting.value(flag: databaseURL, "DATABASE_URL") else {
            throw ValidationError("the database is not configured: DATABASE_URL, DATABASE_URL_FILE or --database-url postgres://USER@HOST:PORT/DATABASE")
        }
        var settings = ServerSettings(
            host: host, port: port, database: try DatabaseURL(url), maxBodyBytes: maxBody, connections: connections,
            databaseWait: .seconds(databaseWait), idleTimeout: .seconds(idleTimeout), longPollsPerUser: longPollsPerUser,
            ledgersPerUser: ledgersPerUser, customEntriesPerUser: customEntriesPerUser,
            customTypes: try CustomTypes(parsing: try setting.value(flag: customTypes, "LEDGER_CUSTOM_TYPES") ?? "*"),
            identity: try identity.resolve(setting, developmentSecret: try secret.optional(setting)))
        guard customEntriesPerUser >= 0 else { throw ValidationError("--custom-entries-per-user: \(customEntriesPerUser) is negative") }
        if metrics {
            // The process's one metrics system: swift-metrics' calls (ours, Hummingbird's) go to the registry /metrics emits.
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
            settings.metrics = registry
        }
        let app = try await buildApplication(settings, logger: log)
        try await app.runService()
    }
}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mint a development token for a user (prints it); a server with the same secret accepts it.",
        discussion: "Example: LEDGER_SERVER_SECRET=… ledger-server token --user alice --scope publish")

    @Option(help: "The user id: 1–128 bytes of printable ASCII without spaces.") var user: String
    @Option(help: "device (sync a device) or publish (list messages for the user).") var scope = "device"
    @Option(parsing: .unconditional, help: "Lifetime in seconds (negative, as `--ttl -10`: already expired, for tests).") var ttl: Int64 = 30 * 86_400
    @OptionGroup var secret: SecretOption

    func run() throws {
        guard Identity.isValidUser(user) else { throw ValidationError("user: 1–128 bytes of printable ASCII without spaces") }
        guard let scope = Claims.Scope(rawValue: scope) else { throw ValidationError("scope: device or publish") }
        let claims = Claims(sub: user, scope: scope, exp: Int64(Date().timeIntervalSince1970) + ttl)
        print(try TokenSigner(secret: try secret.resolve()).sign(claims))
    }
}
