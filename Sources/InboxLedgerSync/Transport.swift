import Foundation
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
}

/// The protocol over HTTP with Foundation's URLSession (FoundationNetworking on Linux): the
/// system's HTTP stack on Apple platforms and no new package for apps (docs/sync.md says why
/// not AsyncHTTPClient).
///
/// ```swift
/// let transport = HTTPSyncTransport(server: URL(fileURLWithPath: "/"), token: "v1.…")
/// ```
public struct HTTPSyncTransport: SyncTransport {
    /// The server's base URL (`https://sync.example.com`).
    public let server: URL
    /// The bearer token.
    public let token: String
    let session: URLSession

    /// A transport to `server` with `token`; requests time out after `timeoutSeconds` plus
    /// the long poll's wait.
    public init(server: URL, token: String, timeoutSeconds: Double = 30) {
        self.server = server
        self.token = token
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeoutSeconds + 35
        configuration.httpMaximumConnectionsPerHost = 4
        session = URLSession(configuration: configuration)
    }

    public func send(_ request: SyncWire.UpRequest) async throws(SyncError) -> SyncWire.UpResponse {
        let body: Data
        do { body = try JSONEncoder().encode(request) } catch { throw .protocolViolation("cannot encode the batch: \(error)") }
        var http = URLRequest(url: server.appendingPathComponent("v1/up"))
        http.httpMethod = "POST"
        http.httpBody = body
        http.setValue("application/json", forHTTPHeaderField: "Content-Type")
        return try await perform(http, as: SyncWire.UpResponse.self, cursor: request.after)
    }

    public func fetch(after: UInt64, limit: Int, waitSeconds: Int) async throws(SyncError) -> SyncWire.DownResponse {
        guard var components = URLComponents(url: server.appendingPathComponent("v1/down"), resolvingAgainstBaseURL: false) else {
            throw .protocolViolation("bad server URL \(server)")
        }
        components.queryItems = [
            URLQueryItem(name: "after", value: String(after)),
            URLQueryItem(name: "limit", value: String(limit)),
            URLQueryItem(name: "wait", value: String(waitSeconds)),
        ]
        guard let url = components.url else { throw .protocolViolation("bad server URL \(server)") }
        var http = URLRequest(url: url)
        http.timeoutInterval = Double(waitSeconds) + 35
        return try await perform(http, as: SyncWire.DownResponse.self, cursor: after)
    }

    func perform<T: Decodable>(_ request: URLRequest, as: T.Type, cursor: UInt64) async throws(SyncError) -> T {
        var request = request
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch is CancellationError {
            throw .cancelled
        } catch {
            if Task.isCancelled { throw .cancelled }
            throw .network(String(describing: error))
        }
        guard let http = response as? HTTPURLResponse else { throw .protocolViolation("not an HTTP response") }
        if http.statusCode == 200 {
            do { return try JSONDecoder().decode(T.self, from: data) } catch {
                throw .protocolViolation("undecodable answer from \(request.url?.path ?? "?"): \(error)")
            }
        }
        let body = try? JSONDecoder().decode(SyncWire.ErrorBody.self, from: data)  // an error page may be anything
        let message = body?.message ?? String(decoding: data.prefix(500), as: UTF8.self)
        switch http.statusCode {
        case 401: throw .unauthorized(message)
        case 403: throw .forbidden(message)
        case 409 where body?.error == "gap": throw .gap(serverAcked: body?.acked ?? 0, deviceCursor: cursor)
        case 500...: throw .server(status: http.statusCode, message: message)
        default: throw .rejected(status: http.statusCode, code: body?.error ?? "http_\(http.statusCode)", message: message)
        }
    }
}
