import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import JWTKit
import Logging
import Synchronization

/// Who a request acts for: the user taken from a verified token, and what the token may do
/// (docs/sync.md, "Authentication").
struct Identity: Sendable, Equatable {
    var user: String
    var scope: Claims.Scope

    /// A user id: 1–128 bytes of printable ASCII without spaces (an identity provider's subject,
    /// `auth0|65f…`, an e-mail address); the down keys `sync-down-<user>-<seq>` stay within the
    /// ledger's 256-byte key limit.
    static func isValidUser(_ user: String) -> Bool {
        (1...128).contains(user.utf8.count) && user.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f }
    }
}

/// The JWT signing algorithms the server accepts; a closed set, so `none`, `HS384`, `PS256` and
/// the rest are refused before any key is looked at.
enum TokenAlgorithm: String, Sendable, CaseIterable {
    case hs256 = "HS256", rs256 = "RS256", es256 = "ES256"
}

/// Why a token was refused; every case answers 401 and nothing is read or written.
enum AuthenticationFailure: Error, Equatable, CustomStringConvertible {
    case missing
    case notBearer
    case development(TokenError)
    case developmentDisabled
    case malformed(String)
    case algorithm(String?)
    case unknownKey(String)
    case noKeyID
    case algorithmMismatch(token: String, key: String, keyAlgorithm: TokenAlgorithm)
    case badSignature(key: String)
    case missingClaim(String)
    case expired(Date)
    case notYetValid(Date)
    case issuer(String?)
    case audience([String])
    case badUser(claim: String)

    var description: String {
        switch self {
        case .missing: "no bearer token (Authorization: Bearer <token>)"
        case .notBearer: "expected Authorization: Bearer <token>"
        case .development(let error): error.description
        case .developmentDisabled:
            "a development token (v1.…), but this server has no development secret (LEDGER_SERVER_SECRET): send a JWT"
        case .malformed(let why): "malformed token: \(why)"
        case .algorithm(let alg):
            "the token's algorithm \(alg.map { "'\($0)'" } ?? "(none given)") is not accepted (HS256, RS256 or ES256 with a configured key)"
        case .unknownKey(let kid): "no configured key has the token's key id '\(kid)' (removed in a rotation, or from another issuer)"
        case .noKeyID: "the token names no key (kid) and no key without an id is configured"
        case .algorithmMismatch(let token, let key, let keyAlgorithm):
            "the token says \(token) but key '\(key)' is \(keyAlgorithm.rawValue): refused"
        case .badSignature(let key): "the token's signature does not verify with key '\(key)' (forged, or signed with another key)"
        case .missingClaim(let name): "the token has no '\(name)' claim"
        case .expired(let date): "the token expired at \(Int64(date.timeIntervalSince1970)) (unix seconds)"
        case .notYetValid(let date): "the token is not valid before \(Int64(date.timeIntervalSince1970)) (unix seconds)"
        case .issuer(let iss): "the token's issuer \(iss.map { "'\($0)'" } ?? "(none)") is not the configured one"
        case .audience(let aud): "the token's audience \(aud) does not name this server's"
        case .badUser(let claim): "the '\(claim)' claim is not a user id (1–128 bytes of printable ASCII without spaces)"
        }
    }
}

