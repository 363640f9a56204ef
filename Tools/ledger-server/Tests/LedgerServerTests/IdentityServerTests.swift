import Crypto
import CryptoExtras
import Foundation
import Hummingbird
import InboxLedger
import InboxLedgerSync
import JWTKit
import Logging
import Synchronization
import Testing

/// The claims an identity provider puts in its tokens (whatever the test needs; nil: absent).
struct ProviderTestClaims: JWTPayload {
    var sub: String?
    var uid: String?
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var iss: IssuerClaim?
    var aud: AudienceClaim?
    var scope: String?

    init(sub: String? = nil, uid: String? = nil, expiresIn: TimeInterval = 3600, notBefore: TimeInterval? = nil,
         iss: String? = nil, aud: [String]? = nil, scope: String? = nil) {
        self.sub = sub
        self.uid = uid
        exp = ExpirationClaim(value: Date().addingTimeInterval(expiresIn))
        nbf = notBefore.map { NotBeforeClaim(value: Date().addingTimeInterval($0)) }
        self.iss = iss.map { IssuerClaim(value: $0) }
        self.aud = aud.map { AudienceClaim(value: $0) }
        self.scope = scope
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// An identity provider of the tests: its keys, in PEM and JWKS form, and the tokens it signs.
struct TestProvider {
    /// 32+ bytes, the RFC 7518 minimum for HS256.
    static let hmacSecret = "hs256-secret-of-the-backend-0123456789"
    let rsa = try? _RSA.Signing.PrivateKey(keySize: .bits2048)
    let ec = ES256PrivateKey()

    func rsaKey() throws -> JWTKit.Insecure.RSA.PrivateKey {
        guard let rsa else { throw HarnessError(description: "RSA key generation failed") }
        return try JWTKit.Insecure.RSA.PrivateKey(backing: rsa)
    }

    func rsaPublicPEM() throws -> String { try rsaKey().publicKey.pemRepresentation }
    var ecPublicPEM: String { ec.publicKey.pemRepresentation }

    /// A JWKS document with the RSA key as `rsaKid` and the EC key as `ecKid` (either omitted when nil).
    func jwks(rsaKid: String?, ecKid: String?) throws -> Data {
        var keys: [[String: String]] = []
        if let rsaKid {
            let (n, e) = try rsaKey().publicKey.getKeyPrimitives()
            keys.append(["kty": "RSA", "kid": rsaKid, "use": "sig", "alg": "RS256", "n": n.base64URL, "e": e.base64URL])
        }
        if let ecKid, let parameters = ec.publicKey.parameters {
            // No "alg": the server infers ES256 from the P-256 curve.
            keys.append(["kty": "EC", "kid": ecKid, "crv": "P-256", "x": parameters.x, "y": parameters.y])
        }
        // A key the server must skip: for encryption.
        keys.append(["kty": "RSA", "kid": "enc-1", "use": "enc", "n": "AQAB", "e": "AQAB"])
        return try JSONSerialization.data(withJSONObject: ["keys": keys])
    }

    enum Signer { case hs256(String), rs256, es256 }

    func token(_ claims: ProviderTestClaims, signer: Signer, kid: String?) async throws -> String {
        let keys = JWTKeyCollection()
        let id = kid.map { JWKIdentifier(string: $0) }
        switch signer {
        case .hs256(let secret): await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: id)
        case .rs256: await keys.add(rsa: try rsaKey(), digestAlgorithm: .sha256, kid: id)
        case .es256: await keys.add(ecdsa: ec, kid: id)
        }
        return try await keys.sign(claims, kid: id)
    }

    /// A token put together by hand: any header, an HMAC-SHA256 with `secret`, or no signature.
    static func handmade(header: [String: String], claims: ProviderTestClaims, hmac secret: Data?) throws -> String {
        let input = try JSONSerialization.data(withJSONObject: header).base64URL + "." + JSONEncoder().encode(claims).base64URL
        guard let secret else { return input + "." }
        let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: secret))
        return input + "." + Data(mac).base64URL
    }
}

