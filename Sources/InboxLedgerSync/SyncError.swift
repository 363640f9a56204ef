import Foundation
import InboxLedger

/// What can go wrong while syncing, each case saying what and where, grouped by what an app
/// does about it (docs/sync.md, "Errors"):
///
/// | case | the app |
/// |---|---|
/// | ``offline(_:)``, ``server(status:message:)`` | shows "offline"; the client retries with backoff |
/// | ``unauthorized(_:)`` | asks the user to sign in again (after the token provider, if any, failed) |
/// | ``gap(serverAcked:deviceCursor:)`` | tells the user to contact support: the server lost data, an operator is needed |
/// | ``forbidden(_:)``, ``rejected(status:code:message:)``, ``protocolViolation(_:)`` | reports a bug (a wrong token, a payload the server refuses, a broken server) |
/// | ``eventRefused(seq:message:)`` | nothing: the event is skipped and counted (``SyncStatus/eventsRefused``) |
/// | ``ledger(_:)``, ``stateFile(path:reason:)`` | reports the device's storage problem |
/// | ``cancelled`` | nothing: a cancelled sync is never a failure |
///
/// ```swift
/// do { _ = try await client.syncOnce() } catch { print(error.isRetryable, error) }
/// ```
public enum SyncError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server cannot be reached: timed out, refused, DNS, TLS, no network, connection lost —
    /// in words (``NetworkFailure``). Retried with backoff.
    case offline(NetworkFailure)
    /// The server failed (5xx, 503 while its database is down). Retried with backoff.
    case server(status: Int, message: String)
    /// The token is missing, malformed, forged or expired (401). The client asks
    /// ``SyncConfiguration/tokenProvider`` once for a new token; without one, or if the new one
    /// is refused too, the direction stops until the next ``SyncClient/run()``.
    case unauthorized(String)
    /// The token's user may not do this (403: a ledger bound to another user, a wrong scope).
    case forbidden(String)
    /// The server refused the request (400, 413, …): nothing was written, and the same
    /// request would be refused again, so it is not retried.
    case rejected(status: Int, code: String, message: String)
    /// The server refused one event of an up request for its content (`400` naming its
    /// sequence: an event an older ledger accepted, a stricter server). The up direction skips
    /// it, declares it to the server and counts it (``SyncStatus/eventsRefused``) — never a
    /// reason for the events after it to stay unsent (docs/sync.md, "Refused events"). Shown
    /// only when it cannot be skipped (a sequence the request did not send).
    case eventRefused(seq: UInt64, message: String)
    /// The server holds less than the device acknowledged (`409 gap`: a restore of the
    /// server's database from a backup). Needs an operator; not retried.
    case gap(serverAcked: UInt64, deviceCursor: UInt64)
    /// The server's answer broke the protocol (undecodable, a sequence out of order).
    case protocolViolation(String)
    /// The ledger failed (not transient: those are waited through).
    case ledger(LedgerError)
    /// The down-cursor state file could not be read or written.
    case stateFile(path: String, reason: String)
    /// The task was cancelled (the app went to the background, a refresh expired): not a
    /// failure, never shown as one.
    case cancelled

    /// The name this case had before it carried a ``NetworkFailure``.
    @available(*, deprecated, renamed: "offline(_:)")
    public static func network(_ failure: NetworkFailure) -> SyncError { .offline(failure) }

    /// Whether retrying the same request later can succeed: the server unreachable or failing
    /// (``offline(_:)``, ``server(status:message:)``, a 408 or 429), a transient ledger condition.
    public var isRetryable: Bool {
        switch self {
        case .offline, .server: true
        case .rejected(let status, _, _): status == 408 || status == 429
        case .ledger(let error): error.isTransient
        case .unauthorized, .forbidden, .eventRefused, .gap, .protocolViolation, .stateFile, .cancelled: false
        }
    }

    /// Whether only an operator of the server can clear it (``gap(serverAcked:deviceCursor:)``).
    public var needsOperator: Bool {
        if case .gap = self { return true }
        return false
    }

    /// What happened.
    public var description: String {
        switch self {
        case .offline(let failure): "offline: \(failure)"
        case .server(let status, let m): "server error \(status): \(m)"
        case .unauthorized(let m): "unauthorized: \(m)"
        case .forbidden(let m): "forbidden: \(m)"
        case .rejected(let status, let code, let m): "rejected (\(status) \(code)): \(m)"
        case .eventRefused(let seq, let m): "the server refuses event \(seq): \(m)"
        case .gap(let acked, let cursor): "the server holds sequence \(acked) but the device committed \(cursor): the server lost acknowledged events (an operator must restore them)"
        case .protocolViolation(let m): "protocol violation: \(m)"
        case .ledger(let e): "ledger: \(e)"
        case .stateFile(let path, let reason): "\(path): \(reason)"
        case .cancelled: "cancelled"
        }
    }
}

/// Why the server could not be reached, in words: what ``SyncError/offline(_:)`` carries.
///
/// ```swift
/// if case .offline(let failure) = error, failure.reason == .timedOut { print("slow network:", failure) }
/// ```
public struct NetworkFailure: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The kind of failure.
    public enum Reason: String, Hashable, Sendable {
        /// No answer within the request's timeout.
        case timedOut
        /// Nothing accepts connections at the address (the server is down).
        case connectionRefused
        /// The host name does not resolve (DNS).
        case hostNotFound
        /// The TLS handshake failed (a certificate, a protocol mismatch).
        case tls
        /// The device has no network connection.
        case notConnected
        /// The connection closed before the answer.
        case connectionLost
        /// Anything else.
        case other
    }

    /// The kind of failure.
    public var reason: Reason
    /// The sentence saying what happened and where.
    public var message: String

    /// A failure of `reason`, said by `message`.
    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    /// A failure of reason ``Reason/other`` (what a test transport throws).
    public init(stringLiteral message: String) { self.init(.other, message) }

    /// The sentence.
    public var description: String { message }
}

/// `localizedDescription` says what happened (``SyncError/description``), not Foundation's
/// "The operation could not be completed. (InboxLedgerSync.SyncError error 0.)".
extension SyncError: LocalizedError {
    /// ``description``.
    public var errorDescription: String? { description }

    /// What the app does about it (the table above).
    public var recoverySuggestion: String? {
        switch self {
        case .offline, .server: "Nothing: the client retries with backoff."
        case .unauthorized: "Sign in again: the server refused the token and no new one was given."
        case .gap: "Contact support: the server lost events it had acknowledged, and an operator must restore them."
        case .forbidden, .rejected, .eventRefused, .protocolViolation: "Report a bug: the server refused the request or answered outside the protocol."
        case .ledger, .stateFile: "Check the device's storage: the ledger or the sync state file could not be read or written."
        case .cancelled: nil
        }
    }
}