/// The claims of an identity provider's JWT: the registered ones the server checks and every
/// top-level string or integer claim (one of them names the user), decoded by JWTKit.
struct ProviderClaims: JWTPayload {
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var iss: IssuerClaim?
    var aud: AudienceClaim?
    /// Top-level claims holding a string or an integer (as its decimal text).
    var values: [String: String]
    /// OAuth scopes: `scope` (space-separated) and `scp` (an array or a string).
    var scopes: [String]

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        exp = try container.decodeIfPresent(ExpirationClaim.self, forKey: Key("exp"))
        nbf = try container.decodeIfPresent(NotBeforeClaim.self, forKey: Key("nbf"))
        iss = try container.decodeIfPresent(IssuerClaim.self, forKey: Key("iss"))
        aud = try container.decodeIfPresent(AudienceClaim.self, forKey: Key("aud"))
        values = [:]
        scopes = []
        for key in container.allKeys {
            // A claim of another JSON type (an object, a list, a boolean) is not a user id: skipped.
            if let text = try? container.decode(String.self, forKey: key) {
                values[key.stringValue] = text
            } else if let number = try? container.decode(Int64.self, forKey: key) {
                values[key.stringValue] = String(number)
            }
        }
        if let scope = values["scope"] { scopes += scope.split(separator: " ").map(String.init) }
        // `scp` is a list of scopes at some providers, a space-separated string at others.
        if let scp = try? container.decode([String].self, forKey: Key("scp")) {
            scopes += scp
        } else if let scp = values["scp"] {
            scopes += scp.split(separator: " ").map(String.init)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (name, value) in values { try container.encode(value, forKey: Key(name)) }
        try container.encodeIfPresent(exp, forKey: Key("exp"))
        try container.encodeIfPresent(nbf, forKey: Key("nbf"))
        try container.encodeIfPresent(iss, forKey: Key("iss"))
        try container.encodeIfPresent(aud, forKey: Key("aud"))
    }

    /// The checks that depend on the server's configuration and clock run after JWTKit verified
    /// the signature (`IdentityVerifier.check`).
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// One key given by configuration (`--jwt-key` / `LEDGER_JWT_KEYS`): `KID:ALG:SOURCE`.
struct ConfiguredKey: Sendable, Equatable {
    enum Source: Sendable, Equatable {
        case file(String)
        case environment(String)
    }

    /// Empty: the key for tokens that name none.
    var kid: String
    var algorithm: TokenAlgorithm
    var source: Source

    /// `KID:ALG:file:PATH` or `KID:ALG:env:NAME`; KID may be empty.
    init(parsing text: String) throws(ConfigurationError) {
        let parts = text.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4 else {
            throw ConfigurationError("JWT key '\(text)': expected KID:ALG:file:PATH or KID:ALG:env:NAME")
        }
        guard let algorithm = TokenAlgorithm(rawValue: parts[1].uppercased()) else {
            throw ConfigurationError("JWT key '\(parts[0])': algorithm '\(parts[1])' is not HS256, RS256 or ES256")
        }
        guard !parts[3].isEmpty else { throw ConfigurationError("JWT key '\(parts[0])': empty \(parts[2])") }
        switch parts[2] {
        case "file": source = .file(parts[3])
        case "env": source = .environment(parts[3])
        default: throw ConfigurationError("JWT key '\(parts[0])': source '\(parts[2])' is not file:PATH or env:NAME")
        }
        kid = parts[0]
        self.algorithm = algorithm
    }

    /// The key's bytes: a file's content, or an environment variable's value.
    func material(environment: [String: String]) throws(ConfigurationError) -> Data {
        switch source {
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError("JWT key '\(kid)': cannot read \(path)")
            }
            // A secret file written by `echo` ends in a newline that is not part of the secret.
            return algorithm == .hs256 ? Data(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines).utf8) : data
        case .environment(let name):
            guard let value = environment[name], !value.isEmpty else {
                throw ConfigurationError("JWT key '\(kid)': the environment variable \(name) is not set")
            }
            return Data(value.utf8)
        }
    }
}

/// Where the server's verification keys and rules come from (docs/sync.md, "Configuration").
struct IdentityConfiguration: Sendable {
    var keys: [ConfiguredKey] = []
    var jwksFiles: [String] = []
    var jwksURL: URL?
    /// How old the keys of `jwksFiles` / `jwksURL` may get before they are read again.
    var jwksRefresh: Duration = .seconds(300)
    var userClaim = "sub"
    var issuer: String?
    var audiences: [String] = []
    var publishScope = "ledger:publish"
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    var leeway: Int64 = 60
    /// Accepts `ledger-server token`'s `v1.` tokens signed with it (development).
    var developmentSecret: String?

