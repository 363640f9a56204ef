import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import InboxLedgerSync
import Logging
import Testing
@testable import ledger_server

/// The server composed by `buildApplication`, run in this process against the harness's
/// PostgreSQL (item 7: testable in-process; no child process, no port to find).
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct InProcessServerTests {
    @Test func buildApplicationServesTheProtocolInProcess() async throws {
        try await withHarness { h in
            let settings = ServerSettings(port: 0, database: try DatabaseURL(h.databaseURL),
                                          identity: IdentityConfiguration(developmentSecret: Harness.secret))
            let app = try await buildApplication(settings, logger: Logger(label: "in-process"))
            let signer = TokenSigner(secret: Harness.secret)
            let token = try signer.sign(Claims(sub: "ivy", scope: .device, exp: Int64(Date().timeIntervalSince1970) + 600))
            try await app.test(.live) { client in
                let health = try await client.executeRequest(uri: SyncWire.Endpoint.health.rawValue, method: .get, headers: [:], body: nil)
                #expect(health.status == .ok)
                let decoded = try JSONDecoder().decode(SyncWire.Health.self, from: Data(buffer: health.body))
                #expect(decoded.ok && decoded.database == "ok")
                let body = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "I", after: 0, through: 2, events: []))
                let up = try await client.executeRequest(uri: SyncWire.Endpoint.up.rawValue, method: .post,
                                                         headers: [.authorization: "Bearer \(token)"], body: ByteBuffer(data: body))
                #expect(up.status == .ok)
                #expect(try JSONDecoder().decode(SyncWire.UpResponse.self, from: Data(buffer: up.body)).acked == 2)
                // An error is the protocol's body with its status (APIError, an HTTPResponseError).
                let refused = try await client.executeRequest(uri: SyncWire.Endpoint.up.rawValue, method: .post, headers: [:], body: ByteBuffer(data: body))
                #expect(refused.status == .unauthorized)
                #expect(try JSONDecoder().decode(SyncWire.ErrorBody.self, from: Data(buffer: refused.body)).error == SyncWire.ErrorCode.unauthorized.rawValue)
            }
        }
    }
}
