import InboxLedger

/// What can go wrong while syncing, each case saying what and where.
///
/// ```swift
/// do { _ = try await client.syncOnce() } catch { print(error.isRetryable, error) }
/// ```
public enum SyncError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No answer: connection refused or dropped, DNS, a timeout. Retried with backoff.
    case network(String)
    /// The server failed (5xx). Retried with backoff.
    case server(status: Int, message: String)
    /// The token is missing, malformed, forged or expired (401).
    case unauthorized(String)
    /// The token's user may not do this (403: a ledger bound to another user, a wrong scope).
    case forbidden(String)
    /// The server refused the request (400, 413, …): nothing was written.
    case rejected(status: Int, code: String, message: String)
    /// The server holds less than the device acknowledged (`409 gap`: a restore from backup).
    case gap(serverAcked: UInt64, deviceCursor: UInt64)
    /// The server's answer broke the protocol (undecodable, a sequence out of order).
    case protocolViolation(String)
    /// The ledger failed (not transient: those are waited through).
    case ledger(LedgerError)
    /// The down-cursor state file could not be read or written.
    case stateFile(path: String, reason: String)
    /// The task was cancelled.
    case cancelled

    /// Whether retrying the same request later can succeed (network and server failures).
    public var isRetryable: Bool {
        switch self {
        case .network, .server: true
        case .ledger(let error): error.isTransient
        default: false
        }
    }

    /// What happened.
    public var description: String {
        switch self {
        case .network(let m): "network: \(m)"
        case .server(let status, let m): "server error \(status): \(m)"
        case .unauthorized(let m): "unauthorized: \(m)"
        case .forbidden(let m): "forbidden: \(m)"
        case .rejected(let status, let code, let m): "rejected (\(status) \(code)): \(m)"
        case .gap(let acked, let cursor): "the server holds sequence \(acked) but the device committed \(cursor): the server lost acknowledged events"
        case .protocolViolation(let m): "protocol violation: \(m)"
        case .ledger(let e): "ledger: \(e)"
        case .stateFile(let path, let reason): "\(path): \(reason)"
        case .cancelled: "cancelled"
        }
    }
}
