import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdAuth
import InboxLedger
import InboxLedgerSync
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The request context: Hummingbird's, plus the connection, so a long poll can end when its
/// client leaves, and the identity `TokenAuthenticator` proved (hummingbird-auth's
/// `AuthRequestContext`).
struct LedgerRequestContext: AuthRequestContext, RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    var identity: Identity?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
        identity = nil
    }
}

/// The per-user bounds and the body limit the routes enforce (docs/sync.md, "Limits").
struct RequestLimits: Sendable {
    /// The largest request body, in bytes (`413` beyond).
    var maxBodyBytes = SyncWire.Limits.defaultMaxBodyBytes
    /// Long polls one user may hold open at once, per process (`429` beyond).
    var longPollsPerUser = 16
    /// Device ledgers one user may have (`429`, nothing created, beyond).
    var ledgersPerUser = 100
    /// Custom feed entries one user may hold — custom events from devices and from publishes
    /// (`429`, nothing written, beyond): a guard against a runaway sender, far above what an app
    /// writes by hand.
    var customEntriesPerUser = RequestLimits.defaultCustomEntriesPerUser
    /// The custom types accepted (`400` for another, on the refused-event path).
    var customTypes = CustomTypes.all

    /// The default of ``customEntriesPerUser`` (`--custom-entries-per-user`).
    static let defaultCustomEntriesPerUser = 1_000_000
}

/// The HTTP side: authentication, bounded bodies, validation, and JSON answers (docs/sync.md),
/// over any ``SyncStore``. Handlers throw ``APIError`` (an `HTTPResponseError`);
/// ``ErrorAnswers`` turns any other error into its protocol answer.
struct API<Store: SyncStore>: Sendable {
    /// Where the state is.
    let store: Store
    /// The bounds it enforces.
    let limits: RequestLimits
    /// Where a 500's cause is logged.
    let logger: Logger

    /// The long polls of this process (the store wakes them).
    var longPolls: LongPolls { store.longPolls }

    /// The routes; `authenticator` checks the token of every `/v1` request before its handler.
    func routes(_ router: Router<LedgerRequestContext>, authenticator: TokenAuthenticator) {
        router.add(middleware: ErrorAnswers<LedgerRequestContext, Store>(store: store, logger: logger))
        router.get(RouterPath(SyncWire.Endpoint.health.rawValue)) { _, _ in try self.health() }
        let v1 = router.group().add(middleware: authenticator)
        v1.post(RouterPath(SyncWire.Endpoint.up.rawValue)) { request, context in try await self.up(request, context) }
        v1.get(RouterPath(SyncWire.Endpoint.down.rawValue)) { request, context in try await self.down(request, context) }
        v1.post(RouterPath(SyncWire.Endpoint.publish.rawValue)) { request, context in try await self.publish(request, context) }
        v1.get(RouterPath(SyncWire.Endpoint.state.rawValue)) { request, context in try await self.state(request, context) }
    }

    // MARK: - Handlers

    /// `GET /healthz`: 200 when the store can serve, 503 with the reason when it cannot.
    func health() throws -> Response {
        let database: String
        switch store.health() {
        case .up: database = "ok"
        case .down(let reason): database = reason
        }
        let body = SyncWire.Health(ok: database == "ok", database: database, longPolls: longPolls.openPolls,
                                   longPollsLeft: longPolls.pollsLeft.load(ordering: .relaxed))
        return try Self.json(body, status: body.ok ? .ok : .serviceUnavailable)
    }

    /// `POST /v1/up`: validated, applied as one ``UpBatch``, answered with what was applied.
    func up(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let claims = try authenticate(context, scope: .device)
        let body: SyncWire.UpRequest = try await decodeBody(request, context, fast: UpRequestReader.read)
        let batch = UpBatch(user: claims.user, request: body, events: try validate(body), maxLedgers: limits.ledgersPerUser,
                            maxCustomEntries: limits.customEntriesPerUser)
        let outcome = try await ServerMetrics.timing("up") { try await store.up(batch) }
        guard outcome.acked >= batch.through else { throw APIError(.internal, "the store answered no acknowledgement") }
        ServerMetrics.feedEntries(outcome.changes)
        ServerMetrics.upEvents(applied: outcome.applied, duplicates: batch.events.count - Int(outcome.applied), lost: outcome.lost,
                               refused: outcome.refused)
        if outcome.changes > 0 { store.announce(claims.user) }  // after the commit: the long polls re-read
        return try Self.json(SyncWire.UpResponse(
            user: claims.user, ledger: body.ledger, acked: UInt64(outcome.acked), applied: Int(outcome.applied),
            duplicates: batch.events.count - Int(outcome.applied),
            lost: body.lostThrough == nil ? nil : UInt64(outcome.lost),
            reused: outcome.reused > 0 ? Int(outcome.reused) : nil,
            refused: body.refused == nil ? nil : UInt64(outcome.refused)))
    }

