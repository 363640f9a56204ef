import Foundation
import InboxLedger
import InboxLedgerSync
import Logging
import NIOCore
import Testing
@testable import ledger_server

/// The argument of `ledger_up_v5` as the routes build it from a request: the compact JSON the
/// SQL function reads (Migrations.swift, migration 7), field for field — each feed entry naming
/// its event by `seq`.
@Suite struct UpBatchTests {
    @Test func aValidatedRequestIsTheCompactBatchTheFunctionReads() throws {
        let note = SyncWire.UpEvent(Event(sequence: 4, timestampMicros: 4, origin: Origin(role: "t"), type: "com.example.note", key: "n-4",
                                          payload: [0xfe, 0x00]))
        let request = SyncWire.UpRequest(ledger: "p1", after: 0, through: 5, events: [
            try read(1, "m1"), try wire(2, .messageRemoved(MessageRemoval(ids: ["m2", "m3"]))),
            try wire(3, .widgetAction(WidgetAction(actionID: "a3", kind: .markRead, target: "m4"))), note,
        ], lostThrough: nil)
        let api = API(store: MemoryStore(), limits: RequestLimits(), logger: Logger(label: "batch"))
        let batch = UpBatch(user: "ann", request: request, events: try api.validate(request), maxLedgers: 100)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = String(decoding: try encoder.encode(batch), as: UTF8.self)
        let expected = #"""
            {"after":0,"events":[\#
            {"feed":[{"seq":1}],"payload":"{\"ids\":[\"m1\"],\"read\":true}","reads":[{"id":"m1","read":true}],"seq":1,"time":1,"type":"message.read"},\#
            {"feed":[{"seq":2}],"payload":"{\"ids\":[\"m2\",\"m3\"]}","removed":["m2","m3"],"seq":2,"time":2,"type":"message.removed"},\#
            {"feed":[{"payload":"{\"ids\":[\"m4\"],\"read\":true}","seq":3,"type":"message.read"}],\#
            "payload":"{\"actionID\":\"a3\",\"kind\":\"markRead\",\"target\":\"m4\"}","reads":[{"id":"m4","read":true}],"seq":3,"time":3,"type":"widget.action"},\#
            {"base64":true,"feed":[{"role":"t","seq":4}],"key":"n-4","payload":"/gA=","seq":4,"time":4,"type":"com.example.note"}],\#
            "ledger":"p1","maxCustomEntries":1000000,"maxLedgers":100,"refused":[],"through":5,"user":"ann","version":2}
            """#
        #expect(json == expected)
        #expect(try JSONDecoder().decode(UpBatch.self, from: Data(json.utf8)) == batch)
        #expect(batch.events.map { $0.feedEntries(ledger: "p1").map(\.type) } == [["message.read"], ["message.removed"], ["message.read"], ["com.example.note"]])
        #expect(batch.events[0].feedEntries(ledger: "p1").first?.payload == batch.events[0].payload)
        // A custom event's entry: the event itself, its stored payload (base64 here) and its origin.
        #expect(batch.events[3].feedEntries(ledger: "p1") == [UpBatch.FeedRow(
            type: "com.example.note", payload: "/gA=", base64: true,
            origin: SyncWire.ChangeOrigin(ledger: "p1", seq: 4, time: 4, role: "t", key: "n-4"))])
        #expect(batch.events[0].feedEntries(ledger: "p1").allSatisfy { $0.origin == nil && !$0.base64 })
        // An up event without a role (an older client): the entry says `device`.
        var anonymous = note
        anonymous.role = nil
        let older = try api.validate(SyncWire.UpRequest(ledger: "p1", after: 3, through: 4, events: [anonymous]))
        #expect(older.first?.feed == [.custom(role: "device")])
    }

    /// The hand-written writer PostgresStore sends (UpBatch+JSON.swift) gives the document
    /// `JSONEncoder` gives, for every optional field and every kind of string: quotes,
    /// backslashes, every control character, U+2028, astral scalars, slashes.
    @Test func theHandWrittenJSONIsTheEncodersDocument() throws {
        let nasty = "q\"b\\s/" + String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) }) + "\u{2028}é😀"
        var batches = [UpBatch(user: "ann", request: SyncWire.UpRequest(ledger: "p1", after: 3, through: 9, events: [], lostThrough: 7, refused: [8, 9]),
                               events: [], maxLedgers: 100)]
        batches.append(UpBatch(user: nasty, request: SyncWire.UpRequest(ledger: nasty, after: 0, through: 2, events: [], lostThrough: nil), events: [
            UpBatch.Event(seq: 1, type: nasty, key: nasty, time: -1, payload: nasty, base64: false,
                          feed: [.event, UpBatch.FeedEntry(type: nasty, payload: nil), UpBatch.FeedEntry(type: nil, payload: nasty),
                                 UpBatch.FeedEntry(type: "t", payload: "p"), .custom(role: nasty), UpBatch.FeedEntry(type: "t", role: "r"),
                                 UpBatch.FeedEntry(payload: "p", role: "r"), UpBatch.FeedEntry(type: "t", payload: "p", role: "r")],
                          reads: [UpBatch.Read(id: nasty, read: true), UpBatch.Read(id: "x", read: false)], removed: [nasty, ""]),
            UpBatch.Event(seq: Int64.max, type: "t", key: nil, time: Int64.min, payload: "/gA=", base64: true),
        ], maxLedgers: Int.max, maxCustomEntries: Int.max))
        for batch in batches {
            var buffer = ByteBuffer()
            batch.writeJSON(into: &buffer)
            let written = Data(buffer.readableBytesView)
            #expect(try JSONDecoder().decode(UpBatch.self, from: written) == batch)
            let fromEncoder = try JSONSerialization.jsonObject(with: JSONEncoder().encode(batch)) as? NSDictionary
            let fromWriter = try JSONSerialization.jsonObject(with: written) as? NSDictionary
            #expect(fromWriter != nil && fromWriter == fromEncoder)
        }
    }
}
