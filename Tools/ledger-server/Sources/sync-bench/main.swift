// The sync workloads of docs/sync.md, "Performance", against a running ledger-server
// (scripts/sync-bench.sh starts PostgreSQL and the server, mints the tokens and runs this):
//   up       one device's SyncClient sends N shared events (batches of 1000)   → events/s
//   ingest   50 devices at once, each sending batches of INGEST_BATCH (500) and waiting for the answer
//            before the next (the protocol)                                   → events/s, p50/p99 ack
//   down     a fresh device's SyncClient applies the feed (listings and reads) → entries/s, messages/s
//   sync-bench URL TOKENS-FILE DIR   (TOKENS-FILE: lines "user device-token publish-token")
import Foundation
import InboxLedger
import InboxLedgerSync
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

struct Failure: Error, CustomStringConvertible { var description: String }

let args = CommandLine.arguments
guard args.count == 4, let server = URL(string: args[1]) else {
    say("usage: sync-bench URL TOKENS-FILE DIR")
    exit(2)
}
let env = ProcessInfo.processInfo.environment
let upEvents = Int(env["UP_EVENTS"] ?? "") ?? 100_000
let devices = Int(env["DEVICES"] ?? "") ?? 50
let perDevice = Int(env["EVENTS_PER_DEVICE"] ?? "") ?? 10_000
let listings = Int(env["LISTINGS"] ?? "") ?? 200
let tokens: [(user: String, device: String, publish: String)] = try String(contentsOfFile: args[2], encoding: .utf8)
    .split(separator: "\n").map { line in
        let f = line.split(separator: " ").map(String.init)
        guard f.count == 3 else { throw Failure(description: "bad tokens line: \(line)") }
        return (f[0], f[1], f[2])
    }
guard tokens.count >= devices + 1 else { throw Failure(description: "need \(devices + 1) users in \(args[2])") }
let dir = args[3]
let since = ContinuousClock.now
func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

func readEvents(_ n: Int, prefix: String) throws -> [NewEvent] {
    try (0..<n).map { i in try DomainEvent.messageRead(ReadChange(ids: ["\(prefix)\(i % 500)"], read: i % 3 != 0)).newEvent() }
}

func post(_ path: String, token: String, body: Data, session: URLSession = .shared) async throws -> (Int, Data) {
    var request = URLRequest(url: server.appendingPathComponent(path))
    request.httpMethod = "POST"
    request.httpBody = body
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    let (data, response) = try await session.data(for: request)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
}

/// Which workloads run: SYNC_BENCH=up,ingest,down (default all three).
let workloads = Set((env["SYNC_BENCH"] ?? "up,ingest,down").split(separator: ",").map(String.init))

// MARK: up: one device, the real client path (ledger reads, encoding, HTTP, commit).
if workloads.contains("up") {
    let ledger = try Ledger(path: dir + "/up-device", options: LedgerOptions(role: "bench"))
    let events = try readEvents(upEvents, prefix: "m")
    for chunk in stride(from: 0, to: events.count, by: 1000) { try ledger.append(contentsOf: Array(events[chunk..<min(chunk + 1000, events.count)])) }
    let transport = HTTPSyncTransport(server: server, token: tokens[0].device)
    let start = ContinuousClock.now
    var sent = 0
    // What SyncClient's up loop does for each batch (without its down loop, measured below).
    let relay = try ledger.consumers.consumer(named: "sync-relay")
    while true {
        let batch = try relay.next(limit: 1000)
        if batch.events.isEmpty { break }
        let answer = try await transport.send(SyncWire.UpRequest(ledger: ledger.metadata.ledgerID, after: batch.after, through: batch.through, events: batch.events.map(SyncWire.UpEvent.init)))
        guard answer.acked == batch.through else { throw Failure(description: "acked \(answer.acked)") }
        try relay.commit(batch)
        sent += batch.events.count
    }
    let elapsed = seconds(ContinuousClock.now - start)
    say(String(format: "up      1 device, %d events in %.2f s: %.0f events/s (batches of 1000, each acknowledged before the cursor commit)", sent, elapsed, Double(sent) / elapsed))
}