    /// `GET /v1/down`: a page of the feed, or a long poll until there is one.
    func down(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let claims = try authenticate(context, scope: .device)
        let query = request.uri.queryParameters
        let after = try Self.number(query[Substring(SyncWire.DownQuery.after.rawValue)], name: SyncWire.DownQuery.after.rawValue,
                                    default: 0, range: SyncWire.Limits.sequences)
        let limit = Int(try Self.number(query[Substring(SyncWire.DownQuery.limit.rawValue)], name: SyncWire.DownQuery.limit.rawValue,
                                        default: UInt64(SyncWire.Limits.defaultDownPageSize),
                                        range: UInt64(SyncWire.Limits.downPageSizes.lowerBound)...UInt64(SyncWire.Limits.downPageSizes.upperBound)))
        let wait = Int(try Self.number(query[Substring(SyncWire.DownQuery.wait.rawValue)], name: SyncWire.DownQuery.wait.rawValue, default: 0,
                                       range: UInt64(SyncWire.Limits.longPollSeconds.lowerBound)...UInt64(SyncWire.Limits.longPollSeconds.upperBound)))
        let deadline = ContinuousClock.now + .seconds(wait)
        var page = try await ServerMetrics.timing("feed") { try await store.feed(user: claims.user, after: after, limit: limit) }
        guard page.changes.isEmpty, wait > 0 else { return try Self.json(page) }
        // A long poll: bounded per user, woken by notifications, ended by the client leaving.
        let left = await ClientDisconnect.watch(context.channel)
        let gone = Flag()
        while ContinuousClock.now < deadline {
            let ticket = longPolls.arm(claims.user)  // before the read: a change in between is not missed
            if longPolls.polls(of: claims.user) > limits.longPollsPerUser {
                longPolls.disarm(ticket)
                throw APIError(.tooMany, "\(claims.user) already holds \(limits.longPollsPerUser) long polls open; close one first")
            }
            left?.whenComplete { _ in
                gone.set()
                self.longPolls.signal(ticket)
            }
            page = try await ServerMetrics.timing("feed") { try await store.feed(user: claims.user, after: after, limit: limit) }
            if !page.changes.isEmpty {
                longPolls.disarm(ticket)
                break
            }
            await longPolls.wait(ticket, until: deadline)
            if gone.isSet {
                longPolls.pollsLeft.add(1, ordering: .relaxed)
                break  // the answer goes to nobody
            }
        }
        return try Self.json(page)
    }

    /// `POST /v1/publish` (publish tokens): a listing validated by the ledger's own decoder and
    /// custom events validated like a device's, then stored.
    func publish(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let claims = try authenticate(context, scope: .publish)
        let body: SyncWire.PublishRequest = try await decodeBody(request, context)
        let publication = try validatePublication(body, user: claims.user)
        let answer = try await ServerMetrics.timing("publish") { try await store.publish(publication) }
        ServerMetrics.feedEntries(Int64((publication.hasListing ? 1 : 0) + publication.events.count))
        store.announce(claims.user)  // after the commit
        return try Self.json(answer)
    }

