import Foundation
import InboxLedger
import InboxLedgerSync
import Testing

/// `GET /metrics` (issue 40; docs/operations.md, "Watching the sync server"): after a device's
/// batch, a long poll and a publish, the Prometheus text names each of them — requests by
/// route and status, the store's latency, feed entries, device events by outcome, long polls
/// open, the pool — and `--no-metrics` serves none.
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct MetricsServerTests {
    @Test func theMetricsNameWhatTheServerDid() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("mia"), backend = try await h.token("mia", scope: "publish")
            let read = SyncWire.UpEvent(Event(sequence: 1, timestampMicros: 1, origin: Origin(role: "t"), type: "message.read", key: nil,
                                              payload: try DomainEvent.messageRead(ReadChange(ids: ["m1"], read: true)).newEvent().payload))
            let batch = SyncWire.UpRequest(ledger: "M", after: 0, through: 1, events: [read])
            #expect(try await http("POST", url, "/v1/up", token: token, body: try JSONEncoder().encode(batch)).status == 200)
            #expect(try await http("POST", url, "/v1/up", token: token, body: try JSONEncoder().encode(batch)).status == 200)  // a duplicate
            #expect(try await http("GET", url, "/v1/down?after=0&wait=1", token: token).status == 200)
            try await publish(url, token: backend, ids: ["m2"])
            #expect(try await http("POST", url, "/v1/up", token: "forged", body: Data("{}".utf8)).status == 401)

            let (status, body) = try await http("GET", url, "/metrics", token: nil)
            #expect(status == 200)
            let text = String(decoding: body, as: UTF8.self)
            func value(_ prefix: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            }
            func sample(_ name: String, _ labels: [String]) -> Double? {
                let line = text.split(separator: "\n").first { line in
                    line.hasPrefix(name + "{") && labels.allSatisfy { line.contains($0) }
                }
                return line.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            }
            #expect(sample("hb_requests", [#"http_route="/v1/up""#, #"http_response_status_code="200""#]) == 2, "\(text)")
            #expect(sample("hb_requests", [#"http_route="/v1/up""#, #"http_response_status_code="401""#]) == 1)
            #expect(sample("http_server_request_duration_count", [#"http_route="/v1/down""#]) == 1)
            #expect(sample("ledger_store_duration_seconds_count", [#"op="up""#]) == 2)
            #expect(sample("ledger_store_duration_seconds_count", [#"op="publish""#]) == 1)
            #expect(value("ledger_feed_entries_total") == 2, "the read once, the listing once")
            #expect(sample("ledger_up_events_total", [#"outcome="applied""#]) == 1)
            #expect(sample("ledger_up_events_total", [#"outcome="duplicate""#]) == 1)
            #expect(value("ledger_long_polls_open") == 0)
            #expect(value("ledger_db_connections_in_use") == 0)
            #expect(value("ledger_db_up") == 1)
            #expect((value("ledger_db_connection_wait_seconds_count ") ?? 0) >= 4, "every store call leased a connection")
        }
    }

    @Test func noMetricsServesNone() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer(extra: ["--no-metrics"])
            #expect(try await http("GET", url, "/metrics", token: nil).status == 404)
            #expect(try await http("GET", url, "/healthz", token: nil).status == 200)
        }
    }
}
