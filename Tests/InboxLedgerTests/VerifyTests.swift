import Foundation
import Testing
import TestSupport
@testable import InboxLedger
import LMDB

@Suite struct VerifyTests {
    func damagedLedger(_ damage: (Environment) throws -> Void) throws -> (TestLedger, VerificationReport) {
        let t = try TestLedger()
        try appendMixed(t.ledger, count: 200, seed: 8)
        #expect(try t.ledger.maintenance.verify().isHealthy)
        let env = try Environment.open(directory: t.path, configuration: EnvironmentConfiguration())
        try damage(env)
        return (t, try t.ledger.maintenance.verify())
    }

    @Test func healthyLedgerIncludingACompactedOne() throws {
        let t = try TestLedger()
        try appendMixed(t.ledger, count: 300, seed: 9)
        let c = try t.ledger.consumers.consumer(named: "host")
        try c.commit(try c.next(limit: 250))
        try Compactor(ledger: t.ledger, policy: policy(tail: 10)).runOnce()
        let report = try t.ledger.maintenance.verify()
        #expect(report.isHealthy, "\(report.findings)")
        #expect(report.eventsChecked == 50)
        #expect(report.firstSequence == 251 && report.headSequence == 300)
        #expect(report.snapshotsChecked == 1)
    }

    @Test func flippedByteInARecordIsPinpointed() throws {
        let (_, report) = try damagedLedger { env in
            let events = try env.database("events")
            var record = try #require(try env.read { try $0.get(events, key: SequenceKey.encode(77)) })
            record[40] ^= 0x01
            try env.write { try $0.put(events, key: SequenceKey.encode(77), value: record) }
        }
        #expect(report.findings.count == 1)
        guard case .corruptRecord(77, let reason)? = report.findings.first else {
            Issue.record("\(report.findings)")
            return
        }
        #expect(reason.contains("checksum mismatch"))
    }

    @Test func missingSequenceIsNamed() throws {
        let (_, report) = try damagedLedger { env in
            let events = try env.database("events")
            try env.write { txn in
                try txn.delete(events, key: SequenceKey.encode(120))
                try txn.delete(events, key: SequenceKey.encode(121))
            }
        }
        #expect(report.findings.contains(.missingSequences(from: 120, through: 121)))
    }

    @Test func alteredProjectionRowIsNamed() throws {
        let (_, report) = try damagedLedger { env in
            let actions = try RawProjectionTable(env, .actionIDs)
            try env.write { try $0.put(actions, key: Array("ghost".utf8), value: ActionStatus(sequence: 1, state: .pending, completedAt: 0).encode()) }
        }
        #expect(report.findings.count == 1)
        guard case .projection(let mismatch)? = report.findings.first else {
            Issue.record("\(report.findings)")
            return
        }
        #expect(mismatch.table == "action-ids" && mismatch.key == "ghost" && mismatch.expected == nil)
    }

    @Test func headAndConsumerAnomalies() throws {
        let (t, report) = try damagedLedger { env in
            let meta = try env.database("meta")
            try env.write { try $0.put(meta, key: Array("head".utf8), value: SequenceKey.encode(150)) }
        }
        #expect(report.findings.contains(.headMismatch(recorded: 150, lastRecord: 151)))
        _ = t
    }
}
