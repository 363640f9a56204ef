import Foundation
import Testing
import TestSupport

/// The `--json` field names are a documented contract (docs/cli.md): every command's keys,
/// exactly, so a rename or a dropped field fails here.
@Suite struct CLIJSONContractTests {
    func keys(_ text: String) throws -> Set<String> { Set(try jsonObject(text).keys) }

    @Test func everyCommandPrintsExactlyTheDocumentedFields() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let lines = [
            #"{"type":"inbox.synced","data":{"mode":"full","messages":[{"id":"m1","title":"Hi","sentAt":"2026-11-22T08:00:00Z"}]}}"#,
            #"{"type":"widget.action","data":{"actionID":"a1","kind":"markRead","target":"m1"},"key":"k1"}"#,
        ].joined(separator: "\n")
        #expect(try ledger("append", path, input: lines).status == 0)

        let inspect = try ledger("inspect", path, "--json")
        #expect(try keys(inspect.stdout) == [
            "formatVersion", "ledgerID", "durabilityFloor", "projectionVersion", "createdAt", "headSequence", "firstSequence", "eventCount",
            "countsByType", "unknownTypes", "countsByOrigin", "idempotencyKeys", "fileBytes", "mapBytes", "usedBytes", "pageSize",
            "maxReaders", "readers", "staleReaders", "oldestReaderLag", "logPages", "totalPages", "lastTransactionID",
            "projectionsAppliedThrough", "warnings", "lastEvents", "snapshots", "lastCompaction", "consumers", "projections",
        ])
        let inspected = try jsonObject(inspect.stdout)
        #expect(inspected["lastCompaction"] is NSNull && inspected["oldestReaderLag"] != nil)

        let event = try ledger("events", path, "--json").stdout.split(separator: "\n").map(String.init)
        #expect(event.count == 2)
        #expect(try keys(event[1]) == ["sequence", "type", "origin", "timestamp", "key", "data", "source", "feed"])
        #expect(try keys(event[0]) == ["sequence", "type", "origin", "timestamp", "key", "data", "source", "feed"])  // key: null, feed: null
        #expect(try jsonObject(event[0])["key"] is NSNull)

        let widget = try ledger("widget", path, "--json")
        #expect(try keys(widget.stdout) == ["items", "unreadCount", "announced", "badge", "version", "updatedAt", "pendingActions"])
        let widgetObject = try jsonObject(widget.stdout)
        let item = try #require((widgetObject["items"] as? [[String: Any]])?.first)
        #expect(Set(item.keys) == ["id", "title", "subheading", "iconURL", "sentAt", "read"])
        let action = try #require((widgetObject["pendingActions"] as? [[String: Any]])?.first)
        #expect(Set(action.keys) == ["sequence", "actionID", "kind", "target", "name", "payload", "origin", "recordedAt"])

        let verify = try ledger("verify", path, "--json")
        #expect(try keys(verify.stdout) == ["healthy", "eventsChecked", "firstSequence", "headSequence", "snapshotsChecked", "findings", "warnings"])

        #expect(try ledger("consume", path, "--name", "host", "--limit", "1").status == 0)
        let consumers = try ledger("consumers", path, "--json")
        let consumer = try #require((try JSONSerialization.jsonObject(with: Data(consumers.stdout.utf8)) as? [[String: Any]])?.first)
        #expect(Set(consumer.keys) == ["name", "cursor", "lag", "lastSeen", "leaseAgeSeconds"])

        let compact = try ledger("compact", path, "--dry-run", "--json")
        #expect(try keys(compact.stdout) == [
            "dryRun", "snapshotSequence", "snapshotWritten", "trimmedFrom", "trimmedThrough", "eventsTrimmed", "keysForgotten",
            "snapshotsDeleted", "chunks", "seconds", "blockers", "expiredConsumers", "firstSequence", "headSequence",
        ])
    }
}
