import Foundation
import Hummingbird
import HummingbirdAuth
import InboxLedgerSync
import NIOCore

/// Checks the bearer token of every request of the routes it guards, before their handler reads
/// anything: a verified token puts its `Identity` in the context; anything else ends the request
/// with `401` (an `AuthenticationError`), nothing read or written.
struct TokenAuthenticator: AuthenticatorMiddleware {
    typealias Context = LedgerRequestContext
    let verifier: IdentityVerifier

    func authenticate(request: Request, context: Context) async throws -> Identity? {
        guard let header = request.headers[.authorization] else { throw AuthenticationError(.missing) }
        guard header.hasPrefix("Bearer ") else { throw AuthenticationError(.notBearer) }
        do {
            return try await verifier.verify(String(header.dropFirst(7)))
        } catch {
            context.logger.info("token refused: \(error)")
            throw AuthenticationError(error)
        }
    }
}

/// A refused token: `401` with the API's error body (`{"error": "unauthorized", "message": …}`)
/// and `WWW-Authenticate: Bearer` (RFC 6750).
struct AuthenticationError: HTTPResponseError {
    let failure: AuthenticationFailure
    init(_ failure: AuthenticationFailure) { self.failure = failure }

    var status: HTTPResponse.Status { .unauthorized }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = try JSONEncoder().encode(SyncWire.ErrorBody(error: "unauthorized", message: failure.description, acked: nil))
        let challenge = failure == .missing ? "Bearer" : #"Bearer error="invalid_token""#
        return Response(status: status, headers: [.contentType: "application/json", .wwwAuthenticate: challenge],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}
