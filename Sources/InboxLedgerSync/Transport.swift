import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a ``SyncClient`` reaches the server: the two requests of docs/sync.md. The default is
/// ``HTTPSyncTransport`` (URLSession); tests substitute an in-process server.
///
/// ```swift
/// let transport = HTTPSyncTransport(server: url, token: token)
/// let answer = try await transport.fetch(after: 0, limit: 100, waitSeconds: 0)
/// ```
public protocol SyncTransport: Sendable {
    /// `POST /v1/up`.
    func send(_ request: SyncWire.UpRequest) async throws(SyncError) -> SyncWire.UpResponse
    /// `GET /v1/down?after=&limit=&wait=`.
    func fetch(after: UInt64, limit: Int, waitSeconds: Int) async throws(SyncError) -> SyncWire.DownResponse
    /// Use `token` from the next request on (the client got it from its token provider after
    /// a 401). The default does nothing: a transport that authenticates otherwise ignores it.
    func useToken(_ token: String)
}

extension SyncTransport {
    /// Does nothing.
    /// Sends `token` as the bearer of every later request (a refreshed token).
    public func useToken(_ token: String) {}
}

/// The protocol over HTTP with Foundation's URLSession (FoundationNetworking on Linux): the
/// system's HTTP stack on Apple platforms and no new package for apps (docs/sync.md says why
/// not AsyncHTTPClient). A failure to reach the server is thrown as ``SyncError/offline(_:)``
/// with a sentence that names the address and says timed out, refused, DNS or TLS; a
/// cancelled task stops waiting for its request at once and throws ``SyncError/cancelled`` —
/// the request itself is left to end on its own (its answer, or its timeout) and its result is
/// dropped: cancelling a URLSession transfer as it completes deadlocks swift-corelibs-foundation
/// on Linux (its issue 5412), so the transport never cancels one (docs/sync.md, "Cancellation").
///
/// ```swift
/// let transport = HTTPSyncTransport(server: URL(fileURLWithPath: "/"), token: "v1.…")
/// ```
public struct HTTPSyncTransport: SyncTransport {
    /// The server's base URL (`https://sync.example.com`).
    public let server: URL
    /// How long a request may wait for the server's answer, in seconds (a long poll: its
    /// wait plus this).
    public let timeoutSeconds: Double
    let session: URLSession
    let bearer: Bearer

    /// The token, shared by the copies of a transport.
    final class Bearer: Sendable {
        let value: Mutex<String>
        init(_ token: String) { value = Mutex(token) }
    }

    /// The bearer token in use (the one given, or the last from ``useToken(_:)``).
    public var token: String { bearer.value.withLock { $0 } }

    /// A transport to `server` with `token`; an up request times out after `timeoutSeconds`
    /// without an answer, a long poll after its wait plus `timeoutSeconds`.
    public init(server: URL, token: String, timeoutSeconds: Double = 30) {
        self.server = server
        self.timeoutSeconds = timeoutSeconds
        bearer = Bearer(token)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeoutSeconds
        configuration.httpMaximumConnectionsPerHost = 4
        session = URLSession(configuration: configuration)
    }

    /// Sends `token` as the bearer of every later request (a refreshed token).
    public func useToken(_ token: String) { bearer.value.withLock { $0 = token } }

    /// Posts one batch to `/v1/up` and returns the server's acknowledgement.
    public func send(_ request: SyncWire.UpRequest) async throws(SyncError) -> SyncWire.UpResponse {
        let body: Data
        do { body = try JSONEncoder().encode(request) } catch { throw .protocolViolation("cannot encode the batch: \(error)") }
        var http = URLRequest(url: server.appendingPathComponent(SyncWire.Endpoint.up.relativePath))
        http.httpMethod = "POST"
        http.httpBody = body
        http.timeoutInterval = timeoutSeconds
        http.setValue("application/json", forHTTPHeaderField: "Content-Type")
        return try await perform(http, as: SyncWire.UpResponse.self, cursor: request.after)
    }