    var hasDynamicKeys: Bool { !jwksFiles.isEmpty || jwksURL != nil }
    var acceptsJWTs: Bool { !keys.isEmpty || hasDynamicKeys }
}

struct ConfigurationError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The keys in force: JWTKit's collection and each key id's algorithm (what a token's header
/// must say for that key).
struct KeyRing: Sendable {
    let collection: JWTKeyCollection
    let algorithms: [String: TokenAlgorithm]
    /// The algorithm of the key without an id, if one is configured.
    let anonymous: TokenAlgorithm?

    /// Builds the collection from the configured keys and JWKS documents; a key id given twice
    /// is an error (which key would a token mean?).
    static func build(keys: [ConfiguredKey], documents: [(origin: String, json: Data)], environment: [String: String],
                      logger: Logger) async throws(ConfigurationError) -> KeyRing {
        let collection = JWTKeyCollection()
        var algorithms: [String: TokenAlgorithm] = [:]
        var anonymous: (key: ConfiguredKey, material: Data)?
        for key in keys {
            let material = try key.material(environment: environment)
            if key.kid.isEmpty {
                guard anonymous == nil else { throw ConfigurationError("two JWT keys without a key id: give each a KID") }
                anonymous = (key, material)
                continue
            }
            guard algorithms[key.kid] == nil else { throw ConfigurationError("the JWT key id '\(key.kid)' is configured twice") }
            try await add(key, material: material, to: collection)
            algorithms[key.kid] = key.algorithm
        }
        for document in documents {
            for (kid, jwk, algorithm) in try jwks(document.json, origin: document.origin, logger: logger) {
                guard algorithms[kid] == nil else {
                    throw ConfigurationError("the key id '\(kid)' of \(document.origin) is configured twice")
                }
                do {
                    try await collection.add(jwk: jwk)
                } catch {
                    throw ConfigurationError("\(document.origin): key '\(kid)': \(error)")
                }
                algorithms[kid] = algorithm
            }
        }
        // Last: JWTKit's default key, the one a token without `kid` is verified with.
        if let anonymous { try await add(anonymous.key, material: anonymous.material, to: collection) }
        return KeyRing(collection: collection, algorithms: algorithms, anonymous: anonymous?.key.algorithm)
    }

    static func add(_ key: ConfiguredKey, material: Data, to collection: JWTKeyCollection) async throws(ConfigurationError) {
        let kid = key.kid.isEmpty ? nil : JWKIdentifier(string: key.kid)
        let name = key.kid.isEmpty ? "(no kid)" : key.kid
        let pem = String(decoding: material, as: UTF8.self)
        let isCertificate = pem.contains("-----BEGIN CERTIFICATE-----")
        do {
            switch key.algorithm {
            case .hs256:
                // RFC 7518 §3.2: a key at least as long as the hash.
                guard material.count >= 32 else { throw ConfigurationError("JWT key '\(name)': an HS256 secret needs at least 32 bytes, got \(material.count)") }
                guard !pem.contains("-----BEGIN") else {
                    throw ConfigurationError("JWT key '\(name)': HS256 takes a shared secret, not a PEM key (RS256/ES256?)")
                }
                await collection.add(hmac: HMACKey(from: material), digestAlgorithm: .sha256, kid: kid)
            case .rs256:
                let publicKey = isCertificate ? try Insecure.RSA.PublicKey(certificatePEM: pem) : try Insecure.RSA.PublicKey(pem: pem)
                await collection.add(rsa: publicKey, digestAlgorithm: .sha256, kid: kid)
            case .es256:
                let publicKey = isCertificate ? try ES256PublicKey(certificate: pem) : try ES256PublicKey(pem: pem)
                await collection.add(ecdsa: publicKey, kid: kid)
            }
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("JWT key '\(name)' (\(key.algorithm.rawValue)): not a usable public key in PEM: \(error)")
        }
    }

    /// The signing keys of a JWKS document (RFC 7517) the server can use: RS256 and ES256 keys
    /// with a `kid`. Keys for encryption (`"use": "enc"`) or of other algorithms are skipped
    /// and logged.
    static func jwks(_ json: Data, origin: String, logger: Logger) throws(ConfigurationError) -> [(String, JWK, TokenAlgorithm)] {
        let entries: [Any]
        do {
            guard let object = try JSONSerialization.jsonObject(with: json) as? [String: Any], let keys = object["keys"] as? [Any] else {
                throw ConfigurationError("\(origin): not a JWKS document ({\"keys\": [...]})")
            }
            entries = keys
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("\(origin): malformed JSON: \(error)")
        }
        var out: [(String, JWK, TokenAlgorithm)] = []
        for (i, entry) in entries.enumerated() {
            guard let fields = entry as? [String: Any] else { throw ConfigurationError("\(origin): keys[\(i)] is not an object") }
            let kid = fields["kid"] as? String
            let label = "\(origin): keys[\(i)]\(kid.map { " ('\($0)')" } ?? "")"
            if let use = fields["use"] as? String, use != "sig" {
                logger.notice("\(label): skipped (use '\(use)', not a signing key)")
                continue
            }
            guard let kid, !kid.isEmpty else { throw ConfigurationError("\(label): a key without a kid") }
            let algorithm: TokenAlgorithm
            switch (fields["alg"] as? String, fields["kty"] as? String, fields["crv"] as? String) {
            case ("RS256", "RSA", _), (nil, "RSA", _): algorithm = .rs256
            case ("ES256", "EC", "P-256"), (nil, "EC", "P-256"): algorithm = .es256
            case (let alg, let kty, let crv):
                logger.notice("\(label): skipped (alg \(alg ?? "-"), kty \(kty ?? "-"), crv \(crv ?? "-"): only RS256 and ES256 P-256 keys are used)")
                continue
            }
            var jwk: JWK
            do {
                jwk = try JSONDecoder().decode(JWK.self, from: JSONSerialization.data(withJSONObject: fields))
            } catch {
                throw ConfigurationError("\(label): not a valid \(algorithm.rawValue) key: \(error)")
            }
            // The key's algorithm is fixed here, never taken from a token's header.
            jwk.algorithm = algorithm == .rs256 ? .rs256 : .es256
            guard jwk.privateExponent == nil else { throw ConfigurationError("\(label): a private key; publish only public keys") }
            out.append((kid, jwk, algorithm))
        }
        return out
    }
}

/// Verifies bearer tokens: identity-provider JWTs against the configured keys (JWTKit), and in
/// development `ledger-server token`'s `v1.` tokens against the server's secret.
final class IdentityVerifier: Sendable {
    let configuration: IdentityConfiguration
    let development: TokenSigner?
    let environment: [String: String]
    let logger: Logger

    struct State: Sendable {
        var ring: KeyRing
        var loadedAt: ContinuousClock.Instant
        var reload: Task<KeyRing, Never>?
    }
    let state: Mutex<State>

    /// A token naming an unknown key reads the JWKS sources again at most this often (a key the
    /// provider just published is found; a flood of made-up key ids costs one read per interval).
    var forcedReloadInterval: Duration { min(configuration.jwksRefresh, .seconds(30)) }

    /// Loads every key (a JWKS URL is fetched once); throws with what is wrong.
    init(configuration: IdentityConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment,
         logger: Logger) async throws(ConfigurationError) {
        self.configuration = configuration
        self.environment = environment
        self.logger = logger
        if let secret = configuration.developmentSecret {
            guard secret.utf8.count >= 16 else { throw ConfigurationError("the development secret needs at least 16 bytes") }
            development = TokenSigner(secret: secret)
        } else {
            development = nil
        }
        guard configuration.acceptsJWTs || development != nil else {
            throw ConfigurationError("""
                no way to verify a token: configure the identity provider's keys (LEDGER_JWT_KEYS, LEDGER_JWKS_FILE, \
                LEDGER_JWKS_URL) or, for development, a secret (LEDGER_SERVER_SECRET)
                """)
        }
        guard !configuration.userClaim.isEmpty else { throw ConfigurationError("the user claim name is empty") }
        let ring = try await Self.load(configuration, environment: environment, logger: logger)
        state = Mutex(State(ring: ring, loadedAt: .now, reload: nil))
    }

    /// The configured keys plus the JWKS files and URL, read now.
    static func load(_ configuration: IdentityConfiguration, environment: [String: String],
                     logger: Logger) async throws(ConfigurationError) -> KeyRing {
        var documents: [(origin: String, json: Data)] = []
        for path in configuration.jwksFiles {
            guard let data = FileManager.default.contents(atPath: path) else { throw ConfigurationError("JWKS file \(path): cannot read it") }
            documents.append((path, data))
        }
        if let url = configuration.jwksURL { documents.append((url.absoluteString, try await fetch(url))) }
        return try await KeyRing.build(keys: configuration.keys, documents: documents, environment: environment, logger: logger)
    }

    /// GET the JWKS URL (10 s timeout, at most 1 MiB, status 200).
    static func fetch(_ url: URL) async throws(ConfigurationError) -> Data {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 10)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await URLSession.shared.data(for: request)
        } catch {
            throw ConfigurationError("JWKS URL \(url.absoluteString): \((error as NSError).localizedDescription)")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else { throw ConfigurationError("JWKS URL \(url.absoluteString): HTTP \(status)") }
        guard data.count <= 1 << 20 else { throw ConfigurationError("JWKS URL \(url.absoluteString): over 1 MiB") }
        return data
    }

    /// The keys in force; reads the JWKS sources again when they are older than the refresh
    /// interval (in the background: this request uses the current keys) or, with `force`, when
    /// a token names an unknown key (this request waits for the new keys).
    func ring(force: Bool) async -> KeyRing {
        guard configuration.hasDynamicKeys else { return state.withLock { $0.ring } }
        let (current, reload): (KeyRing, Task<KeyRing, Never>?) = state.withLock { s in
            if let running = s.reload { return (s.ring, running) }
            let age = ContinuousClock.now - s.loadedAt
            guard age >= configuration.jwksRefresh || (force && age >= forcedReloadInterval) else { return (s.ring, nil) }
            let task = Task { await self.reload() }
            s.reload = task
            return (s.ring, task)
        }
        guard force, let reload else { return current }
        return await reload.value
    }

    /// Reads the sources again; on failure keeps the keys in force (and says why).
    private func reload() async -> KeyRing {
        do {
            let ring = try await Self.load(configuration, environment: environment, logger: logger)
            state.withLock { s in
                s.ring = ring
                s.loadedAt = .now
                s.reload = nil
            }
            logger.info("JWT keys reloaded: \(ring.algorithms.keys.sorted())")
            return ring
        } catch {
            logger.warning("reloading the JWT keys failed (the keys in force stay): \(error)")
            return state.withLock { s in
                s.loadedAt = .now
                s.reload = nil
                return s.ring
            }
        }
    }

    /// What the server accepts, for the start-up log line.
    var summary: String {
        var parts: [String] = []
        if development != nil { parts.append("development tokens (v1., LEDGER_SERVER_SECRET)") }
        if configuration.acceptsJWTs {
            let ring = state.withLock { $0.ring }
            var keys = ring.algorithms.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.rawValue)" }
            if let anonymous = ring.anonymous { keys.append("(no kid) \(anonymous.rawValue)") }
            var rules = ["user claim '\(configuration.userClaim)'", "publish scope '\(configuration.publishScope)'"]
            if let issuer = configuration.issuer { rules.append("issuer '\(issuer)'") }
            if !configuration.audiences.isEmpty { rules.append("audience \(configuration.audiences)") }
            parts.append("JWTs verified with [\(keys.joined(separator: ", "))], \(rules.joined(separator: ", "))")
        }
        return "accepting " + parts.joined(separator: " and ")
    }

    /// The identity a bearer token proves, or why it proves none.
    func verify(_ token: String, now: Date = Date()) async throws(AuthenticationFailure) -> Identity {
        if token.hasPrefix("v1.") {
            guard let development else { throw .developmentDisabled }
            do {
                let claims = try development.verify(token, now: Int64(now.timeIntervalSince1970))
                return Identity(user: claims.sub, scope: claims.scope)
            } catch {
                throw .development(error)
            }
        }
        guard configuration.acceptsJWTs else { throw .malformed("this server accepts only development tokens (v1.…)") }
        guard token.utf8.count <= 16_384 else { throw .malformed("longer than 16384 bytes") }
        let header: JWTHeader
        do {
            header = try DefaultJWTParser().parse([UInt8](token.utf8), as: ProviderClaims.self).header
        } catch {
            throw .malformed("not a JWT (header.payload.signature, base64url JSON): \(error)")
        }
        guard let alg = header.alg, let algorithm = TokenAlgorithm(rawValue: alg) else { throw .algorithm(header.alg) }
        let kid = header.kid
        var ring = await ring(force: false)
        let keyAlgorithm: TokenAlgorithm
        if let kid {
            if ring.algorithms[kid] == nil, configuration.hasDynamicKeys { ring = await self.ring(force: true) }
            guard let known = ring.algorithms[kid] else { throw .unknownKey(kid) }
            keyAlgorithm = known
        } else {
            guard let anonymous = ring.anonymous else { throw .noKeyID }
            keyAlgorithm = anonymous
        }
        // The key decides the algorithm (RFC 8725 §3.1): an RS256 public key is never an HMAC secret.
        guard algorithm == keyAlgorithm else { throw .algorithmMismatch(token: alg, key: kid ?? "(no kid)", keyAlgorithm: keyAlgorithm) }
        let claims: ProviderClaims
        do {
            claims = try await ring.collection.verify(token, as: ProviderClaims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw .badSignature(key: kid ?? "(no kid)")
        } catch {
            throw .malformed("\(error)")
        }
        return try check(claims, now: now)
    }

    /// Time, issuer, audience, user and scope, by the configuration.
    func check(_ claims: ProviderClaims, now: Date) throws(AuthenticationFailure) -> Identity {
        let leeway = TimeInterval(configuration.leeway)
        guard let exp = claims.exp else { throw .missingClaim("exp") }
        do {
            try exp.verifyNotExpired(currentDate: now.addingTimeInterval(-leeway))
        } catch {
            throw .expired(exp.value)
        }
        if let nbf = claims.nbf {
            do {
                try nbf.verifyNotBefore(currentDate: now.addingTimeInterval(leeway))
            } catch {
                throw .notYetValid(nbf.value)
            }
        }
        if let issuer = configuration.issuer, claims.iss?.value != issuer { throw .issuer(claims.iss?.value) }
        if !configuration.audiences.isEmpty {
            let audience = claims.aud?.value ?? []
            guard audience.contains(where: configuration.audiences.contains) else { throw .audience(audience) }
        }
        guard let user = claims.values[configuration.userClaim] else { throw .missingClaim(configuration.userClaim) }
        guard Identity.isValidUser(user) else { throw .badUser(claim: configuration.userClaim) }
        return Identity(user: user, scope: claims.scopes.contains(configuration.publishScope) ? .publish : .device)
    }
}
