import Foundation
import HTTPTypes
import Hummingbird
import InboxLedger
import InboxLedgerSync
import Logging
import NIOCore
import PostgresNIO

/// The HTTP side: authentication, bounded bodies, validation, and JSON answers (docs/sync.md).
struct API: Sendable {
    let store: Store
    let notifier: FeedNotifier
    let maxBodyBytes: Int

    static let maxEvents = 1000
    static let maxPayloadBytes = 65_536

    /// The routes; `authenticator` checks the token of every `/v1` request before its handler.
    func routes(_ router: Router<LedgerRequestContext>, authenticator: TokenAuthenticator) {
        router.get("/healthz") { _, _ in try Self.json(["ok": true]) }
        let v1 = router.group().add(middleware: authenticator)
        v1.post("/v1/up") { request, context in await self.answer { try await self.up(request, context) } }
        v1.get("/v1/down") { request, context in await self.answer { try await self.down(request, context) } }
        v1.post("/v1/publish") { request, context in await self.answer { try await self.publish(request, context) } }
        v1.get("/v1/state") { request, context in await self.answer { try await self.state(request, context) } }
    }

    // MARK: - Handlers

    func up(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let claims = try authenticate(context, scope: .device)
        let body: SyncWire.UpRequest = try await decodeBody(request, context)
        let validated = try validate(body)
        let (answer, feedEntries) = try await store.up(user: claims.user, request: body, validated: validated)
        if feedEntries > 0 { notifier.announce(claims.user) }  // after the commit: the long polls re-read
        return try Self.json(answer)
    }

    func down(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let claims = try authenticate(context, scope: .device)
        let query = request.uri.queryParameters
        let after = try Self.number(query["after"], name: "after", default: 0, range: 0...UInt64(Int64.max))
        let limit = Int(try Self.number(query["limit"], name: "limit", default: 500, range: 1...1000))
        let wait = Int(try Self.number(query["wait"], name: "wait", default: 0, range: 0...30))
        let deadline = ContinuousClock.now + .seconds(wait)
        while true {
            let ticket = notifier.arm(claims.user)  // before the read: a change in between is not missed
            let page = try await store.feed(user: claims.user, after: after, limit: limit)
            let now = ContinuousClock.now
            if !page.changes.isEmpty || now >= deadline {
                notifier.disarm(ticket)
                return try Self.json(page)
            }
            await notifier.wait(ticket, timeout: min(deadline - now, .seconds(1)))
        }
    }