extension Data {
    var base64URL: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// A user's up request of one `message.read` on `ledger`.
func oneRead(_ ledger: String) throws -> Data {
    let read = SyncWire.UpEvent(Event(sequence: 1, timestampMicros: 1, origin: Origin(role: "t"), type: "message.read", key: nil,
                                      payload: Array(#"{"ids":["m1"],"read":true}"#.utf8)))
    return try JSONEncoder().encode(SyncWire.UpRequest(ledger: ledger, after: 0, through: 1, events: [read]))
}

/// Writes `text` to a new file of the harness's directory; returns its path.
func writeFile(_ harness: Harness, _ name: String, _ data: Data) throws -> String {
    let path = harness.directory + "/" + name
    try data.write(to: URL(fileURLWithPath: path))
    return path
}

/// The user a token proves (`GET /v1/down`'s `user`), or the refusal's status and message.
func whoAmI(_ url: URL, _ token: String) async throws -> Result<String, HarnessError> {
    let (status, data) = try await http("GET", url, "/v1/down", token: token)
    guard status == 200 else {
        let message = (try? JSONDecoder().decode(SyncWire.ErrorBody.self, from: data))?.message ?? String(decoding: data, as: UTF8.self)
        return .failure(HarnessError(description: "\(status): \(message)"))
    }
    return .success(try JSONDecoder().decode(SyncWire.DownResponse.self, from: data).user)
}

/// A JWKS URL on loopback: a Hummingbird server in the test process serving whatever `document`
/// holds at `/jwks.json`, counting the fetches.
final class JWKSServer: Sendable {
    let document: Mutex<Data>
    let fetches = Mutex(0)
    let port = Mutex<Int?>(nil)
    let task = Mutex<Task<Void, any Error>?>(nil)

    init(_ document: Data) async throws {
        self.document = Mutex(document)
        let router = Router()
        router.get("/jwks.json") { [self] _, _ in
            fetches.withLock { $0 += 1 }
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: self.document.withLock { $0 })))
        }
        // Quiet: it stops by cancellation, which Hummingbird logs as errors.
        var logger = Logger(label: "jwks-server")
        logger.logLevel = .critical
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { [self] channel in port.withLock { $0 = channel.localAddress?.port } }, logger: logger)
        task.withLock { $0 = Task { try await app.runService() } }
        try await waitFor("the JWKS server's port") { port.withLock { $0 } != nil }
    }

    var url: String { "http://127.0.0.1:\(port.withLock { $0 } ?? 0)/jwks.json" }

    func stop() { task.withLock { $0?.cancel() } }
}

