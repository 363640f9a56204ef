import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// Found from outside (issue 30's review): the rule table must have a column for every state a
/// message can reach — the legend's states and every state a cell leads to.
@Suite struct RuleTableTrialTests {
    @Test func everyStateTheTableCanLeadToHasAColumn() throws {
        let text = try String(contentsOf: RuleTableTests.semantics, encoding: .utf8)
        let matrix = RuleTableTests.table(startingWith: "| event ↓ · state →", in: text)
        let legend = RuleTableTests.table(startingWith: "| state | what it is |", in: text)
        try #require(matrix.count > 1 && legend.count > 1, "docs/semantics.md lost its rule table")
        let columns = Set(matrix[0].dropFirst())
        let reached = Set(matrix.dropFirst().flatMap { $0.dropFirst() })
        let defined = Set(legend.dropFirst().map { $0[0] })
        #expect(reached.isSubset(of: columns), "cells lead to states with no column (their events are not stated): \(reached.subtracting(columns).sorted())")
        #expect(defined.isSubset(of: columns), "states the legend defines with no column: \(defined.subtracting(columns).sorted())")
    }
}
