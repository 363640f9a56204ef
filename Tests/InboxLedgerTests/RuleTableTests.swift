import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// docs/semantics.md's rule table, cell by cell, against the projector (a real ledger), the flow
/// model written from the docs (`FlowModel`) and the verification rebuild — read from the doc
/// itself, so the table cannot drift from what is tested. Fails when a state, an event or a cell
/// is missing, or a cell names a state the legend does not define.
@Suite struct RuleTableTests {
    static let semantics = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/semantics.md")

    /// Every state a message can be in, with the events that put a fresh inbox in it.
    static let setups: [String: [String]] = [
        "unknown": [],
        "announced": ["push m"],
        "announced·read": ["push m", "read m"],
        "announced·unread": ["push m", "unread m"],
        "unread": ["delta [m unread]"],
        "read": ["delta [m read]"],
        "read here": ["delta [m unread]", "read m"],
        "unread here": ["delta [m read]", "unread m"],
        "removed here": ["delta [m unread]", "remove m"],
    ]
    /// Every event that touches a message's state (the table must have a row for each).
    static let events = ["full [m]", "full [m read]", "full []", "delta [m]", "delta [m read]", "delta [m unread]",
                         "delta removed [m]", "push m", "push m (message)", "read m", "unread m", "remove m"]

    /// The rows of the markdown table whose header row starts with `header`, as cells.
    static func table(startingWith header: String, in text: String) -> [[String]] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix(header) }) else { return [] }
        return lines[start...].prefix { $0.hasPrefix("|") }
            .filter { !$0.hasPrefix("|---") }
            .map { line in line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    static func unquoted(_ cell: String) -> String { cell.replacingOccurrences(of: "`", with: "") }

    /// One event of the tables' notation (docs/semantics.md, "How to read the events").
    static func parse(_ text: String) throws -> DomainEvent {
        func fail() -> some Error { LedgerError.invalidArgument(name: "rule table event", reason: text) }
        let words = text.split(separator: " ").map(String.init)
        guard let verb = words.first else { throw fail() }
        switch verb {
        case "full", "delta":
            guard let open = text.firstIndex(of: "["), let close = text.firstIndex(of: "]") else { throw fail() }
            let inside = text[text.index(after: open)..<close]
            let entries = inside.split(separator: ",").map { $0.split(separator: " ").map(String.init) }.filter { !$0.isEmpty }
            if words.count > 1, words[1] == "removed" {
                return .inboxSynced(InboxSync(mode: .delta, messages: [], removed: entries.map { $0[0] }))
            }
            let messages = entries.map { entry in
                msg(entry[0], read: entry.count > 1 ? entry[1] == "read" : nil)
            }
            return .inboxSynced(InboxSync(mode: verb == "full" ? .full : .delta, messages: messages))
        case "push":
            guard words.count >= 2 else { throw fail() }
            let id = words[1]
            let badge = words.firstIndex(of: "badge").flatMap { $0 + 1 < words.count ? Int(words[$0 + 1]) : nil }
            return .pushReceived(PushReceived(messageID: id, message: text.contains("(message)") ? msg(id) : nil, badge: badge))
        case "read", "unread":
            guard words.count == 2 else { throw fail() }
            return .messageRead(ReadChange(ids: [words[1]], read: verb == "read"))
        case "remove":
            guard words.count == 2 else { throw fail() }
            return .messageRemoved(MessageRemoval(ids: [words[1]]))
        default:
            throw fail()
        }
    }

    /// A row's state from its server flag and local override, named as the table names it.
    static func rowState(server: Bool, local: Bool?) -> String {
        switch (server, local) {
        case (false, nil): "unread"
        case (true, nil): "read"
        case (false, true?): "read here"
        case (true, false?): "unread here"
        case (let server, let local?): "override \(local) equal to server \(server)"
        }
    }

    /// The state of `m` in the model, named as the table names it.
    static func state(of model: FlowModel) -> String {
        if let row = model.rows["m"] { return rowState(server: row.serverRead, local: row.localRead) }
        if let change = model.announced["m"] {
            switch change {
            case nil: return "announced"
            case true?: return "announced·read"
            case false?: return "announced·unread"
            }
        }
        return model.removedHere.contains("m") ? "removed here" : "unknown"
    }

    /// The state of `m` in the ledger's projection tables, named as the table names it.
    static func state(of ledger: Ledger) throws -> String {
        let record = try ledger.read("rule table") { txn in
            try txn.projections.get(.messages, Array("m".utf8)).map { bytes -> MessageRecord? in MessageRecord.decode(bytes) }
        }
        if let record {
            guard let record else { return "malformed" }
            return rowState(server: record.serverRead, local: record.localRead)
        }
        if let change = try ledger.read({ try $0.localChanges() }).first(where: { $0.id == "m" }) {
            switch (change.kind, change.localRead) {
            case (.announced, nil): return "announced"
            case (.announced, true?): return "announced·read"
            case (.announced, false?): return "announced·unread"
            case (.removed, _): return "removed here"
            }
        }
        return "unknown"
    }

    /// Appends `events` to a fresh ledger and folds them into a fresh model; checks that the
    /// verification rebuild agrees with the stored projections.
    static func run(_ events: [String]) throws -> (Ledger, FlowModel, TestLedger) {
        let t = try TestLedger()
        var model = FlowModel()
        for text in events {
            let event = try parse(text)
            try t.ledger.append(event)
            model.apply(event)
        }
        let mismatch = try t.ledger.maintenance.verifyProjections()
        #expect(mismatch == nil, "\(events): the verification rebuild differs: \(String(describing: mismatch))")
        return (t.ledger, model, t)
    }

    @Test func everyCellOfTheRuleTableHolds() throws {
        let text = try String(contentsOf: Self.semantics, encoding: .utf8)
        let matrix = Self.table(startingWith: "| event ↓ · state →", in: text)
        let legend = Self.table(startingWith: "| state | what it is |", in: text)
        try #require(matrix.count > 1 && legend.count > 1, "docs/semantics.md lost its rule table")

        // What each state shows: row ("—", "read", "unread"), unread, announced, badge.
        var shows: [String: (row: String, unread: Int, announced: Int, badge: Int)] = [:]
        for line in legend.dropFirst() where line.count == 6 {
            guard let unread = Int(line[3]), let announced = Int(line[4]), let badge = Int(line[5]) else {
                Issue.record("legend row \(line) is not numbers")
                continue
            }
            shows[line[0]] = (line[2], unread, announced, badge)
        }
        let states = Array(matrix[0].dropFirst())
        #expect(Set(states) == Set(Self.setups.keys), "the table's states \(states), expected \(Self.setups.keys.sorted())")
        #expect(Set(states).isSubset(of: Set(shows.keys)), "a state the legend does not define: \(Set(states).subtracting(shows.keys))")
        #expect(Set(shows.keys).isSubset(of: Set(states)), "states the legend defines with no column: \(Set(shows.keys).subtracting(states))")
        let rows = matrix.dropFirst().map { (event: Self.unquoted($0[0]), cells: Array($0.dropFirst())) }
        let reached = Set(rows.flatMap(\.cells))
        #expect(reached.isSubset(of: Set(states)), "cells lead to states with no column (their events are not stated): \(reached.subtracting(states))")
        #expect(Set(rows.map(\.event)) == Set(Self.events), "the table's events \(rows.map(\.event)), expected \(Self.events)")

        var checked = 0
        for row in rows {
            #expect(row.cells.count == states.count, "row \(row.event) has \(row.cells.count) cells for \(states.count) states")
            for (state, expected) in zip(states, row.cells) {
                guard let setup = Self.setups[state] else { continue }
                guard !expected.isEmpty, let display = shows[expected] else {
                    Issue.record("\(state) × \(row.event): the cell '\(expected)' is empty or names no state of the legend")
                    continue
                }
                let (ledger, model, t) = try Self.run(setup + [row.event])
                let cell = "\(state) × \(row.event) → \(expected)"
                #expect(try Self.state(of: ledger) == expected, "projector: \(cell)")
                #expect(Self.state(of: model) == expected, "model: \(cell)")
                let list = try ledger.read({ try $0.widgetList(limit: 10) })
                let shown = list.items.first { $0.id == "m" }.map { $0.read ? "read" : "unread" } ?? "—"
                #expect(shown == display.row && list.unreadCount == display.unread && list.announced == display.announced
                        && list.badge == display.badge,
                        "shown: \(cell): row \(shown), unread \(list.unreadCount), announced \(list.announced), badge \(list.badge)")
                #expect(model.mismatch(list: list, pending: []) == nil, "model vs ledger: \(cell)")
                withExtendedLifetime(t) {}
                checked += 1
            }
        }
        #expect(checked == Self.events.count * Self.setups.count)
    }

    /// The server's badge (docs/semantics.md, "Pushes and the badge"): each flow from an empty inbox.
    @Test func theServersBadgeTableHolds() throws {
        let text = try String(contentsOf: Self.semantics, encoding: .utf8)
        let flows = Self.table(startingWith: "| events | unread | announced | badge |", in: text)
        try #require(flows.count > 4, "docs/semantics.md lost the server's badge table")
        for line in flows.dropFirst() {
            let events = line[0].split(separator: ",").map { Self.unquoted($0.trimmingCharacters(in: .whitespaces)) }
            let (ledger, model, t) = try Self.run(events)
            let list = try ledger.read({ try $0.widgetList(limit: 10) })
            #expect([list.unreadCount, list.announced, list.badge] == [Int(line[1]), Int(line[2]), Int(line[3])],
                    "\(line[0]): unread \(list.unreadCount), announced \(list.announced), badge \(list.badge)")
            #expect(model.mismatch(list: list, pending: []) == nil, "model vs ledger: \(line[0])")
            withExtendedLifetime(t) {}
        }
    }
}