    /// Reads one page of the feed from `/v1/down` after `after`, waiting up to `waitSeconds` for one.
    public func fetch(after: UInt64, limit: Int, waitSeconds: Int) async throws(SyncError) -> SyncWire.DownResponse {
        guard var components = URLComponents(url: server.appendingPathComponent(SyncWire.Endpoint.down.relativePath), resolvingAgainstBaseURL: false) else {
            throw .protocolViolation("bad server URL \(server)")
        }
        components.queryItems = [
            URLQueryItem(name: SyncWire.DownQuery.after.rawValue, value: String(after)),
            URLQueryItem(name: SyncWire.DownQuery.limit.rawValue, value: String(limit)),
            URLQueryItem(name: SyncWire.DownQuery.wait.rawValue, value: String(waitSeconds)),
        ]
        guard let url = components.url else { throw .protocolViolation("bad server URL \(server)") }
        var http = URLRequest(url: url)
        http.timeoutInterval = Double(waitSeconds) + timeoutSeconds
        return try await perform(http, as: SyncWire.DownResponse.self, cursor: after)
    }

    func perform<T: Decodable>(_ request: URLRequest, as: T.Type, cursor: UInt64) async throws(SyncError) -> T {
        var request = request
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await Self.transfer(request, on: session)
        } catch {
            if Task.isCancelled || error is CancellationError || (error as? URLError)?.code == .cancelled { throw .cancelled }
            throw .offline(NetworkFailure(error, request: request))
        }
        guard let http = response as? HTTPURLResponse else { throw .protocolViolation("not an HTTP response") }
        if http.statusCode == 200 {
            do { return try JSONDecoder().decode(T.self, from: data) } catch {
                throw .protocolViolation("undecodable answer from \(request.url?.path ?? "?"): \(error)")
            }
        }
        let body: SyncWire.ErrorBody?
        do { body = try JSONDecoder().decode(SyncWire.ErrorBody.self, from: data) } catch { body = nil }  // an error page may be anything
        let message = body?.message ?? String(decoding: data.prefix(500), as: UTF8.self)
        if http.statusCode == 400, let seq = body?.seq { throw .eventRefused(seq: seq, message: message) }
        switch http.statusCode {
        case 401: throw .unauthorized(message)
        case 403: throw .forbidden(message)
        case 409 where body?.error == SyncWire.ErrorCode.gap.rawValue: throw .gap(serverAcked: body?.acked ?? 0, deviceCursor: cursor)
        case 500...: throw .server(status: http.statusCode, message: message)
        default: throw .rejected(status: http.statusCode, code: body?.error ?? "http_\(http.statusCode)", message: message)
        }
    }
}

extension HTTPSyncTransport {
    /// `session.data(for: request)`, awaited so that cancelling the caller returns at once with
    /// `CancellationError` and never reaches the transfer: it runs in a task of its own, which
    /// the caller's cancellation does not cancel, ends on its own (an answer or the request's
    /// timeout) and its result is dropped. A cancelled `POST /v1/up` may still be applied by
    /// the server — as when a connection drops after the server committed: the next batch
    /// resends it and the server counts it a duplicate.
    ///
    /// On Apple platforms, whose URLSession cancels cleanly, the transfer is cancelled too (its
    /// connection is free at once); on Linux it is left to end: an abandoned long poll holds one
    /// of the session's four connections for at most its wait.
    static func transfer(_ request: URLRequest, on session: URLSession) async throws -> (Data, URLResponse) {
        let waiter = TransferWaiter()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse), any Error>) in
                guard waiter.wait(continuation) else { return }  // cancelled before it began
                let transfer = Task.detached {
                    do { waiter.finish(.success(try await session.data(for: request))) } catch { waiter.finish(.failure(error)) }
                }
                #if canImport(Darwin)
                waiter.cancelsTransfer(transfer)
                #else
                _ = transfer
                #endif
            }
        } onCancel: {
            waiter.finish(.failure(CancellationError()))
        }
    }
}

