import Foundation
import InboxLedger

/// What a ``SyncClient`` shares and where it keeps its down cursor.
///
/// ```swift
/// var configuration = SyncConfiguration(server: server, token: token, stateFile: container + "/inbox.sync-state")
/// configuration.sharedTypes.insert("com.example.note-saved")
/// ```
public struct SyncConfiguration: Sendable {
    /// The built-in types a device shares: read state, removals, widget actions, completions.
    public static let defaultSharedTypes: Set<String> = [
        BuiltInEventType.messageRead.rawValue, BuiltInEventType.messageRemoved.rawValue,
        BuiltInEventType.widgetAction.rawValue, BuiltInEventType.actionCompleted.rawValue,
    ]

    /// The server's base URL.
    public var server: URL
    /// The device's bearer token (docs/sync.md, "Authentication").
    public var token: String
    /// The file holding the down cursor (outside the ledger's directory, which holds only the
    /// ledger's own files). Losing it only costs a replay (docs/sync.md, "Failure modes").
    public var stateFile: String
    /// The event types sent up: ``defaultSharedTypes`` plus the custom types the app marks.
    public var sharedTypes: Set<String>
    /// The relay consumer's name.
    public var consumerName = "sync-relay"
    /// Events the relay reads per up batch (1–1000).
    public var batchSize = 500
    /// The most bytes one up request may take (its JSON body, bounded from above): a batch
    /// is sent in parts below it, each with at least one event. Keep it below the server's
    /// body limit (`ledger-server serve --max-body`, 1 MiB by default); a 413 still halves the
    /// part and retries. At least 64 KiB.
    public var maxBatchBytes = 512 * 1024
    /// How often the running client renews the relay consumer's lease (idle or offline), so
    /// compaction does not trim events it has not sent. Keep it well below the compaction
    /// policy's `consumerLeaseSeconds` (docs/operations.md, "Compaction").
    public var leaseRenewal: Duration = .seconds(60)
    /// Feed entries per down request (1–1000).
    public var downPageSize = 500
    /// How long a down request waits on the server for a change (0–30 s).
    public var longPollSeconds = 25
    /// How long a request waits for the server's answer before it fails as
    /// ``NetworkFailure/Reason/timedOut`` (a long poll: its wait plus this), in seconds.
    public var timeoutSeconds: Double = 30
    /// The first retry's delay after a network or server failure; it doubles up to ``maxBackoff``.
    public var initialBackoff: Duration = .milliseconds(200)
    /// The longest delay between retries (and the delay after a broken answer or a ledger failure).
    public var maxBackoff: Duration = .seconds(30)
    /// Asked for a new token when the server refuses the current one (401: expired, revoked),
    /// with the refused token; the request is then sent again at once. Asked at most once per
    /// failure: if it throws, or the server refuses its token too, the direction stops with
    /// ``SyncError/unauthorized(_:)`` until the next ``SyncClient/run()``. Nil (the default):
    /// a 401 stops at once.
    ///
    /// ```swift
    /// configuration.tokenProvider = { refused in try await auth.freshToken(replacing: refused) }
    /// ```
    public var tokenProvider: (@Sendable (_ refused: String) async throws -> String)?

    /// Sync with `server` using `token`, keeping the down cursor in `stateFile`, sharing the
    /// default types plus `sharedCustomTypes`.
    public init(server: URL, token: String, stateFile: String, sharedCustomTypes: Set<String> = []) {
        self.server = server
        self.token = token
        self.stateFile = stateFile
        self.sharedTypes = Self.defaultSharedTypes.union(sharedCustomTypes)
    }
}

/// What one ``SyncClient/syncOnce()`` did.
public struct SyncReport: Hashable, Sendable {
    /// Shared events the server acknowledged (applied now or held already).
    public var sent = 0
    /// Of those, events the server already held (a resend).
    public var duplicates = 0
    /// Feed entries appended (replays included).
    public var received = 0
    /// The relay consumer's cursor afterwards.
    public var upCursor: UInt64 = 0
    /// The down cursor afterwards.
    public var downCursor: UInt64 = 0
    /// Events trimmed before they were sent, declared lost to the server (docs/sync.md, "Up").
    public var eventsLost: UInt64 = 0
    /// Events the server refused for their content, skipped and declared (docs/sync.md,
    /// "Refused events").
    public var eventsRefused: UInt64 = 0
}