    /// `GET /v1/state`: a page of what the store holds for the token's user.
    func state(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let claims = try authenticate(context, scope: nil)
        let query = request.uri.queryParameters
        let after = query[Substring(SyncWire.StateQuery.after.rawValue)].map(String.init)
        if let after { try Self.checkIdentifier(after, at: SyncWire.StateQuery.after.rawValue) }
        let wire = SyncWire.Limits.self
        let limit = Int(try Self.number(query[Substring(SyncWire.StateQuery.limit.rawValue)], name: SyncWire.StateQuery.limit.rawValue,
                                        default: UInt64(wire.defaultStateMessages),
                                        range: UInt64(wire.stateMessages.lowerBound)...UInt64(wire.stateMessages.upperBound)))
        return try Self.json(try await store.state(user: claims.user, after: after, limit: limit))
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

    /// The body as `T`, at most ``RequestLimits/maxBodyBytes`` (413 beyond), or a 400 naming what
    /// is wrong; `fast` reads the common case first (``UpRequestReader``: nil, and `JSONDecoder` decides).
    func decodeBody<T: Decodable>(_ request: Request, _ context: LedgerRequestContext, fast: ((ByteBuffer) -> T?)? = nil) async throws -> T {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: limits.maxBodyBytes)
        } catch let error as HTTPResponseError where error.status == .contentTooLarge {
            throw APIError(.tooLarge, "the body exceeds \(limits.maxBodyBytes) bytes")
        }
        if let fast, let value = fast(buffer) { return value }
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

    /// Range, order, sizes, identifiers, type names and each built-in payload, by the ledger's
    /// own decoder: whatever passes, every device can append (docs/sync.md, "Up").
    func validate(_ body: SyncWire.UpRequest) throws -> [UpBatch.Event] {
        let wire = SyncWire.Limits.self
        guard wire.ledgerIDBytes.contains(body.ledger.utf8.count) else {
            throw APIError.badRequest("ledger: must be \(wire.ledgerIDBytes.lowerBound)–\(wire.ledgerIDBytes.upperBound) bytes")
        }
        try Self.checkIdentifier(body.ledger, at: "ledger")
        guard wire.sequences.contains(body.through) else { throw APIError.badRequest("through: \(body.through) is above \(Int64.max)") }
        guard body.after <= body.through else {
            throw APIError.badRequest("after (\(body.after)) must not exceed through (\(body.through))")
        }
        try validateLost(body)
        guard body.events.count <= wire.eventsPerRequest else {
            throw APIError.badRequest("events: at most \(wire.eventsPerRequest) per request, got \(body.events.count)")
        }
        var previous = body.after
        var out: [UpBatch.Event] = []
        out.reserveCapacity(body.events.count)
        for (i, event) in body.events.enumerated() {
            let at = "events[\(i)]"
            guard event.seq > previous, event.seq <= body.through else {
                throw APIError.badRequest("\(at).seq: \(event.seq) must be above \(previous) and at most through (\(body.through))")
            }
            previous = event.seq
            do {
                out.append(try validateContent(of: event, at: at))
            } catch var error as APIError {
                // The event's own content: the device can skip it and declare it (`refused`).
                error.seq = event.seq
                throw error
            }
        }
        try validateRefused(body, events: out)
        return out
    }

    /// One event's content — its type, key, payload and identifiers — as the server keeps it,
    /// with its effects; a 400 naming the field (`events[3].data.ids[0]`) when it is refused.
    func validateContent(of event: SyncWire.UpEvent, at: String) throws -> UpBatch.Event {
        try Self.checkTypeName(event.type, at: at)
        if BuiltInEventType(rawValue: event.type) == nil, BuiltInEventType.isReserved(event.type) {
            throw APIError.badRequest("\(at).type: '\(event.type)' is in a namespace reserved for built-in event types (\(BuiltInEventType.reservedNamespaces.sorted().joined(separator: ", "))) and is not one of them; no ledger appends it")
        }
        if let key = event.key { try Self.checkKey(key, at: "\(at).key") }
        if let role = event.role, let problem = Self.roleProblem(role) {
            throw APIError.badRequest("\(at).role: \(String(reflecting: role)) \(problem)")
        }
        let bytes = try Self.payloadBytes(text: event.payload, base64: event.payloadBase64, at: at)
        let decoded: DomainEvent
        do {
            decoded = try DomainEvent.decode(type: event.type, payload: bytes)
        } catch .invalidEvent(_, let field, let reason) {
            throw APIError.badRequest("\(at).\(field) (\(event.type)): \(reason)")
        } catch {
            throw APIError.badRequest("\(at) (\(event.type)): \(error)")
        }
        let text = String(validating: bytes, as: UTF8.self)
        let stored = Self.stored(bytes, text: text)
        var validated = UpBatch.Event(seq: Int64(event.seq), type: event.type, key: event.key, time: event.time,
                                      payload: stored.payload, base64: stored.base64)
        if case .custom = decoded {
            // A custom event goes down the feed as it is, with its envelope (docs/sync.md, "Down").
            guard limits.customTypes.accepts(event.type) else {
                throw APIError.badRequest("\(at).type: '\(event.type)' is not a custom type this server accepts (ledger-server --custom-types \(limits.customTypes))")
            }
            validated.feed = [.custom(role: event.role ?? UpBatch.FeedEntry.defaultRole)]
        } else {
            try Self.addEffects(of: decoded, to: &validated, text: text, at: at)
        }
        return validated
    }

