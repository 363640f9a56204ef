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
        // Integers beyond Int64 become doubles (validation only needs their type).
        #expect(try JSONParser.parse(Array("12345678901234567890".utf8)) == .number(12345678901234567168))
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
