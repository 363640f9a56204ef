import Foundation
import NIOSSL
import PostgresNIO

/// A setting from, in order: its command-line flag (tests), its environment variable, or the
/// file its `<NAME>_FILE` variable names (a mounted secret; one trailing newline is not part of
/// the value). Both `NAME` and `NAME_FILE` set is an error: which one was meant?
struct Setting {
    let environment: [String: String]

    init(environment: [String: String] = ProcessInfo.processInfo.environment) { self.environment = environment }

    func value(flag: String?, _ name: String) throws(ConfigurationError) -> String? {
        if let flag { return flag }
        let direct = environment[name].flatMap { $0.isEmpty ? nil : $0 }
        let file = environment[name + "_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        switch (direct, file) {
        case (nil, nil): return nil
        case (let value?, nil): return value
        case (nil, let path?):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError("\(name)_FILE: cannot read \(path)")
            }
            var text = String(decoding: data, as: UTF8.self)
            if text.hasSuffix("\r\n") { text.removeLast(1) } else if text.hasSuffix("\n") { text.removeLast() }
            guard !text.isEmpty else { throw ConfigurationError("\(name)_FILE: \(path) is empty") }
            return text
        case (.some, .some): throw ConfigurationError("both \(name) and \(name)_FILE are set: keep one")
        }
    }

    /// A list: the flag's values, or the variable split at commas and white space.
    func list(flags: [String], _ name: String) throws(ConfigurationError) -> [String] {
        if !flags.isEmpty { return flags }
        guard let text = try value(flag: nil, name) else { return [] }
        return text.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map(String.init)
    }
}

/// The PostgreSQL connection from a URL, `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE
/// [?sslmode=…&sslrootcert=…&sslcert=…&sslkey=…]`, with libpq's meanings of `sslmode`.
struct DatabaseURL {
    enum SSLMode: String, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    var host: String
    var port: Int
    var user: String
    var password: String?
    var database: String?
    var sslMode: SSLMode
    var rootCertificate: String?
    var clientCertificate: String?
    var clientKey: String?

    init(_ text: String) throws(ConfigurationError) {
        guard let parts = URLComponents(string: text), ["postgres", "postgresql"].contains(parts.scheme ?? ""),
              let host = parts.host, !host.isEmpty, let user = parts.user else {
            throw ConfigurationError("the database URL is not postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=…]")
        }
        self.host = host
        port = parts.port ?? 5432
        self.user = user
        password = parts.password
        database = parts.path.count > 1 ? String(parts.path.dropFirst()) : nil
        var query: [String: String] = [:]
        for item in parts.queryItems ?? [] { query[item.name] = item.value ?? "" }
        let known: Set = ["sslmode", "sslrootcert", "sslcert", "sslkey"]
        if let unknown = query.keys.sorted().first(where: { !known.contains($0) }) {
            throw ConfigurationError("the database URL's parameter '\(unknown)' is not supported (sslmode, sslrootcert, sslcert, sslkey)")
        }
        // libpq's default: TLS when the server offers it.
        let mode = query["sslmode"] ?? SSLMode.prefer.rawValue
        guard let sslMode = SSLMode(rawValue: mode) else {
            throw ConfigurationError("sslmode '\(mode)': expected one of \(SSLMode.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self.sslMode = sslMode
        rootCertificate = query["sslrootcert"]
        clientCertificate = query["sslcert"]
        clientKey = query["sslkey"]
        guard (clientCertificate == nil) == (clientKey == nil) else { throw ConfigurationError("sslcert and sslkey go together") }
    }

    /// How to use TLS: `disable` plain; `allow`/`prefer` TLS when offered, not verified;
    /// `require` TLS, not verified (verified against `sslrootcert` when given, as libpq does);
    /// `verify-ca` the chain; `verify-full` the chain and the host name.
    enum TLSUse { case disable, prefer(TLSConfiguration), require(TLSConfiguration) }

    func tls() throws(ConfigurationError) -> TLSUse {
        var configuration = TLSConfiguration.makeClientConfiguration()
        do {
            if let rootCertificate {
                configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(rootCertificate))
            }
            if let clientCertificate, let clientKey {
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(clientCertificate).map { .certificate($0) }
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: clientKey, format: .pem))
            }
        } catch {
            throw ConfigurationError("the database URL's certificates (sslrootcert, sslcert, sslkey): \(error)")
        }
        switch sslMode {
        case .disable:
            return .disable
        case .allow, .prefer:
            configuration.certificateVerification = .none
            return .prefer(configuration)
        case .require:
            configuration.certificateVerification = rootCertificate == nil ? .none : .noHostnameVerification
            return .require(configuration)
        case .verifyCA:
            configuration.certificateVerification = .noHostnameVerification
            return .require(configuration)
        case .verifyFull:
            configuration.certificateVerification = .fullVerification
            return .require(configuration)
        }
    }

    /// The pool's configuration.
    func clientConfiguration() throws(ConfigurationError) -> PostgresClient.Configuration {
        let use = try tls()
        let tls: PostgresClient.Configuration.TLS = switch use {
        case .disable: .disable
        case .prefer(let configuration): .prefer(configuration)
        case .require(let configuration): .require(configuration)
        }
        return PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
    }

    /// A single connection's (the start-up wait and the migrations).
    func connectionConfiguration() throws(ConfigurationError) -> PostgresConnection.Configuration {
        let use = try tls()
        let tls: PostgresConnection.Configuration.TLS
        do {
            switch use {
            case .disable: tls = .disable
            case .prefer(let configuration): tls = .prefer(try NIOSSLContext(configuration: configuration))
            case .require(let configuration): tls = .require(try NIOSSLContext(configuration: configuration))
            }
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("the database URL's TLS settings: \(error)")
        }
        return PostgresConnection.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
    }

    /// Where, for messages: never the password.
    var description: String { "\(host):\(port)/\(database ?? user) (sslmode \(sslMode.rawValue))" }
}
