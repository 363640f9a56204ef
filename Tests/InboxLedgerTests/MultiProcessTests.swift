import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// What the agent's writers put in each payload: writer, batch number, batch size, index.
struct AgentPayload: Decodable, Equatable {
    var w: String
    var b: Int
    var n: Int
    var i: Int
}

func payload(_ event: Event) -> AgentPayload? {
    try? JSONDecoder().decode(AgentPayload.self, from: Data(event.payload))
}

/// Acknowledged batches from an agent's ack file: batch number → sequences.
func acknowledged(_ path: String) -> [Int: [UInt64]] {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
    var batches: [Int: [UInt64]] = [:]
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ")
        // A line cut short by a kill has fewer sequences than its batch size: ignore it.
        guard parts.count == 4, parts[0] == "batch", let b = Int(parts[1]), let n = Int(parts[2]) else { continue }
        let seqs = parts[3].split(separator: ",").compactMap { UInt64($0) }
        if seqs.count == n { batches[b] = seqs }
    }
    return batches
}

/// All events, checking that sequences are dense from 1.
func allEvents(_ ledger: Ledger) throws -> [Event] {
    var events: [Event] = []
    var iterator = EventIterator(ledger, after: 0, pageSize: 4096)
    while let e = try iterator.next() {
        #expect(e.sequence == UInt64(events.count + 1), "sequence \(e.sequence) at position \(events.count + 1)")
        events.append(e)
    }
    return events
}

