import Foundation
import HTTPTypes
import Hummingbird
import InboxLedgerSync
import Logging
import NIOCore

/// An answer other than 200: a code of the protocol (its status), what was wrong; nothing was
/// written. Thrown by handlers; Hummingbird writes it (``response(from:context:)``).
struct APIError: Error, HTTPResponseError {
    /// The protocol's code (the body's `error`), which decides the status.
    var code: SyncWire.ErrorCode
    /// What was wrong and where (the body's `message`).
    var message: String
    /// For `gap`: what the server holds (the body's `acked`).
    var acked: UInt64?
    /// For a `bad_request` caused by one event's content: its sequence (the body's `seq`).
    var seq: UInt64?

    /// An answer of `code` saying `message`.
    init(_ code: SyncWire.ErrorCode, _ message: String, acked: UInt64? = nil) {
        self.code = code
        self.message = message
        self.acked = acked
    }

    /// `400 bad_request`.
    static func badRequest(_ message: String) -> APIError { APIError(.badRequest, message) }
    /// `401 unauthorized`.
    static func unauthorized(_ message: String) -> APIError { APIError(.unauthorized, message) }
    /// `403 forbidden`.
    static func forbidden(_ message: String) -> APIError { APIError(.forbidden, message) }

    /// The code's status.
    var status: HTTPResponse.Status { .init(code: code.status) }

    /// ``body``, whatever the request.
    func response(from request: Request, context: some RequestContext) throws -> Response { body }

    /// `{"error": code, "message": …}` with the code's status.
    var body: Response {
        let body = SyncWire.ErrorBody(error: code.rawValue, message: message, acked: acked, seq: seq)
        // A struct of strings and an integer always encodes; the fallback only keeps this total.
        let data = (try? JSONEncoder().encode(body)) ?? Data(#"{"error":"internal","message":"unencodable error"}"#.utf8)
        return Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// Every error a handler throws becomes its protocol answer: ``APIError`` as it is, a store's
/// failures as its ``SyncStore/apiError(for:)`` maps them (``PostgresStore``: 403/409/429 raised
/// by `ledger_up_v3`, 400 for a value PostgreSQL refused, 503 when it is unreachable), anything
/// else a logged 500. Hummingbird's own errors (404, 405, the authenticator's 401) pass through.
struct ErrorAnswers<Context: RequestContext, Store: SyncStore>: RouterMiddleware {
    /// Maps the store's errors.
    let store: Store
    /// Where a 500's cause is logged.
    let logger: Logger

    /// Runs the rest of the chain and answers its error.
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPResponseError where !(error is APIError) {
            throw error  // Hummingbird's own (404, 405, …)
        } catch {
            if let mapped = store.apiError(for: error) { return mapped.body }
            logger.error("\(request.method) \(request.uri.path) failed: \(error)")
            return APIError(.internal, "internal error; nothing was acknowledged").body
        }
    }
}