@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct IdentityServerTests {
    /// HS256 (with a kid, from a file), RS256 and ES256 (PEM files) at once; the configured claim
    /// names the user; a JWT publish token lists messages; the refusals of docs/sync.md,
    /// "Authentication", each a 401 with nothing read or written.
    @Test func providerTokensAcceptedAndRefused() async throws {
        try await withHarness { h in
            let idp = TestProvider()
            let hsFile = try writeFile(h, "hs.secret", Data((TestProvider.hmacSecret + "\n").utf8))
            let rsaPEM = try idp.rsaPublicPEM()
            let rsaFile = try writeFile(h, "rsa.pem", Data(rsaPEM.utf8))
            let ecFile = try writeFile(h, "ec.pem", Data(idp.ecPublicPEM.utf8))
            let (_, url) = try await h.startServer(
                ["--port", "0", "--database-url", h.databaseURL,
                 "--jwt-key", "backend-1:HS256:file:\(hsFile)", "--jwt-key", "idp-rsa:RS256:file:\(rsaFile)",
                 "--jwt-key", "idp-ec:ES256:file:\(ecFile)", "--user-claim", "uid",
                 "--issuer", "https://idp.example", "--audience", "inbox-sync"])
            func claims(_ uid: String?, expiresIn: TimeInterval = 3600, notBefore: TimeInterval? = nil, iss: String? = "https://idp.example",
                        aud: [String]? = ["inbox-sync"], scope: String? = nil) -> ProviderTestClaims {
                ProviderTestClaims(sub: "ignored-subject", uid: uid, expiresIn: expiresIn, notBefore: notBefore, iss: iss, aud: aud, scope: scope)
            }
            // Accepted: each algorithm with its key; the user is the `uid` claim, not `sub`.
            let hs = try await idp.token(claims("auth0|alice"), signer: .hs256(TestProvider.hmacSecret), kid: "backend-1")
            let rs = try await idp.token(claims("auth0|alice"), signer: .rs256, kid: "idp-rsa")
            let es = try await idp.token(claims("bob@example.com", aud: ["other-app", "inbox-sync"]), signer: .es256, kid: "idp-ec")
            #expect(try await whoAmI(url, hs).get() == "auth0|alice")
            #expect(try await whoAmI(url, rs).get() == "auth0|alice")
            #expect(try await whoAmI(url, es).get() == "bob@example.com")
            // A publish token: the configured scope among others.
            let publisher = try await idp.token(claims("auth0|alice", scope: "openid ledger:publish"), signer: .rs256, kid: "idp-rsa")
            try await publish(url, token: publisher, ids: ["m1"])
            #expect(try await http("POST", url, "/v1/publish", token: rs, body: Data("{}".utf8)).status == 403)
            #expect(try await http("POST", url, "/v1/up", token: rs, body: try oneRead("alice-phone")).status == 200)
            #expect(try await http("POST", url, "/v1/up", token: publisher, body: try oneRead("alice-phone")).status == 403)
            let before = try await serverState(url, token: hs)
            #expect(before.user == "auth0|alice" && before.deviceEvents == 1 && before.messages.map(\.id) == ["m1"])

            // Refused, each with its reason.
            let alice = claims("auth0|alice")
            let pemAsSecret = try TestProvider.handmade(header: ["alg": "HS256", "kid": "idp-rsa", "typ": "JWT"], claims: alice,
                                                        hmac: Data(rsaPEM.utf8))
            let pemFileAsSecret = try TestProvider.handmade(header: ["alg": "HS256", "kid": "idp-rsa"], claims: alice,
                                                            hmac: FileManager.default.contents(atPath: rsaFile))
            let unsigned = try TestProvider.handmade(header: ["alg": "none", "kid": "backend-1"], claims: alice, hmac: nil)
            let unsignedNoKid = try TestProvider.handmade(header: ["alg": "none"], claims: alice, hmac: nil)
            let otherSecret = try await idp.token(alice, signer: .hs256("another-secret-of-32-bytes-at-least!"), kid: "backend-1")
            let otherRSA = try await TestProvider().token(alice, signer: .rs256, kid: "idp-rsa")
            let otherEC = try await TestProvider().token(alice, signer: .es256, kid: "idp-ec")
            // Bob's claims under Alice's signature.
            let bobs = try await idp.token(claims("bob"), signer: .rs256, kid: "idp-rsa").split(separator: ".")
            let parts = rs.split(separator: ".")
            let spliced = [parts[0], bobs[1], parts[2]].joined(separator: ".")
            let refused: [(String, String, String)] = [
                ("expired", try await idp.token(claims("auth0|alice", expiresIn: -600), signer: .rs256, kid: "idp-rsa"), "expired"),
                ("not yet valid", try await idp.token(claims("auth0|alice", notBefore: 600), signer: .es256, kid: "idp-ec"), "not valid before"),
                ("no exp", try await idp.token(ProviderTestClaims(uid: "auth0|alice", expiresIn: 0, iss: "https://idp.example", aud: ["inbox-sync"])
                    .withoutExpiry, signer: .rs256, kid: "idp-rsa"), "no 'exp'"),
                ("wrong issuer", try await idp.token(claims("auth0|alice", iss: "https://evil.example"), signer: .rs256, kid: "idp-rsa"), "issuer"),
                ("no issuer", try await idp.token(claims("auth0|alice", iss: nil), signer: .rs256, kid: "idp-rsa"), "issuer"),
                ("wrong audience", try await idp.token(claims("auth0|alice", aud: ["other-app"]), signer: .es256, kid: "idp-ec"), "audience"),
                ("no user claim", try await idp.token(claims(nil), signer: .rs256, kid: "idp-rsa"), "no 'uid' claim"),
                ("user with a space", try await idp.token(claims("alice smith"), signer: .rs256, kid: "idp-rsa"), "not a user id"),
                ("alg none", unsigned, "algorithm 'none'"),
                ("alg none without kid", unsignedNoKid, "algorithm 'none'"),
                ("RS256 public key as HS256 secret", pemAsSecret, "says HS256 but key 'idp-rsa' is RS256"),
                ("RS256 key file as HS256 secret", pemFileAsSecret, "says HS256 but key 'idp-rsa' is RS256"),
                ("HS256 with another secret", otherSecret, "signature"),
                ("RS256 with another key", otherRSA, "signature"),
                ("ES256 with another key", otherEC, "signature"),
                ("claims spliced under another signature", spliced, "signature"),
                ("unknown kid", try await idp.token(alice, signer: .rs256, kid: "idp-rsa-old"), "key id 'idp-rsa-old'"),
                ("no kid", try await idp.token(alice, signer: .rs256, kid: nil), "names no key"),
                ("ES256 signature under the RSA kid", try await idp.token(alice, signer: .es256, kid: "idp-rsa"), "says ES256 but key 'idp-rsa' is RS256"),
                ("development token on a server without a secret", try await h.token("auth0-alice"), "development"),
                ("not a JWT", "abc.def.ghi", "malformed"),
            ]
            for (what, token, reason) in refused {
                for (method, path) in [("POST", "/v1/up"), ("GET", "/v1/down"), ("GET", "/v1/state"), ("POST", "/v1/publish")] {
                    let body = path == "/v1/up" ? try oneRead("alice-tablet")
                        : path == "/v1/publish" ? try JSONEncoder().encode(SyncWire.PublishRequest(messages: [InboxMessage(id: "forged", title: "x", sentAt: Timestamp(micros: 1))]))
                        : nil
                    let (status, data) = try await http(method, url, path, token: token, body: body)
                    let error = try? JSONDecoder().decode(SyncWire.ErrorBody.self, from: data)
                    #expect(status == 401, "\(what): \(method) \(path) answered \(status)")
                    #expect(error?.error == "unauthorized" && error?.message.contains(reason) == true,
                            "\(what): expected '\(reason)' in \(error?.message ?? String(decoding: data, as: UTF8.self))")
                }
            }
            // Nothing was written by any of them.
            #expect(try await serverState(url, token: hs) == before)
        }
    }

    /// Rotation with configured keys: two keys at once (old and new), then the old one removed
    /// (a restart with the new list, by the environment): its tokens are refused, the new key's
    /// are accepted. The development secret and the keys together, from files and the environment.
    @Test func rotationOfConfiguredKeys() async throws {
        try await withHarness { h in
            let idp = TestProvider()
            let oldSecret = "old-secret-of-the-backend-0123456789"
            let newSecretFile = try writeFile(h, "new.secret", Data("new-secret-of-the-backend-0123456789\n".utf8))
            let rsaFile = try writeFile(h, "rsa.pem", Data(try idp.rsaPublicPEM().utf8))
            let ecFile = try writeFile(h, "ec.pem", Data(idp.ecPublicPEM.utf8))
            let databaseURLFile = try writeFile(h, "database-url", Data((h.databaseURL + "\n").utf8))
            let secretFile = try writeFile(h, "dev.secret", Data(Harness.secret.utf8))
            var environment = [
                "DATABASE_URL_FILE": databaseURLFile, "LEDGER_SERVER_SECRET_FILE": secretFile, "OLD_SECRET": oldSecret,
                "LEDGER_JWT_KEYS": "2026-01:HS256:env:OLD_SECRET, 2026-02:HS256:file:\(newSecretFile),idp:RS256:file:\(rsaFile)",
            ]
            let first = try await h.startServer(["--port", "0"], environment: environment)
            let old = try await idp.token(ProviderTestClaims(sub: "carol"), signer: .hs256(oldSecret), kid: "2026-01")
            let new = try await idp.token(ProviderTestClaims(sub: "carol"), signer: .hs256("new-secret-of-the-backend-0123456789"), kid: "2026-02")
            let rs = try await idp.token(ProviderTestClaims(sub: "carol"), signer: .rs256, kid: "idp")
            let development = try await h.token("carol")
            for token in [old, new, rs, development] { #expect(try await whoAmI(first.url, token).get() == "carol") }
            // The old key swapped for the new one under its id: refused (its signature, not a
            // fallback to another key).
            let oldUnderNewKid = try await idp.token(ProviderTestClaims(sub: "carol"), signer: .hs256(oldSecret), kid: "2026-02")
            #expect("\(try await whoAmI(first.url, oldUnderNewKid))".contains("signature does not verify with key '2026-02'"))

            first.child.kill()
            // Plus a key without an id: it verifies the tokens that name none.
            environment["LEDGER_JWT_KEYS"] = "2026-02:HS256:file:\(newSecretFile) idp:RS256:file:\(rsaFile) :ES256:file:\(ecFile)"
            environment["LEDGER_SERVER_SECRET_FILE"] = nil
            let second = try await h.startServer(["--port", "0"], environment: environment)
            #expect("\(try await whoAmI(second.url, old))".contains("key id '2026-01'"))
            #expect(try await whoAmI(second.url, new).get() == "carol")
            #expect(try await whoAmI(second.url, rs).get() == "carol")
            let withoutKid = try await idp.token(ProviderTestClaims(sub: "carol"), signer: .es256, kid: nil)
            #expect(try await whoAmI(second.url, withoutKid).get() == "carol")
            let otherWithoutKid = try await TestProvider().token(ProviderTestClaims(sub: "carol"), signer: .es256, kid: nil)
            #expect("\(try await whoAmI(second.url, otherWithoutKid))".contains("does not verify with key '(no kid)'"))
            let hsWithoutKid = try await idp.token(ProviderTestClaims(sub: "carol"), signer: .hs256("new-secret-of-the-backend-0123456789"), kid: nil)
            #expect("\(try await whoAmI(second.url, hsWithoutKid))".contains("says HS256 but key '(no kid)' is ES256"))
            // Development tokens need the development secret.
            #expect("\(try await whoAmI(second.url, development))".contains("no development secret"))
        }
    }

    /// A JWKS file and a JWKS URL (a server on loopback): RS256 and ES256 keys (one without
    /// `alg`), an encryption key skipped; a key the provider publishes later is found when a
    /// token names it; a key it withdraws is refused once the document is read again.
    @Test func jwksFileAndURL() async throws {
        try await withHarness { h in
            let idp = TestProvider(), next = TestProvider()
            let file = try writeFile(h, "jwks.json", try idp.jwks(rsaKid: "file-rsa", ecKid: "file-ec"))
            let remote = try await JWKSServer(try idp.jwks(rsaKid: "url-rsa", ecKid: nil))
            defer { remote.stop() }
            let (_, url) = try await h.startServer(
                ["--port", "0", "--database-url", h.databaseURL, "--jwks-refresh", "1"],
                environment: ["LEDGER_JWKS_FILE": file, "LEDGER_JWKS_URL": remote.url])
            let dave = ProviderTestClaims(sub: "dave")
            #expect(try await whoAmI(url, try await idp.token(dave, signer: .rs256, kid: "file-rsa")).get() == "dave")
            #expect(try await whoAmI(url, try await idp.token(dave, signer: .es256, kid: "file-ec")).get() == "dave")
            let viaURL = try await idp.token(dave, signer: .rs256, kid: "url-rsa")
            #expect(try await whoAmI(url, viaURL).get() == "dave")
            #expect("\(try await whoAmI(url, try await idp.token(dave, signer: .rs256, kid: "enc-1")))".contains("key id 'enc-1'"))
            // Alg confusion with a JWKS key: its public key's PEM as an HMAC secret.
            let confused = try TestProvider.handmade(header: ["alg": "HS256", "kid": "url-rsa"], claims: dave,
                                                     hmac: Data(try idp.rsaPublicPEM().utf8))
            #expect("\(try await whoAmI(url, confused))".contains("says HS256 but key 'url-rsa' is RS256"))

            // Rotation at the provider: a new key published beside the old, then the old withdrawn.
            let nextToken = try await next.token(dave, signer: .es256, kid: "url-ec-2")
            var both = try JSONSerialization.jsonObject(with: try idp.jwks(rsaKid: "url-rsa", ecKid: nil)) as? [String: [Any]] ?? [:]
            let added = try JSONSerialization.jsonObject(with: try next.jwks(rsaKid: nil, ecKid: "url-ec-2")) as? [String: [Any]] ?? [:]
            both["keys", default: []] += added["keys", default: []]
            remote.document.withLock { $0 = (try? JSONSerialization.data(withJSONObject: both)) ?? Data() }
            // The unknown kid makes the server read the URL again (at most once a refresh interval).
            try await waitForAsync("the new key fetched") { (try? await whoAmI(url, nextToken).get()) == "dave" }
            #expect(try await whoAmI(url, viaURL).get() == "dave")
            remote.document.withLock { $0 = (try? next.jwks(rsaKid: nil, ecKid: "url-ec-2")) ?? Data() }
            // Refused once the periodic read (every second here) sees the key gone.
            try await waitForAsync("the withdrawn key refused") { "\(try await whoAmI(url, viaURL))".contains("key id 'url-rsa'") }
            #expect(try await whoAmI(url, nextToken).get() == "dave")
            #expect(remote.fetches.withLock { $0 } >= 3)
        }
    }

    /// The device flow with a provider's token: `ledger sync`'s client sends a JWT as it sends a
    /// development token; two devices of one user converge.
    @Test func devicesSyncWithProviderTokens() async throws {
        try await withHarness { h in
            let idp = TestProvider()
            let rsaFile = try writeFile(h, "rsa.pem", Data(try idp.rsaPublicPEM().utf8))
            let (_, url) = try await h.startServer(["--port", "0", "--database-url", h.databaseURL, "--jwt-key", "idp:RS256:file:\(rsaFile)"])
            let token = try await idp.token(ProviderTestClaims(sub: "google-oauth2|1234"), signer: .rs256, kid: "idp")
            let publisher = try await idp.token(ProviderTestClaims(sub: "google-oauth2|1234", scope: "ledger:publish"), signer: .rs256, kid: "idp")
            try await publish(url, token: publisher, ids: ["m1", "m2"])
            let a = try deviceLedger(h, "a"), b = try deviceLedger(h, "b")
            try await a.ledger.append(DomainEvent.messageRead(ReadChange(ids: ["m1"], read: true)))
            for device in [a, b, a, b] {
                let client = try SyncClient(ledger: device.ledger, configuration: SyncConfiguration(server: url, token: token, stateFile: device.state))
                _ = try await client.syncOnce()
            }
            let state = try await serverState(url, token: token)
            #expect(state.user == "google-oauth2|1234" && state.messages.first { $0.id == "m1" }?.read == true)
            #expect(downCursor(a.state) == downCursor(b.state) && downCursor(b.state) == state.head)
        }
    }
}

extension ProviderTestClaims {
    var withoutExpiry: ProviderTestClaims {
        var copy = self
        copy.exp = nil
        return copy
    }
}
