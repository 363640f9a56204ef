import Foundation
import InboxLedger
import InboxLedgerSync
import Synchronization

/// An in-process server with the protocol's semantics (docs/sync.md) and fault injection: the
/// client's edge cases without a network or PostgreSQL (those are `ledger-server`'s tests).
final class FakeServer: SyncTransport, Sendable {
    enum Fault: Sendable {
        /// Fail before applying anything (the connection was refused).
        case refuse
        /// Apply, then lose the answer (the connection dropped after the server committed).
        case loseAnswer
        /// Answer 409 gap.
        case gap
    }

    struct State: Sendable {
        var acked: [String: UInt64] = [:]
        /// Every applied event, by ledger, in the order applied.
        var applied: [String: [SyncWire.UpEvent]] = [:]
        var feed: [SyncWire.Change] = []
        var faults: [Fault] = []
        var sends = 0
        var fetches = 0
        /// Sequences each ledger declared lost (and the server did not hold).
        var lost: [String: UInt64] = [:]
        /// Refuse every request while set (the server is unreachable).
        var offline = false
        /// Answer 413 to a body larger than this (ledger-server's `--max-body`).
        var maxBodyBytes = 1_048_576
        /// The size of each up body received.
        var bodySizes: [Int] = []
        /// Never answer while set: requests wait until their task is cancelled (a hung server).
        var hang = false
        /// Requests waiting in `hang` or in `answerDelay` now.
        var waiting = 0
        /// Apply a batch, then wait this long before answering (cancellable: the answer is lost).
        var answerDelay: Duration?
        /// Only these bearer tokens are accepted (nil: any); others get 401.
        var acceptedTokens: Set<String>?
        /// The token the client gave last (``useToken(_:)``), initially the configuration's.
        var token = "test"
        /// Events whose payload contains this text are refused for their content (`400` naming
        /// the event's sequence, as ledger-server answers an event it cannot keep).
        var refuseContaining: String?
        /// Sequences declared refused (``SyncWire/UpRequest/refused``) above what was held, by ledger.
        var refused: [String: UInt64] = [:]
        /// Append every custom event to the feed with its envelope, as ledger-server does
        /// (docs/sync.md). Off by default: the client tests of the other rules count sequences
        /// exactly, and each own entry coming back would add an `inbox.shared-settled` to the
        /// ledger; ConvergenceTests turn it on.
        var relaysCustomEvents = false
    }

    let user: String
    let state = Mutex(State())

    init(user: String = "alice", relaysCustomEvents: Bool = false) {
        self.user = user
        state.withLock { $0.relaysCustomEvents = relaysCustomEvents }
    }

    func inject(_ faults: Fault...) { state.withLock { $0.faults += faults } }

    func publish(type: String, payload: String) {
        state.withLock { s in s.feed.append(SyncWire.Change(seq: UInt64(s.feed.count + 1), type: type, payload: payload)) }
    }

    /// A custom event the backend publishes (`POST /v1/publish` with `events`).
    func publishCustom(type: String, payload: String, key: String? = nil, time: Int64) {
        state.withLock { s in
            let seq = UInt64(s.feed.count + 1)
            s.feed.append(SyncWire.Change(seq: seq, type: type, payload: payload,
                                          origin: SyncWire.ChangeOrigin(ledger: nil, seq: seq, time: time, role: "server", key: key)))
        }
    }

    var feed: [SyncWire.Change] { state.withLock { $0.feed } }

    var applied: [String: [SyncWire.UpEvent]] { state.withLock { $0.applied } }
    var sends: Int { state.withLock { $0.sends } }

    func useToken(_ token: String) { state.withLock { $0.token = token } }

    /// Waits while the server hangs, or for `delay`; throws `.cancelled` when the task is.
    func stall(_ delay: Duration?) async throws(SyncError) {
        let hang = state.withLock { s in
            if s.hang || delay != nil { s.waiting += 1 }
            return s.hang
        }
        guard hang || delay != nil else { return }
        defer { state.withLock { $0.waiting -= 1 } }
        do { try await Task.sleep(for: hang ? .seconds(3600) : delay ?? .zero) } catch { throw .cancelled }
    }

    func authorize() throws(SyncError) {
        try state.withLock { s throws(SyncError) in
            if let accepted = s.acceptedTokens, !accepted.contains(s.token) { throw .unauthorized("the token has expired") }
        }
    }

