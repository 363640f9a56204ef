import Foundation
import Hummingbird
import Metrics
import Prometheus
import Synchronization

/// What an operator graphs and alerts on (docs/operations.md, "Watching the sync server"), in
/// swift-metrics, exposed by `GET /metrics` in Prometheus's text format when `serve` runs with
/// metrics (the default; `--no-metrics` turns them off). Without a metrics system bootstrapped
/// — the router tests, `--no-metrics` — every call here is swift-metrics' no-op.
///
/// Beside Hummingbird's `MetricsMiddleware` (requests by route, method and status
/// `hb_requests`, their latency histogram `http_server_request_duration`, errors
/// `hb_request_errors`, requests in flight `http_server_active_requests`):
///
/// | metric | kind | what |
/// |---|---|---|
/// | `ledger_store_duration_seconds{op="up"/"publish"/"feed"}` | histogram | one store call: the batch's statement with its commit, a publish, a feed read |
/// | `ledger_feed_entries_total` | counter | feed entries appended (by up batches and publishes) |
/// | `ledger_up_events_total{outcome="applied"/"duplicate"/"lost"/"refused"}` | counter | device events by what the server did with them |
/// | `ledger_long_polls_open` | gauge | long polls waiting now (read at each scrape) |
/// | `ledger_db_connections_in_use` | gauge | pooled PostgreSQL connections leased now (read at each scrape) |
/// | `ledger_db_connection_wait_seconds` | histogram | how long a request waited for a pooled connection |
/// | `ledger_db_up` | gauge | 1 while the database answers, 0 while it is down |
enum ServerMetrics {
    /// The store call `op` took `duration`.
    static func store(_ op: String, _ duration: Duration) {
        Timer(label: "ledger_store_duration_seconds", dimensions: [("op", op)], preferredDisplayUnit: .seconds).record(duration: duration)
    }

    /// Feed entries appended.
    static func feedEntries(_ count: Int64) {
        if count > 0 { Counter(label: "ledger_feed_entries_total").increment(by: Int(count)) }
    }

    /// Device events by outcome.
    static func upEvents(applied: Int64, duplicates: Int, lost: Int64, refused: Int64) {
        for (outcome, count) in [("applied", Int(applied)), ("duplicate", duplicates), ("lost", Int(lost)), ("refused", Int(refused))] where count > 0 {
            Counter(label: "ledger_up_events_total", dimensions: [("outcome", outcome)]).increment(by: count)
        }
    }

    /// A request waited `duration` for a pooled connection.
    static func connectionWait(_ duration: Duration) {
        Timer(label: "ledger_db_connection_wait_seconds", preferredDisplayUnit: .seconds).record(duration: duration)
    }

    /// Times `body` as the store call `op`.
    static func timing<T>(_ op: String, _ body: () async throws -> T) async rethrows -> T {
        let start = ContinuousClock.now
        defer { store(op, ContinuousClock.now - start) }
        return try await body()
    }
}

/// The gauges read at each scrape, and the Prometheus registry they go to.
struct MetricsEndpoint: Sendable {
    /// Where the metrics system writes (``ServerMetrics``, Hummingbird's middleware).
    let registry: PrometheusCollectorRegistry
    /// Read at each scrape: long polls open, connections in use, whether the database answers.
    let sample: @Sendable () -> (longPolls: Int, connectionsInUse: Int, databaseUp: Bool)

    /// `GET /metrics`: the gauges sampled, then everything in Prometheus's text format.
    func response() -> Response {
        let now = sample()
        Metrics.Gauge(label: "ledger_long_polls_open").record(now.longPolls)
        Metrics.Gauge(label: "ledger_db_connections_in_use").record(now.connectionsInUse)
        Metrics.Gauge(label: "ledger_db_up").record(now.databaseUp ? 1 : 0)
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }
}
