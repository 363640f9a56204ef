// What an app needs to use the read models directly: `Identifiable` rows for SwiftUI lists,
// `Codable` values to hand to a widget's timeline or cache, `Date` where Foundation exists.

#if canImport(FoundationEssentials)
import FoundationEssentials
#elseif canImport(Foundation)
import Foundation
#endif

// MARK: - Timestamp

/// Encoded as its ISO 8601 text (`"2026-11-22T08:00:00Z"`), exact to the microsecond.
extension Timestamp: Codable {
    /// Decodes the ISO 8601 text ``iso8601`` writes (any offset; microsecond precision).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Timestamp(iso8601: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO 8601 timestamp: \(text)")
        }
        self = value
    }

    /// Encodes ``iso8601``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(iso8601)
    }
}

#if canImport(FoundationEssentials) || canImport(Foundation)
extension Timestamp {
    /// The instant of `date`, to the microsecond (rounded toward the past).
    ///
    /// ```swift
    /// let expiry = Timestamp(Date().addingTimeInterval(3600))
    /// ```
    public init(_ date: Date) {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded(.down)
        self.init(micros: micros >= Double(Int64.max) ? .max : micros <= Double(Int64.min) ? .min : Int64(micros))
    }

    /// The same instant as a `Date` (a `Double` of seconds: exact to about a microsecond today).
    public var date: Date { Date(timeIntervalSince1970: Double(micros) / 1_000_000) }
}
#endif

// MARK: - Read models (Codable, Identifiable where declared)

extension PendingAction {
    /// The sequence of the `widget.action` event (the action id is the widget's and may repeat across retries).
    public var id: UInt64 { sequence }
}

extension Event {
    /// The event's sequence number, unique in the ledger.
    public var id: UInt64 { sequence }
}

extension ConsumerInfo {
    /// The consumer's name, unique in the ledger.
    public var id: String { name }
}

// MARK: - Built-in payloads

extension BuiltInPayload {
    /// Decodes and validates the payload as the ledger does (the same rules and field paths as
    /// an append): a `Decodable` that never yields a value the ledger would refuse.
    public init(from decoder: any Decoder) throws {
        // Through the canonical bytes of what the decoder holds: the append's own decoder.
        let value = try JSONValue(from: decoder)
        func corrupted(_ field: String, _ reason: String) -> DecodingError {
            DecodingError.dataCorrupted(DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "\(field): \(reason)"))
        }
        let decoded: Result<Self, FieldError>
        do {
            let bytes = try EventJSON.encodeCanonical(value)
            decoded = try PayloadReader.read(bytes) { (r: inout PayloadReader) throws(JSONParser.Failure) in try Self.read(&r, depth: 0, path: "data") }
        } catch let error as LedgerError {
            guard case .invalidEvent(_, let field, let reason) = error else { throw error }
            throw corrupted(field, reason)
        } catch let error as JSONParser.Failure {
            throw corrupted("data", error.message)
        }
        switch decoded {
        case .success(let payload): self = payload
        case .failure(let error): throw corrupted(error.field, error.reason)
        }
    }
}


// MARK: - Errors

#if canImport(FoundationEssentials) || canImport(Foundation)
/// `localizedDescription` says what happened and where; ``recoverySuggestion`` what to do.
extension LedgerError: LocalizedError {
    /// ``description``: what happened and where.
    public var errorDescription: String? { description }

    /// What a person (or the calling code) can do about it.
    public var recoverySuggestion: String? {
        switch self {
        case .notALedger: "Check the path: open the directory that holds the ledger's data.mdb, or an empty or missing directory (whose parent exists) to create one."
        case .newerFormat, .newerProjections: "Update the app: a newer version of the library wrote this ledger."
        case .permissionDenied: "Check the file permissions and the data-protection class of the container, or open the ledger read-only."
        case .readOnly: "Open the ledger without readOnly to write."
        case .invalidEvent, .eventTooLarge, .invalidArgument, .eventDecoding: "Fix the input; nothing was written."
        case .idempotencyConflict: "Use a new idempotency key for different content, or resend the original content."
        case .unknownConsumer: "Register the consumer first with ledger.consumers.consumer(named:startingAt:)."
        case .consumerGap: "Rebase the consumer (Consumer.rebase) after rebuilding its state from the widget list or a snapshot."
        case .headMoved: "Read again, decide again, and append with the new head."
        case .consumerConflict: "Another instance of the consumer handled these events: read the next batch."
        case .corruptRecord, .corruptStore: "Run `ledger verify`; restore the ledger from a backup or create a new one (docs/operations.md)."
        case .filesNotShared: "Stop every process using the ledger, remove the extra link (or put the files back as one directory holding data.mdb and lock.mdb, no links), then reopen; back up with `ledger compact --copy-to`, never by linking or renaming files under running processes (docs/operations.md)."
        case .storeFull: "Free space on the device, or raise maxMapSize if the map reached it; run compaction to trim the log."
        case .suspended: "Call Ledger.resume() when the app is active again."
        case .writerBusy: "Retry later: nothing was written; another process holds the write lock."
        case .readerSlotsFull: "Retry once other processes close their ledgers or exit; `ledger inspect` lists the processes holding reader slots."
        case .projectionUpgradeNeeded: "Open once with LedgerOptions.projectionUpgrade = .fromNewestSnapshot to rebuild from the newest snapshot (docs/operations.md)."
        case .storage(_, _, let code, _) where FileSystem.isPathError(code):
            "Check the path: a directory on it is missing or is not a directory; nothing was written."
        case .projectionBuilding: "Show a placeholder and read again later (an observation does): a writable handle that registers it builds it in steps, in the background or in ledger.projections.build(); a killed build continues from its last step."
        case .projectionRejected: "Fix the event or the projection's apply function; nothing was written."
        case .projectionUnavailable: "Register the projection (LedgerOptions.projections) and open the ledger writable with it again (or call ledger.projections.build()), or update the process to the stored version (docs/semantics.md, \"App projections\")."
        case .cancelled: "Nothing to do: the task was cancelled, so the call did nothing."
        case .storage, .unexpected: "Retry; if it persists, report it with the message above."
        }
    }
}
#endif