    func send(_ request: SyncWire.UpRequest) async throws(SyncError) -> SyncWire.UpResponse {
        try await stall(nil)
        try authorize()
        let size = (try? JSONEncoder().encode(request).count) ?? 0
        let result: Result<SyncWire.UpResponse, SyncError> = state.withLock { s in
            s.sends += 1
            if s.offline { return .failure(.offline("connection refused")) }
            s.bodySizes.append(size)
            if size > s.maxBodyBytes { return .failure(.rejected(status: 413, code: "too_large", message: "the body exceeds \(s.maxBodyBytes) bytes")) }
            let fault = s.faults.isEmpty ? nil : s.faults.removeFirst()
            if case .refuse = fault { return .failure(.offline("connection refused")) }
            let acked = s.acked[request.ledger, default: 0]
            if case .gap = fault { return .failure(.gap(serverAcked: acked, deviceCursor: request.after)) }
            guard request.after <= acked else { return .failure(.gap(serverAcked: acked, deviceCursor: request.after)) }
            if let poison = s.refuseContaining,
               let event = request.events.first(where: { String(decoding: $0.payloadBytes ?? [], as: UTF8.self).contains(poison) }) {
                return .failure(.eventRefused(seq: event.seq, message: "events: the payload holds \(poison)"))
            }
            if let lostThrough = request.lostThrough, lostThrough > acked { s.lost[request.ledger, default: 0] += lostThrough - acked }
            s.refused[request.ledger, default: 0] += UInt64((request.refused ?? []).count { $0 > acked })
            let fresh = request.events.filter { $0.seq > acked }
            s.applied[request.ledger, default: []] += fresh
            s.acked[request.ledger] = max(acked, request.through)
            for event in fresh {
                switch try? DomainEvent.decode(type: event.type, payload: event.payloadBytes ?? []) {
                case .messageRead, .messageRemoved:
                    s.feed.append(SyncWire.Change(seq: UInt64(s.feed.count + 1), type: event.type, payload: event.payload ?? ""))
                case .widgetAction(let action) where action.kind == .markRead:
                    // As ledger-server does: a widget's markRead is a read for the other devices.
                    let read = #"{"ids":["\#(action.target ?? "")"],"read":true}"#
                    s.feed.append(SyncWire.Change(seq: UInt64(s.feed.count + 1), type: "message.read", payload: read))
                case .custom where s.relaysCustomEvents:
                    // As ledger-server does: a custom event goes to the feed with its envelope.
                    s.feed.append(SyncWire.Change(seq: UInt64(s.feed.count + 1), type: event.type, payload: event.payload ?? "",
                                                  payloadBase64: event.payloadBase64,
                                                  origin: SyncWire.ChangeOrigin(ledger: request.ledger, seq: event.seq, time: event.time,
                                                                                role: event.role ?? "device", key: event.key)))
                default:
                    break
                }
            }
            if case .loseAnswer = fault { return .failure(.offline("connection reset after the commit")) }
            return .success(SyncWire.UpResponse(user: user, ledger: request.ledger, acked: max(acked, request.through),
                                                applied: fresh.count, duplicates: request.events.count - fresh.count))
        }
        let answer = try result.get()
        try await stall(state.withLock { $0.answerDelay })
        return answer
    }

    func fetch(after: UInt64, limit: Int, waitSeconds: Int) async throws(SyncError) -> SyncWire.DownResponse {
        try await stall(nil)
        try authorize()
        let result: Result<SyncWire.DownResponse, SyncError> = state.withLock { s in
            s.fetches += 1
            if s.offline { return .failure(.offline("connection refused")) }
            if case .refuse = s.faults.first {
                s.faults.removeFirst()
                return .failure(.offline("connection refused"))
            }
            let changes = Array(s.feed.filter { $0.seq > after }.prefix(limit))
            return .success(SyncWire.DownResponse(user: user, head: UInt64(s.feed.count), changes: changes))
        }
        let page = try result.get()
        if page.changes.isEmpty, waitSeconds > 0 {
            // A long poll with nothing new: wait a little (cancellable) so loops do not spin.
            do { try await Task.sleep(for: .milliseconds(20)) } catch { throw .cancelled }
        }
        return page
    }
}

/// A fresh temporary ledger and a state-file path beside nothing else.
func makeDevice(_ role: String = "app") throws -> (Ledger, String) {
    let ledger = try Ledger.temporary(options: LedgerOptions(role: role))
    let state = NSTemporaryDirectory() + "/sync-state-\(UUID().uuidString)"
    return (ledger, state)
}

func configuration(state: String, custom: Set<String> = []) -> SyncConfiguration {
    var c = SyncConfiguration(server: URL(fileURLWithPath: "/unused"), token: "test", stateFile: state, sharedCustomTypes: custom)
    c.initialBackoff = .milliseconds(5)
    c.maxBackoff = .milliseconds(50)
    c.longPollSeconds = 1
    return c
}

func listing(_ ids: [String]) throws -> String {
    let sync = InboxSync(mode: .delta, messages: ids.map {
        InboxMessage(id: $0, title: "Message \($0)", sentAt: Timestamp(micros: 1_795_000_000_000_000))
    })
    return String(decoding: try DomainEvent.inboxSynced(sync).newEvent().payload, as: UTF8.self)
}

/// The relay consumer's cursor (the blocking read: no await in an expectation).
func relayCursor(_ ledger: Ledger) throws -> UInt64 { try ledger.consumers.consumer(named: "sync-relay").cursor() }

/// The relay consumer's next batch, read and not committed.
func relayBatch(_ ledger: Ledger) throws -> ConsumerBatch { try ledger.consumers.consumer(named: "sync-relay").next(limit: 10) }