@Suite(.serialized) struct MultiProcessTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test func fourWritersAndAReader() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try Ledger(path: path)
        let writers = 4, perWriter = 10_000
        let reader = try Processes.start(agent, ["read", path, String(writers * perWriter), "600"])
        let processes = try (0..<writers).map { w in
            try Processes.start(agent, ["write", path, "w\(w)", String(perWriter), String(1000 + w), dir.child("ack\(w)"), "100", "durable"])
        }
        for p in processes {
            let out = try p.wait(timeout: 600)
            #expect(out.status == 0, "writer failed: \(out.stderr)")
        }
        let readOut = try reader.wait(timeout: 600)
        #expect(readOut.status == 0, "reader: \(readOut.stderr)")

        let ledger = try Ledger(path: path)
        #expect(try ledger.read({ try $0.head() }) == UInt64(writers * perWriter))
        let events = try allEvents(ledger)
        #expect(events.count == writers * perWriter)
        var byWriter: [String: [Int]] = [:]
        for e in events {
            guard let p = payload(e) else { Issue.record("undecodable payload at \(e.sequence)"); continue }
            byWriter[p.w, default: []].append(p.i)
        }
        for w in 0..<writers {
            // Every event once, in the writer's own order.
            #expect(byWriter["w\(w)"] == Array(0..<perWriter))
            let acks = acknowledged(dir.child("ack\(w)"))
            let acked = acks.values.flatMap { $0 }
            #expect(acked.count == perWriter)
            for seq in acked { #expect(payload(events[Int(seq) - 1])?.w == "w\(w)") }
        }
    }

    /// The map starts at 64 KiB and must grow many times while three processes write: each
    /// growth is made by whichever process hit MAP_FULL and adopted by the others
    /// (MDB_MAP_RESIZED), and nothing acknowledged is lost.
    @Test func mapGrowthWhileSeveralProcessesWrite() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        var options = LedgerOptions(role: "app")
        options.initialMapSize = 64 << 10
        let ledger = try Ledger(path: path, options: options)
        let mapBefore = try ledger.maintenance.statistics().mapBytes
        let environment = ["LEDGER_INITIAL_MAP": String(64 << 10)]
        let processes = try (0..<3).map { w in
            try Processes.start(agent, ["write", path, "w\(w)", "3000", String(70 + w), dir.child("ack\(w)"), "50", "none"],
                                environment: environment)
        }
        for p in processes {
            let out = try p.wait(timeout: 600)
            #expect(out.status == 0, "writer failed: \(out.stderr)")
        }
        let events = try allEvents(ledger)
        #expect(events.count == 9000)
        for w in 0..<3 {
            for (_, seqs) in acknowledged(dir.child("ack\(w)")) {
                for s in seqs { #expect(payload(events[Int(s) - 1])?.w == "w\(w)") }
            }
        }
        #expect(try ledger.maintenance.statistics().mapBytes >= 8 * mapBefore, "the map grew from \(mapBefore)")
        #expect(try ledger.maintenance.verify().isHealthy)
    }

    @Test func killedWriterLosesNoAcknowledgedBatchAndLeavesNoPartialOne() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try Ledger(path: path)
        var rng = SeededGenerator(seed: 2026)
        var survivorsExpected: [String: Int] = [:]
        for round in 0..<20 {
            let victimRole = "victim\(round)"
            let victimAck = dir.child("victim\(round).ack")
            let victim = try Processes.start(agent, ["write", path, victimRole, "-1", String(round), victimAck, "50", "durable"])
            let survivors = try (0..<2).map { k in
                try Processes.start(agent, ["write", path, "s\(round)-\(k)", "200", String(round * 10 + k), dir.child("s\(round)-\(k).ack"), "20", "none"])
            }
            for k in 0..<2 { survivorsExpected["s\(round)-\(k)"] = 200 }
            usleep(UInt32.random(in: 30_000...250_000, using: &rng))
            victim.kill()
            let victimOut = try victim.wait(timeout: 30)
            #expect(victimOut.signalled, "round \(round): the victim exited before the kill: \(victimOut.stderr)")
            for s in survivors {
                // Bounded: a survivor stuck behind the dead writer's lock fails the test here.
                let out = try s.wait(timeout: 120)
                #expect(out.status == 0, "round \(round): survivor failed: \(out.stderr)")
            }

            let ledger = try Ledger(path: path)
            let events = try allEvents(ledger)
            var victimBatches: [Int: (n: Int, seen: Int)] = [:]
            var survivorIndexes: [String: [Int]] = [:]
            for e in events {
                guard let p = payload(e) else { continue }
                if p.w == victimRole {
                    victimBatches[p.b, default: (p.n, 0)].seen += 1
                } else if p.w.hasPrefix("s\(round)-") {
                    survivorIndexes[p.w, default: []].append(p.i)
                }
            }
            // No partial batch is visible.
            for (b, counts) in victimBatches {
                #expect(counts.seen == counts.n, "round \(round): batch \(b) has \(counts.seen) of \(counts.n) events")
            }
            // Every batch the victim saw committed is there, at the sequences it was told.
            for (b, seqs) in acknowledged(victimAck) {
                #expect(victimBatches[b] != nil, "round \(round): acknowledged batch \(b) lost")
                for seq in seqs {
                    let p = seq <= UInt64(events.count) ? payload(events[Int(seq) - 1]) : nil
                    #expect(p?.w == victimRole && p?.b == b, "round \(round): sequence \(seq) is not batch \(b)")
                }
            }
            for k in 0..<2 { #expect(survivorIndexes["s\(round)-\(k)"] == Array(0..<200)) }
        }
        // A fresh process opens the ledger and reads it whole.
        let ledger = try Ledger(path: path)
        let head = try ledger.read({ try $0.head() })
        let check = try Processes.run(agent, ["read", path, String(head), "60"])
        #expect(check.status == 0, "\(check.stderr)")
    }

    @Test func processesCreatingOneLedgerAtOnceAgree() throws {
        for round in 0..<10 {
            let dir = TemporaryDirectory()
            let path = dir.child("ledger")
            let processes = try (0..<4).map { k in
                try Processes.start(agent, ["append-key", path, "k\(k)", #"{"round":\#(round)}"#])
            }
            for p in processes {
                let out = try p.wait(timeout: 60)
                #expect(out.status == 0, "round \(round): \(out.stdout) \(out.stderr)")
            }
            let ledger = try Ledger(path: path)
            #expect(try ledger.read({ try $0.count() }) == 4)
            #expect(Set(try ledger.read({ try $0.events() }).compactMap(\.key)) == ["k0", "k1", "k2", "k3"])
        }
    }

    @Test func idempotencyKeysHoldAcrossProcesses() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try Ledger(path: path)
        let first = try Processes.run(agent, ["append-key", path, "push-9", #"{"delta":1}"#])
        #expect(first.status == 0)
        let retry = try Processes.run(agent, ["append-key", path, "push-9", #"{"delta":1}"#])
        #expect(retry.stdout == first.stdout)
        let conflict = try Processes.run(agent, ["append-key", path, "push-9", #"{"delta":2}"#])
        #expect(conflict.status == 2)
        #expect(conflict.stdout.contains("idempotency key 'push-9' was already used by event 1 with different content"))
        #expect(try Ledger(path: path).read { try $0.count() } == 1)
    }
}
