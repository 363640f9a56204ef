import Foundation
import InboxLedgerSync
import NIOCore
import Testing
@testable import ledger_server

/// `UpRequestReader`, the fast path of `POST /v1/up`, against `JSONDecoder`: what the client's
/// encoder writes it reads, to the same value; whatever it reads, `JSONDecoder` reads the same;
/// and anything unusual it leaves to `JSONDecoder` (nil).
@Suite struct UpRequestReaderTests {
    /// A generator of reproducible values.
    struct Random {
        var state: UInt64
        mutating func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        mutating func chance(_ percent: Int) -> Bool { next(100) < percent }
        mutating func string() -> String {
            let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1f}", "\u{7f}", "é", "\u{2028}", "😀", "€", "\u{fffd}", "ß"]
            return (0..<next(12)).map { _ in pieces[next(pieces.count)] }.joined()
        }
        mutating func number() -> UInt64 {
            [0, 1, 9, 10, 4711, UInt64(Int64.max), UInt64.max, UInt64(next(1_000_000))][next(8)]
        }
    }

    static func request(_ r: inout Random) -> SyncWire.UpRequest {
        let events = (0..<r.next(5)).map { _ -> SyncWire.UpEvent in
            var e = SyncWire.UpEvent(seq: r.number(), type: r.string(), key: r.chance(50) ? r.string() : nil,
                                     time: [Int64.min, -1, 0, 1_795_000_000_000_000, Int64.max][r.next(5)],
                                     payload: r.chance(70) ? r.string() : nil, payloadBase64: r.chance(40) ? "AP8=" : nil,
                                     role: r.chance(60) ? r.string() : nil)
            if r.chance(10) { e.payload = nil }
            return e
        }
        return SyncWire.UpRequest(ledger: r.string(), after: r.number(), through: r.number(), events: events,
                                  lostThrough: r.chance(30) ? r.number() : nil, refused: r.chance(30) ? (0..<r.next(3)).map { _ in r.number() } : nil)
    }

    static func read(_ data: Data) -> SyncWire.UpRequest? { UpRequestReader.read(ByteBuffer(bytes: data)) }

    /// Every body the client's encoder writes (and pretty-printed, slashes unescaped, every
    /// scalar escaped by hand) is read on the fast path, to JSONDecoder's value.
    @Test func whatTheEncoderWritesIsReadToTheDecodersValue() throws {
        var r = Random(state: 42)
        for i in 0..<400 {
            let request = Self.request(&r)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [[], [.prettyPrinted], [.withoutEscapingSlashes, .sortedKeys]][i % 3]
            let data = try encoder.encode(request)
            #expect(Self.read(data) == request, "\(String(decoding: data, as: UTF8.self))")
            #expect(try JSONDecoder().decode(SyncWire.UpRequest.self, from: data) == request)
        }
        // Every scalar escaped (surrogate pairs for astral ones), and nulls for the optional fields.
        let escaped = #"{"ledger":"\u004c\u00e9\ud83d\ude00","after":0,"through":3,"lostThrough":null,"refused":null,"events":[{"seq":1,"type":"\u0074","key":null,"time":-9223372036854775808,"payload":"\u0000\"\\\/\b\f\n\r\t","payloadBase64":null,"role":null}]}"#
        let expected = try JSONDecoder().decode(SyncWire.UpRequest.self, from: Data(escaped.utf8))
        #expect(Self.read(Data(escaped.utf8)) == expected)
        #expect(expected.ledger == "Lé😀" && expected.events.first?.payload == "\u{0}\"\\/\u{8}\u{c}\n\r\t" && expected.events.first?.time == Int64.min)
        // White space everywhere it may be.
        let spaced = " \n{ \"ledger\" :\t\"L\" , \"after\" : 0 ,\r\n \"through\" : 1 , \"events\" : [ { \"seq\" : 1 , \"type\" : \"t\" , \"time\" : 5 , \"payload\" : \"p\" } ] } \n"
        #expect(Self.read(Data(spaced.utf8)) == (try JSONDecoder().decode(SyncWire.UpRequest.self, from: Data(spaced.utf8))))
    }

    /// What the fast path does not expect it leaves to JSONDecoder: numbers in other forms, a lone
    /// surrogate, unknown or repeated fields, escaped names, a null where a value is required,
    /// trailing bytes, raw control characters, bytes that are not UTF-8.
    @Test func anythingUnusualIsLeftToTheDecoder() {
        let valid = #"{"ledger":"L","after":0,"through":1,"events":[{"seq":1,"type":"t","time":5,"payload":"p"}]}"#
        #expect(Self.read(Data(valid.utf8)) != nil)
        let replacements: [(String, String)] = [
            (#""seq":1"#, #""seq":1.0"#),
            (#""seq":1"#, #""seq":1e0"#),
            (#""seq":1"#, #""seq":01"#),
            (#""seq":1"#, #""seq":-1"#),
            (#""seq":1"#, #""seq":18446744073709551616"#),
            (#""time":5"#, #""time":-0"#),
            (#""time":5"#, #""time":9223372036854775808"#),
            (#""time":5"#, #""time":"5""#),
            (#""payload":"p""#, #""payload":"\ud800""#),
            (#""payload":"p""#, #""payload":"\udc00\ud800""#),
            (#""payload":"p""#, #""payload":"\ud800\u0041""#),
            (#""payload":"p""#, #""payload":"\x""#),
            (#""payload":"p""#, "\"payload\":\"a\u{1}b\""),
            (#""payload":"p""#, #""payload":"p","payload":"q""#),
            (#""payload":"p""#, #""payload":"p","extra":1"#),
            (#""seq":1"#, #""\u0073eq":1"#),
            (#""type":"t""#, #""type":null"#),
            (#""after":0,"#, ""),
            (#""after":0"#, #""after":0,"after":0"#),
        ]
        var unusual: [String] = replacements.map { valid.replacingOccurrences(of: $0.0, with: $0.1) }
        unusual += [valid + "x", valid + "{}", "\u{feff}" + valid, "[" + valid + "]", String(valid.dropLast())]
        for text in unusual { #expect(Self.read(Data(text.utf8)) == nil, "\(text)") }
        var bytes = Array(valid.utf8)
        bytes.insert(0xff, at: bytes.firstIndex(of: UInt8(ascii: "p")) ?? 0)
        #expect(Self.read(Data(bytes)) == nil)
    }

    /// Bodies mutated at random — bytes deleted, inserted, replaced, the tail cut: whatever the
    /// fast path reads, JSONDecoder reads too, to the same value.
    @Test func whatTheFastPathReadsTheDecoderReadsTheSame() throws {
        var r = Random(state: 7)
        let significant = Array(#"{}[]:,"\ -.0123456789eEnul/ubtrf"#.utf8) + [0x00, 0x1f, 0x7f, 0xc3, 0xa9, 0xff, 0xed, 0xa0, 0x80]
        var read = 0, checked = 0
        for _ in 0..<300 {
            let original = Array(try JSONEncoder().encode(Self.request(&r)))
            for _ in 0..<40 {
                var bytes = original
                for _ in 0..<(1 + r.next(3)) where !bytes.isEmpty {
                    let at = r.next(bytes.count)
                    switch r.next(4) {
                    case 0: bytes.remove(at: at)
                    case 1: bytes.insert(significant[r.next(significant.count)], at: at)
                    case 2: bytes[at] = significant[r.next(significant.count)]
                    default: bytes.removeLast(r.next(bytes.count - at + 1))
                    }
                }
                checked += 1
                guard let fast = Self.read(Data(bytes)) else { continue }
                read += 1
                let decoded = try? JSONDecoder().decode(SyncWire.UpRequest.self, from: Data(bytes))
                #expect(decoded == fast, "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
        #expect(read > 100 && read < checked, "\(read) of \(checked) read on the fast path")
    }
}