    /// A publish's listing and custom events, validated: the listing by the ledger's own
    /// decoder and the identifier rule, each event like a device's custom event (type name and
    /// namespace, `--custom-types`, key, payload) — a 400 naming the field otherwise. A request
    /// that lists, removes and carries nothing is a 400 (`nothing to publish`).
    func validatePublication(_ body: SyncWire.PublishRequest, user: String) throws -> Publication {
        let events = body.events ?? []
        guard !body.messages.isEmpty || !(body.removed ?? []).isEmpty || !events.isEmpty else { throw APIError.badRequest("nothing to publish") }
        if !body.messages.isEmpty || !(body.removed ?? []).isEmpty {
            // The ledger's own validation of a listing (ids, dates, duplicates), before anything is written.
            do {
                let payload = try DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: body.messages, removed: body.removed ?? [])).newEvent().payload
                _ = try DomainEvent.decode(type: BuiltInEventType.inboxSynced.rawValue, payload: payload)
            } catch {
                throw APIError.badRequest("invalid listing: \(error)")
            }
            for (i, message) in body.messages.enumerated() { try Self.checkIdentifier(message.id, at: "messages[\(i)].id") }
            for (i, id) in (body.removed ?? []).enumerated() { try Self.checkIdentifier(id, at: "removed[\(i)]") }
        }
        guard events.count <= SyncWire.Limits.eventsPerRequest else {
            throw APIError.badRequest("events: at most \(SyncWire.Limits.eventsPerRequest) per request, got \(events.count)")
        }
        var validated: [Publication.Event] = []
        validated.reserveCapacity(events.count)
        for (i, event) in events.enumerated() {
            let at = "events[\(i)]"
            try Self.checkTypeName(event.type, at: at)
            if BuiltInEventType(rawValue: event.type) != nil {
                throw APIError.badRequest("\(at).type: '\(event.type)' is a built-in type; events[] carries custom events only (messages and removed make the listing)")
            }
            if BuiltInEventType.isReserved(event.type) {
                throw APIError.badRequest("\(at).type: '\(event.type)' is in a namespace reserved for built-in event types (\(BuiltInEventType.reservedNamespaces.sorted().joined(separator: ", "))); name custom types in a namespace of your own")
            }
            guard limits.customTypes.accepts(event.type) else {
                throw APIError.badRequest("\(at).type: '\(event.type)' is not a custom type this server accepts (ledger-server --custom-types \(limits.customTypes))")
            }
            if let key = event.key { try Self.checkKey(key, at: "\(at).key") }
            let bytes = try Self.payloadBytes(text: event.payload, base64: event.payloadBase64, at: at)
            let stored = Self.stored(bytes, text: String(validating: bytes, as: UTF8.self))
            validated.append(Publication.Event(type: event.type, key: event.key, payload: stored.payload, base64: stored.base64))
        }
        return Publication(user: user, request: SyncWire.PublishRequest(messages: body.messages, removed: body.removed), events: validated,
                           time: Self.nowMicros(), maxCustomEntries: Int64(limits.customEntriesPerUser))
    }

    /// The server's clock, µs since the epoch.
    static func nowMicros() -> Int64 { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()) }

    /// `refused` of an up request: in order, above `after` and `lostThrough`, at most `through`,
    /// none the sequence of an event sent, at most as many as events per request.
    func validateRefused(_ body: SyncWire.UpRequest, events: [UpBatch.Event]) throws {
        guard let refused = body.refused else { return }
        guard refused.count <= SyncWire.Limits.eventsPerRequest else {
            throw APIError.badRequest("refused: at most \(SyncWire.Limits.eventsPerRequest) per request, got \(refused.count)")
        }
        var previous = max(body.after, body.lostThrough ?? 0)
        let sent = Set(events.map(\.seq))
        for (i, seq) in refused.enumerated() {
            guard seq > previous, seq <= body.through, !sent.contains(Int64(seq)) else {
                throw APIError.badRequest("refused[\(i)]: \(seq) must be above \(previous), at most through (\(body.through)) and not an event's sequence")
            }
            previous = seq
        }
    }

    /// `lostThrough` of an up request: above `after`, at most `through`, below every event.
    func validateLost(_ body: SyncWire.UpRequest) throws {
        guard let lostThrough = body.lostThrough else { return }
        guard lostThrough > body.after, lostThrough <= body.through else {
            throw APIError.badRequest("lostThrough (\(lostThrough)) must be above after (\(body.after)) and at most through (\(body.through))")
        }
        if let first = body.events.first, first.seq <= lostThrough {
            throw APIError.badRequest("events[0].seq: \(first.seq) must be above lostThrough (\(lostThrough))")
        }
    }

    /// 400 unless `type` is a type name: 1–128 bytes of printable ASCII without spaces.
    static func checkTypeName(_ type: String, at: String) throws {
        let wire = SyncWire.Limits.self
        guard wire.typeBytes.contains(type.utf8.count), type.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw APIError.badRequest("\(at).type: \(wire.typeBytes.lowerBound)–\(wire.typeBytes.upperBound) bytes of printable ASCII without spaces")
        }
    }

    /// 400 unless `key` is an idempotency key the protocol accepts: 1–256 bytes, an identifier.
    static func checkKey(_ key: String, at field: String) throws {
        let bytes = SyncWire.Limits.keyBytes
        guard bytes.contains(key.utf8.count) else { throw APIError.badRequest("\(field): \(bytes.lowerBound)–\(bytes.upperBound) bytes") }
        try checkIdentifier(key, at: field)
    }

    /// The payload bytes of an event that carries exactly one of `text` and `base64` (valid),
    /// at most 64 KiB; a 400 naming the event otherwise.
    static func payloadBytes(text: String?, base64: String?, at: String) throws -> [UInt8] {
        let bytes: [UInt8]?
        switch (text, base64) {
        case (let text?, nil): bytes = Array(text.utf8)
        case (nil, let base64?): bytes = Data(base64Encoded: base64).map(Array.init)
        default: bytes = nil
        }
        guard let bytes else { throw APIError.badRequest("\(at): exactly one of payload or payloadBase64 (valid base64)") }
        let limit = SyncWire.Limits.payloadBytes
        guard bytes.count <= limit else { throw APIError.badRequest("\(at): payload over \(limit) bytes") }
        return bytes
    }

    /// The payload as stored (`device_events`, `feed`): text when the bytes are UTF-8 (`text`)
    /// without U+0000, else base64 — one form per payload whichever encoding carried it, so
    /// equal events compare equal.
    static func stored(_ bytes: [UInt8], text: String?) -> (payload: String, base64: Bool) {
        if let text, !text.utf8.contains(0) { return (text, false) }
        return (Data(bytes).base64EncodedString(), true)
    }

    /// Why `role` cannot be an origin role, or nil when it can: the ledger's own rule
    /// (`LedgerOptions.role`) — 1–64 bytes of UTF-8, printable (no control character, U+0000
    /// among them, and no line or paragraph separator) — so a device can keep it in its log.
    static func roleProblem(_ role: String) -> String? {
        let count = role.utf8.count
        guard (1...Ledger.Limits.maxRoleBytes).contains(count) else {
            return "must be 1–\(Ledger.Limits.maxRoleBytes) bytes of UTF-8, got \(count)"
        }
        // The common case, printable ASCII, without looking at Unicode properties.
        if role.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) { return nil }
        var offset = 0
        for scalar in role.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator:
                return "must be printable: U+\(String(format: "%04X", scalar.value)) at byte \(offset)"
            default:
                offset += scalar.utf8.count
            }
        }
        return nil
    }

    /// 400 unless `text` is an identifier the protocol accepts (``SyncWire/identifierProblem(_:)``).
    static func checkIdentifier(_ text: String, at field: String) throws {
        if let problem = SyncWire.identifierProblem(text) { throw APIError.badRequest("\(field): \(String(reflecting: text)) \(problem)") }
    }

    /// The effect of a device event on the user's feed and message state (docs/sync.md, "Up").
    /// A feed entry carries **the validated bytes** (`text`: the payload as UTF-8, whichever
    /// encoding the request used), so every device appends exactly what the ledger's decoder
    /// accepted here; a read or a removal goes to the feed as it is (``UpBatch/FeedEntry/event``).
    static func addEffects(of decoded: DomainEvent, to event: inout UpBatch.Event, text: String?, at: String) throws {
        func payloadText() throws -> String {
            guard let text, !text.utf8.contains(0) else { throw APIError.badRequest("\(at): a built-in payload must be UTF-8 JSON") }
            return text
        }
        func itself() throws -> UpBatch.FeedEntry {
            let text = try payloadText()
            return !event.base64 && event.payload == text ? .event : UpBatch.FeedEntry(type: event.type, payload: text)
        }
        switch decoded {
        case .messageRead(let change):
            for (j, id) in change.ids.enumerated() { try checkIdentifier(id, at: "\(at).data.ids[\(j)]") }
            event.feed = [try itself()]
            event.reads = change.ids.map { UpBatch.Read(id: $0, read: change.read) }
        case .messageRemoved(let removal):
            for (j, id) in removal.ids.enumerated() { try checkIdentifier(id, at: "\(at).data.ids[\(j)]") }
            event.feed = [try itself()]
            event.removed = removal.ids
        case .widgetAction(let action) where action.kind == .markRead:
            guard let target = action.target else { return }  // validated: markRead has a target
            try checkIdentifier(target, at: "\(at).data.target")
            let payload: [UInt8]
            do { payload = try DomainEvent.messageRead(ReadChange(ids: [target], read: true)).newEvent().payload } catch {
                throw APIError.badRequest("\(at).data.target: \(error)")
            }
            event.feed = [UpBatch.FeedEntry(type: BuiltInEventType.messageRead.rawValue, payload: String(decoding: payload, as: UTF8.self))]
            event.reads = [UpBatch.Read(id: target, read: true)]
        default:
            // No feed entry: the other built-ins (kept in device_events for the backend); a
            // custom event's entry is made by validateContent.
            return
        }
    }

    /// A query parameter in `range` (`default` when absent), or a 400 naming it.
    static func number(_ text: Substring?, name: String, default value: UInt64, range: ClosedRange<UInt64>) throws -> UInt64 {
        guard let text else { return value }
        guard let n = UInt64(text), range.contains(n) else { throw APIError.badRequest("\(name): expected an integer in \(range.lowerBound)…\(range.upperBound), got '\(text)'") }
        return n
    }

    /// A coding path as the error messages write it (`events[3].seq`).
    static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }.description
    }

    // MARK: - Answers

    /// `value` as a JSON answer.
    static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(status: status, headers: [.contentType: "application/json"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(value))))
    }
}

/// Ends a long poll when its client leaves: the connection's input closed (FIN) or the
/// connection closed. Installed in every connection's pipeline (`buildApplication`).
final class ClientDisconnect: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    var left: EventLoopPromise<Void>?

    func handlerAdded(context: ChannelHandlerContext) { left = context.eventLoop.makePromise() }

    func handlerRemoved(context: ChannelHandlerContext) { left?.succeed() }

    func channelInactive(context: ChannelHandlerContext) {
        left?.succeed()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .some(.inputClosed) = event as? ChannelEvent { left?.succeed() }
        context.fireUserInboundEventTriggered(event)
    }

    /// A future fulfilled when `channel`'s client leaves; nil without the handler.
    static func watch(_ channel: any Channel) async -> EventLoopFuture<Void>? {
        // No handler (the router tests' channel) or a closed event loop: no watch, the poll ends at its deadline.
        try? await channel.eventLoop.submit { () -> EventLoopFuture<Void>? in
            (try? channel.pipeline.syncOperations.handler(type: ClientDisconnect.self))?.left?.futureResult
        }.get()
    }
}
