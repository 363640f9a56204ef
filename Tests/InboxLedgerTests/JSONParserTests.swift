import Foundation
import Testing
import TestSupport
@testable import InboxLedger

@Suite struct JSONParserTests {
    @Test func parsesWhatFoundationParses() throws {
        let documents = [
            #"{"a":1,"b":[true,false,null],"c":{"d":"x\"y\\z\/\n\t\u00e9\ud83d\ude00"},"e":-0.5e3,"f":""}"#,
            #"[]"#, #"{}"#, #"  [ 1 , 2 ]  "#, #""just a string""#, #"-0"#, #"1E2"#,
        ]
        for text in documents {
            let ours = try JSONParser.parse(Array(text.utf8))
            let theirs = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
            let ourCanonical = try EventJSON.encodeCanonical(ours)
            let theirCanonical = try JSONSerialization.data(withJSONObject: theirs, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
            #expect(try JSONSerialization.jsonObject(with: Data(ourCanonical), options: [.fragmentsAllowed]) as? NSObject
                    == JSONSerialization.jsonObject(with: theirCanonical, options: [.fragmentsAllowed]) as? NSObject, "\(text)")
        }
        #expect(try JSONParser.parse(Array(#""\ud83d\ude00""#.utf8)) == .string("😀"))
        #expect(try JSONParser.parse(Array("7".utf8)) == .integer(7))
        #expect(try JSONParser.parse(Array("7.0".utf8)) == .number(7))
    }

    @Test func rejectsWhatIsNotJSON() {
        let bad = ["", "{", "[1,]", "{\"a\"}", "{\"a\":}", "01", "1.", "-", "tru", "nul", "\"\\x\"", "\"\u{01}\"", "[1 2]",
                   "{\"a\":1,}", "\"\\ud800\"", "\"\\ud800\\u0041\"", "1 2", "NaN", "Infinity", "1e999"]
        for text in bad {
            #expect(throws: JSONParser.Failure.self, "\(text)") { try JSONParser.parse(Array(text.utf8)) }
        }
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }  // invalid UTF-8
    }

    @Test func deepNestingIsBoundedNotACrash() {
        let deep = Array(String(repeating: "[", count: 100_000).utf8)
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(deep) }
        let ok = Array((String(repeating: "[", count: 60) + String(repeating: "]", count: 60)).utf8)
        #expect(throws: Never.self) { try JSONParser.parse(ok) }
    }

    @Test func randomBytesNeverCrashTheDecoders() {
        var rng = SeededGenerator(seed: 404)
        let alphabet = Array(#"{}[]":,0123456789-+.eEtruefalsn\ abc"#.utf8) + [0x00, 0xFF, 0xC3, 0xA9]
        for _ in 0..<20_000 {
            let bytes = (0..<Int.random(in: 0...40, using: &rng)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }
            _ = try? JSONParser.parse(bytes)
            for type in DomainEvent.builtInTypes { _ = try? DomainEvent.decode(type: type, payload: bytes) }
        }
    }
}

/// Numbers and keys the canonical form could not keep are rejected, never silently changed
/// (two payloads differing only there would canonicalise alike and pass as retries).
@Suite struct JSONExactnessTests {
    @Test func numbersTheStoredFormCannotKeepAreRejected() {
        for text in ["12345678901234567891", "9223372036854775808", "-9223372036854775809",
                     "0.10000000000000000001", "1e-400", "123456789012345678.5", "1.00000000000000000000001"] {
            #expect(throws: JSONParser.Failure.self, "\(text)") { try JSONParser.parse(Array(text.utf8)) }
            do {
                _ = try EventJSON.parse(#"{"type":"app.n","data":{"n":\#(text)}}"#)
                Issue.record("accepted \(text)")
            } catch {
                #expect(error.description.contains("would not be stored exactly") || error.description.contains("does not fit"), "\(error)")
            }
        }
    }

    @Test func numbersThatRoundTripAreKept() throws {
        let kept: [(String, String)] = [
            ("9223372036854775807", "9223372036854775807"), ("-9223372036854775808", "-9223372036854775808"),
            ("0.1", "0.1"), ("1e2", "100"), ("1.50", "1.5"), ("-0", "0"), ("2.0", "2"), ("1.5e300", "1.5e+300"),
            ("0.30000000000000004", "0.30000000000000004"), ("123e-2", "1.23"),
        ]
        for (text, canonical) in kept {
            let bytes = try EventJSON.canonicalize(Array(text.utf8))
            #expect(String(decoding: bytes, as: UTF8.self) == canonical, "\(text)")
        }
    }

    @Test func payloadsDifferingOnlyInLongDigitsNeverCollide() throws {
        var rng = SeededGenerator(seed: 5)
        var seen: [[UInt8]: String] = [:]
        for _ in 0..<2000 {
            let digits = String((0..<Int.random(in: 1...24, using: &rng)).map { _ in Character(String(Int.random(in: 0...9, using: &rng))) })
            let text = Bool.random(using: &rng) ? "1" + digits : "0." + digits + "1"
            guard let canonical = try? EventJSON.canonicalize(Array(text.utf8)) else { continue }
            if let other = seen[canonical] {
                #expect(ExactDecimal(other) == ExactDecimal(text), "\(other) and \(text) canonicalise alike")
            }
            seen[canonical] = text
        }
        #expect(seen.count > 100)
    }

    @Test func duplicateKeysAreRejected() {
        for text in [#"{"a":1,"a":2}"#, #"{"x":{"b":true,"b":true}}"#, #"[{"k":1,"j":2,"k":3}]"#] {
            #expect(throws: JSONParser.Failure.self, "\(text)") { try JSONParser.parse(Array(text.utf8)) }
        }
        do {
            _ = try EventJSON.parse(#"{"type":"badge.adjusted","data":{"delta":1,"delta":5}}"#)
            Issue.record("accepted a duplicate key")
        } catch {
            #expect(error.description.contains("duplicate key \"delta\""), "\(error)")
        }
    }
}