/// The one continuation of a ``HTTPSyncTransport/transfer(_:on:)``, resumed exactly once:
/// by the transfer's end or by the caller's cancellation, whichever comes first.
final class TransferWaiter: Sendable {
    enum State {
        /// Neither the continuation nor an outcome yet.
        case idle
        /// Waiting for the transfer.
        case waiting(CheckedContinuation<(Data, URLResponse), any Error>)
        /// Resumed, or cancelled before it waited.
        case done
    }

    private let state = Mutex<State>(.idle)
    /// The transfer to cancel with the caller (Apple platforms only: ``HTTPSyncTransport/transfer(_:on:)``).
    private let transfer = Mutex<Task<Void, Never>?>(nil)

    /// Cancels `task` when the caller is cancelled (at once if it already was).
    func cancelsTransfer(_ task: Task<Void, Never>) {
        // Stored first, then the state read; ``finish(_:)`` sets the state first, then reads
        // this: whichever runs second sees the other (cancelling an ended task does nothing).
        transfer.withLock { $0 = task }
        let done = state.withLock { state -> Bool in
            if case .done = state { return true }
            return false
        }
        if done { task.cancel() }
    }

    /// Stores the continuation; false (and resumed with `CancellationError`) when the caller
    /// was cancelled before.
    func wait(_ continuation: CheckedContinuation<(Data, URLResponse), any Error>) -> Bool {
        let stored = state.withLock { state -> Bool in
            guard case .idle = state else { return false }
            state = .waiting(continuation)
            return true
        }
        if !stored { continuation.resume(throwing: CancellationError()) }
        return stored
    }

    /// Resumes the caller with `outcome` if nothing did yet; a cancellation before ``wait(_:)``
    /// is remembered.
    func finish(_ outcome: Result<(Data, URLResponse), any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<(Data, URLResponse), any Error>? in
            switch state {
            case .idle:
                state = .done
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .done:
                return nil
            }
        }
        continuation?.resume(with: outcome)
        if case .failure(let error) = outcome, error is CancellationError { transfer.withLock { $0 }?.cancel() }
    }
}

extension NetworkFailure {
    /// `error` (URLSession's) in words, naming the request's address.
    init(_ error: any Error, request: URLRequest) {
        let url = request.url
        let address = url.map { u in u.port.map { "\(u.host ?? "?"):\($0)" } ?? (u.host ?? "?") } ?? "the server"
        let what = "\(request.httpMethod ?? "GET") \(url?.path ?? "")"
        let detail = (error as NSError).localizedDescription
        guard let code = (error as? URLError)?.code else {
            self.init(.other, "\(what) to \(address) failed: \(detail)")
            return
        }
        switch code {
        case .timedOut:
            self.init(.timedOut, "timed out: \(address) did not answer \(what) within \(Self.seconds(request.timeoutInterval)) s")
        case .cannotConnectToHost:
            self.init(.connectionRefused, "connection refused: nothing accepts connections at \(address) (is the server running?)")
        case .cannotFindHost, .dnsLookupFailed:
            self.init(.hostNotFound, "DNS: the host name \(url?.host ?? "?") does not resolve")
        case .secureConnectionFailed, .serverCertificateHasBadDate, .serverCertificateUntrusted, .serverCertificateHasUnknownRoot,
             .serverCertificateNotYetValid, .clientCertificateRejected, .clientCertificateRequired:
            self.init(.tls, "TLS: the secure connection to \(address) failed: \(detail)")
        case .notConnectedToInternet, .internationalRoamingOff, .dataNotAllowed:
            self.init(.notConnected, "no network connection (\(what) to \(address))")
        case .networkConnectionLost:
            self.init(.connectionLost, "connection lost: \(address) closed the connection before answering \(what)")
        default:
            // FoundationNetworking on Linux reports libcurl's TLS failures as code -1, in OpenSSL's words.
            let lowered = detail.lowercased()
            if lowered.contains("ssl") || lowered.contains("tls") || lowered.contains("certificate") {
                self.init(.tls, "TLS: the secure connection to \(address) failed: \(detail)")
            } else {
                self.init(.other, "\(what) to \(address) failed: \(detail) (URLError \(code.rawValue))")
            }
        }
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }
}