// MARK: ingest: 50 devices at once.
if workloads.contains("ingest") {
    let batchSize = Int(env["INGEST_BATCH"] ?? "") ?? 500
    // INGEST_MIX=reads: every event a message.read (no custom events: the same work for a
    // server that relays custom events down the feed and one that does not).
    let onlyReads = env["INGEST_MIX"] == "reads"
    // Pre-encoded bodies: this measures the server and PostgreSQL, not the clients' encoding.
    var bodies: [[Data]] = []
    for d in 0..<devices {
        var list: [Data] = []
        for b in 0..<(perDevice / batchSize) {
            let events = (0..<batchSize).map { i -> SyncWire.UpEvent in
                let seq = UInt64(b * batchSize + i + 1)
                let read = onlyReads || i % 2 == 0
                let payload = read ? #"{"ids":["m\#(i % 100)"],"read":true}"# : #"{"n":\#(seq)}"#
                return SyncWire.UpEvent(Event(sequence: seq, timestampMicros: 0, origin: Origin(role: "bench"),
                                              type: read ? "message.read" : "com.example.note", key: nil, payload: Array(payload.utf8)))
            }
            list.append(try JSONEncoder().encode(SyncWire.UpRequest(ledger: "bench-\(d)", after: UInt64(b * batchSize),
                                                                   through: UInt64((b + 1) * batchSize), events: events)))
        }
        bodies.append(list)
    }
    let start = ContinuousClock.now
    let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
        for d in 0..<devices {
            let token = tokens[d + 1].device, list = bodies[d]
            group.addTask {
                // Each device its own session and connection, as 50 phones would have (URLSession.shared
                // on Linux opens at most 6 connections per host and queues the rest in the client).
                let session = URLSession(configuration: .ephemeral)
                defer { session.finishTasksAndInvalidate() }
                var times: [Double] = []
                for body in list {
                    let t0 = ContinuousClock.now
                    let (status, data) = try await post("v1/up", token: token, body: body, session: session)
                    guard status == 200 else { throw Failure(description: "ingest: \(status) \(String(decoding: data, as: UTF8.self))") }
                    times.append(seconds(ContinuousClock.now - t0) * 1000)
                }
                return times
            }
        }
        var all: [Double] = []
        for try await times in group { all += times }
        return all
    }.sorted()
    let elapsed = seconds(ContinuousClock.now - start)
    let total = devices * (perDevice / batchSize) * batchSize
    let p = { (q: Double) in latencies[min(latencies.count - 1, Int(Double(latencies.count) * q))] }
    let mix = onlyReads ? "every one a message.read" : "half message.read, half a custom event"
    say(String(format: "ingest  %d devices × %d events (batches of %d, \(mix)): %.0f events/s aggregate in %.2f s; ack p50 %.1f ms, p99 %.1f ms, max %.1f ms",
               devices, perDevice, batchSize, Double(total) / elapsed, elapsed, p(0.5), p(0.99), latencies.last ?? 0))
}

// MARK: down: listings and reads applied on a fresh device.
if workloads.contains("down") {
    let user = tokens[0]
    for l in 0..<listings {
        let messages = (0..<100).map { i in InboxMessage(id: "l\(l)-\(i)", title: "Listing \(l) message \(i)", sentAt: Timestamp(micros: 1_795_000_000_000_000 + Int64(l * 100 + i))) }
        let (status, data) = try await post("v1/publish", token: user.publish, body: try JSONEncoder().encode(SyncWire.PublishRequest(messages: messages)))
        guard status == 200 else { throw Failure(description: "publish: \(status) \(String(decoding: data, as: UTF8.self))") }
    }
    let ledger = try Ledger(path: dir + "/down-device", options: LedgerOptions(role: "bench"))
    var configuration = SyncConfiguration(server: server, token: user.device, stateFile: dir + "/down-device.sync-state")
    configuration.downPageSize = 500
    let client = try SyncClient(ledger: ledger, configuration: configuration)
    let start = ContinuousClock.now
    let report = try await client.syncOnce()
    let elapsed = seconds(ContinuousClock.now - start)
    let rows = try ledger.read({ try $0.widgetList(limit: 0) }).unreadCount
    say(String(format: "down    1 device applies %d feed entries (%d message.read from 'up', %d listings of 100 messages) in %.2f s: %.0f entries/s, %.0f listed messages/s; %d unread rows",
               report.received, report.received - listings, listings, elapsed, Double(report.received) / elapsed, Double(listings * 100) / elapsed, rows))
}
say(String(format: "total %.1f s", seconds(ContinuousClock.now - since)))
