import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// The whole inbox scenario across real processes (the roles `ledger simulate` plays): the host
/// app syncing, two widgets reading and recording actions, a notification extension recording
/// pushes, and the host's consumer completing actions.
@Suite(.serialized) struct ScenarioTests {
    let agent = Processes.product("LedgerTestAgent")
    let ledgerTool = Processes.product("ledger")

    func role(_ name: String, _ path: String, _ extra: [String]) throws -> RunningProcess {
        try Processes.start(ledgerTool, ["_role", name, path] + extra)
    }

    func checkFinalState(_ path: String) throws {
        let ledger = try Ledger(path: path)
        var model = FlowModel()
        var recorded: [String] = []
        var completions: [String: Int] = [:]
        var iterator = EventIterator(ledger, after: 0, pageSize: 2048)
        while let e = try iterator.next() {
            model.apply(try DomainEvent.decode(type: e.type, payload: e.payload))
            if e.type == "widget.action", case .widgetAction(let a) = try DomainEvent.decode(type: e.type, payload: e.payload) {
                recorded.append(a.actionID)
            }
            if e.type == "action.completed", case .actionCompleted(let c) = try DomainEvent.decode(type: e.type, payload: e.payload) {
                completions[c.actionID, default: 0] += 1
            }
        }
        // Every action completed exactly once.
        #expect(!recorded.isEmpty)
        #expect(Set(recorded).count == recorded.count)
        for id in recorded { #expect(completions[id] == 1, "action \(id) completed \(completions[id] ?? 0) times") }
        #expect(completions.count == recorded.count)
        #expect(try ledger.read({ try $0.pendingActions() }).isEmpty)
        // The projections equal the model and a rebuild.
        let list = try ledger.read({ try $0.widgetList(limit: 1000) })
        #expect(list.items.map(\.id) == model.orderedIDs)
        #expect(list.items.map(\.read) == model.orderedIDs.map { model.rows[$0]?.read == true })
        #expect(list.unreadCount == model.unread)
        #expect(list.badge == model.badge)
        #expect(try ledger.maintenance.verifyProjections() == nil)
    }

    func startWriters(_ path: String) throws -> [RunningProcess] {
        [
            try role("app", path, ["--count", "150", "--seed", "11"]),
            try role("widget", path, ["--count", "120", "--seed", "12", "--name", "widget-a"]),
            try role("widget", path, ["--count", "120", "--seed", "13", "--name", "widget-b"]),
            try role("notification-service", path, ["--count", "100", "--seed", "14"]),
            // Checks, while all this happens, that every list it reads is consistent.
            try Processes.start(agent, ["widget-reader", path, "2"]),
        ]
    }

    @Test func everyActionIsCompletedExactlyOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let ledger = try Ledger(path: path)
        _ = try ledger.consumers.consumer(named: "host-app")
        let host = try role("host", path, [])
        for p in try startWriters(path) {
            let out = try p.wait(timeout: 300)
            #expect(out.status == 0, "\(out.stderr)")
        }
        try ledger.append(NewEvent(type: "simulate.end", payload: Array("{}".utf8)))
        let hostOut = try host.wait(timeout: 300)
        #expect(hostOut.status == 0, "\(hostOut.stderr)")
        try checkFinalState(path)
    }

    @Test func killedConsumerNeitherSkipsNorRepeatsAnAction() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let ledger = try Ledger(path: path)
        _ = try ledger.consumers.consumer(named: "host-app")
        let writers = try startWriters(path)
        var rng = SeededGenerator(seed: 77)
        var kills = 0
        // Kill the host at random instants (mostly while it "works" between read and commit),
        // restarting it each time, while the writers run.
        while (writers.contains(where: { $0.process.isRunning }) || kills < 8) && kills < 20 {
            let host = try role("host", path, ["--pause-micros", "3000"])
            usleep(UInt32.random(in: 20_000...150_000, using: &rng))
            host.kill()
            let out = try host.wait(timeout: 30)
            #expect(out.signalled || out.status == 0, "\(out.stderr)")
            if out.signalled { kills += 1 }
        }
        for p in writers {
            let out = try p.wait(timeout: 300)
            #expect(out.status == 0, "\(out.stderr)")
        }
        #expect(kills > 0)
        try ledger.append(NewEvent(type: "simulate.end", payload: Array("{}".utf8)))
        let last = try Processes.run(ledgerTool, ["_role", "host", path], timeout: 300)
        #expect(last.status == 0, "\(last.stderr)")
        try checkFinalState(path)
    }
}