    func publish(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let claims = try authenticate(context, scope: .publish)
        let body: SyncWire.PublishRequest = try await decodeBody(request, context)
        guard !body.messages.isEmpty || !(body.removed ?? []).isEmpty else { throw APIError.badRequest("nothing to publish") }
        // The ledger's own validation of a listing (ids, dates, duplicates), before anything is written.
        do {
            let payload = try DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: body.messages, removed: body.removed ?? [])).newEvent().payload
            _ = try DomainEvent.decode(type: BuiltInEventType.inboxSynced.rawValue, payload: payload)
        } catch {
            throw APIError.badRequest("invalid listing: \(error)")
        }
        return try Self.json(try await store.publish(user: claims.user, request: body))
    }

    func state(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let claims = try authenticate(context, scope: nil)
        return try Self.json(try await store.state(user: claims.user))
    }

    // MARK: - Checks

    /// The identity `TokenAuthenticator` proved, if its scope allows the endpoint.
    func authenticate(_ context: LedgerRequestContext, scope: Claims.Scope?) throws -> Identity {
        guard let claims = context.identity else { throw APIError.unauthorized(AuthenticationFailure.missing.description) }
        if let scope, claims.scope != scope {
            throw APIError.forbidden("a \(claims.scope.rawValue) token cannot call this endpoint (needs \(scope.rawValue))")
        }
        return claims
    }

    func decodeBody<T: Decodable>(_ request: Request, _ context: LedgerRequestContext) async throws -> T {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: maxBodyBytes)
        } catch let error as HTTPResponseError where error.status == .contentTooLarge {
            throw APIError(status: 413, code: "too_large", message: "the body exceeds \(maxBodyBytes) bytes")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch let DecodingError.keyNotFound(key, ctx) {
            throw APIError.badRequest("missing field \(Self.path(ctx.codingPath + [key]))")
        } catch let DecodingError.typeMismatch(_, ctx) {
            throw APIError.badRequest("wrong type at \(Self.path(ctx.codingPath)): \(ctx.debugDescription)")
        } catch let DecodingError.valueNotFound(_, ctx) {
            throw APIError.badRequest("null at \(Self.path(ctx.codingPath))")
        } catch let DecodingError.dataCorrupted(ctx) where !ctx.codingPath.isEmpty {
            // Well-formed JSON, a value out of range (a negative sequence, a number over 2^64).
            throw APIError.badRequest("invalid value at \(Self.path(ctx.codingPath)): \(ctx.debugDescription)")
        } catch let DecodingError.dataCorrupted(ctx) {
            // Some decoders report a number out of range (`"after": -1`) as invalid JSON: say which it is.
            if (try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView))) != nil {
                throw APIError.badRequest("invalid value: a number out of range (sequences are integers in 0…\(Int64.max)): \(ctx.debugDescription)")
            }
            throw APIError.badRequest("malformed JSON: \(ctx.debugDescription)")
        } catch {
            throw APIError.badRequest("malformed body: \(error)")
        }
    }

    /// Range, order, sizes and each built-in payload, by the ledger's own decoder.
    func validate(_ body: SyncWire.UpRequest) throws -> [ValidatedEvent] {
        guard (1...128).contains(body.ledger.utf8.count) else { throw APIError.badRequest("ledger: must be 1–128 bytes") }
        guard body.through <= UInt64(Int64.max) else { throw APIError.badRequest("through: \(body.through) is above \(Int64.max)") }
        guard body.after <= body.through else {
            throw APIError.badRequest("after (\(body.after)) must not exceed through (\(body.through))")
        }
        try validateLost(body)
        guard body.events.count <= Self.maxEvents else { throw APIError.badRequest("events: at most \(Self.maxEvents) per request, got \(body.events.count)") }
        var previous = body.after
        var out: [ValidatedEvent] = []
        out.reserveCapacity(body.events.count)
        for (i, event) in body.events.enumerated() {
            let at = "events[\(i)]"
            guard event.seq > previous, event.seq <= body.through else {
                throw APIError.badRequest("\(at).seq: \(event.seq) must be above \(previous) and at most through (\(body.through))")
            }
            previous = event.seq
            guard (1...128).contains(event.type.utf8.count), event.type.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
                throw APIError.badRequest("\(at).type: 1–128 bytes of printable ASCII without spaces")
            }
            if let key = event.key, !(1...256).contains(key.utf8.count) { throw APIError.badRequest("\(at).key: 1–256 bytes") }
            guard (event.payload == nil) != (event.payloadBase64 == nil), let bytes = event.payloadBytes else {
                throw APIError.badRequest("\(at): exactly one of payload or payloadBase64 (valid base64)")
            }
            guard bytes.count <= Self.maxPayloadBytes else { throw APIError.badRequest("\(at): payload over \(Self.maxPayloadBytes) bytes") }
            let decoded: DomainEvent
            do {
                decoded = try DomainEvent.decode(type: event.type, payload: bytes, index: i)
            } catch {
                throw APIError.badRequest("\(at) (\(event.type)): \(error)")
            }
            out.append(ValidatedEvent(wire: event, feedChanges: Self.feedChanges(of: decoded, event: event)))
        }
        return out
    }

    /// The effect of a device event on the user's feed (docs/sync.md, "Up").
    static func feedChanges(of decoded: DomainEvent, event: SyncWire.UpEvent) -> [FeedChange] {
        switch decoded {
        case .messageRead(let change):
            return [FeedChange(type: event.type, payload: event.payload ?? "", reads: change.ids.map { ($0, change.read) })]
        case .messageRemoved(let removal):
            return [FeedChange(type: event.type, payload: event.payload ?? "", removed: removal.ids)]
        case .widgetAction(let action) where action.kind == .markRead:
            guard let target = action.target, let payload = try? DomainEvent.messageRead(ReadChange(ids: [target], read: true)).newEvent().payload
            else { return [] }  // validated above: markRead has a target, and this encoding cannot fail
            return [FeedChange(type: BuiltInEventType.messageRead.rawValue, payload: String(decoding: payload, as: UTF8.self), reads: [(target, true)])]
        default:
            return []
        }
    }

    static func number(_ text: Substring?, name: String, default value: UInt64, range: ClosedRange<UInt64>) throws -> UInt64 {
        guard let text else { return value }
        guard let n = UInt64(text), range.contains(n) else { throw APIError.badRequest("\(name): expected an integer in \(range.lowerBound)…\(range.upperBound), got '\(text)'") }
        return n
    }

    static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }.description
    }

    // MARK: - Answers

    func answer(_ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let error as APIError {
            return Self.error(error)
        } catch let error as PostgresTransactionError where error.closureError is APIError {
            // Thrown inside the transaction, which was rolled back: nothing written.
            return Self.error(error.closureError as? APIError ?? APIError(status: 500, code: "internal", message: "internal error"))
        } catch {
            store.logger.error("request failed: \(error)")
            return Self.error(APIError(status: 500, code: "internal", message: "internal error; nothing was acknowledged"))
        }
    }

    static func error(_ error: APIError) -> Response {
        let body = SyncWire.ErrorBody(error: error.code, message: error.message, acked: error.acked)
        let data = (try? JSONEncoder().encode(body)) ?? Data(#"{"error":"internal","message":"unencodable error"}"#.utf8)
        return Response(status: .init(code: error.status), headers: [.contentType: "application/json"],
                         body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func json<T: Encodable>(_ value: T) throws -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(value))))
    }
}
