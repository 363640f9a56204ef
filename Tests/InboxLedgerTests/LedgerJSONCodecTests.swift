import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// The ledger's own Codable JSON codec (``LedgerJSONEncoder``, ``LedgerJSONDecoder``) against
/// Foundation's: the encoder must give, for every value, exactly the canonical bytes of
/// `JSONEncoder`'s output (idempotency keys compare them across versions), and the decoder
/// must decode what `JSONDecoder` decodes, to the same values, and refuse the rest with a
/// `DecodingError` at the value's path.
@Suite struct LedgerJSONCodecTests {
    // MARK: Generated values

    enum Choice: Codable, Equatable {
        case none
        case one(Int)
        case two(String, Double)
        case named(x: Int, y: [String]?)
    }

    enum Mode: String, Codable, CaseIterable { case open, closed, archived = "archived/old" }

    struct Inner: Codable, Equatable {
        var title: String
        var note: String?
        var when: Date
        var mode: Mode
    }

    struct Sample: Codable, Equatable {
        var name: String
        var count: Int
        var small: Int8
        var unsigned: UInt16
        var wide: Int32
        var big: UInt64
        var signed: Int64
        var ratio: Double
        var single: Float
        var flag: Bool
        var maybe: String?
        var maybeInt: Int?
        var when: Date
        var blob: Data
        var link: URL?
        var amount: Decimal?
        var tags: [String]
        var scores: [String: Int]
        var byNumber: [Int: String]
        var byBool: [Bool: Int]?
        var choice: Choice
        var choices: [Choice]
        var nested: Inner?
        var children: [Sample]
        var matrix: [[Double]]
        var optionals: [Int?]
        var free: JSONValue?
    }

    static let alphabet: [String] = ["a", "Z", "0", " ", "é", "ß", "中", "😀", "\"", "\\", "/", "\n", "\r", "\t", "\u{01}", "\u{1F}",
                                     "\u{7F}", "\u{2028}", "\u{0}", "\u{8}", "\u{C}", "e\u{301}", "ｚ", "\u{FEFF}"]

    static func string(_ rng: inout SeededGenerator, max: Int = 10) -> String {
        (0..<Int.random(in: 0...max, using: &rng)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }.joined()
    }

    static let doubles: [Double] = [
        0, -0.0, 1, -1, 0.1, 0.5, -2.25, 1e-7, 1e-5, 0.0001, 123.456, 1e15, 1e16, 1.5e16, 1e21, 1e22, 2e20, 3.0e20,
        9_007_199_254_740_992, -9_007_199_254_740_992, 9_007_199_254_740_994, 9_007_199_254_740_991, 123_456_789_012_345_680,
        Double.leastNonzeroMagnitude, Double.leastNormalMagnitude, 1.7976931348623157e308, -1.7976931348623157e308, Double.pi, 1.0 / 3, 100, 1e100,
    ]

    static let floats: [Float] = [0, -0.0, 0.1, 0.2, 1.1, -2.5, 16_777_216, 16_777_218, 1e10, 3.4028235e38, -3.4028235e38, Float.leastNonzeroMagnitude,
                                  Float.leastNormalMagnitude, 1e7, 1.1e7, 123456.7, 1e-5, Float.pi, 1.0 / 3]

    static func double(_ rng: inout SeededGenerator) -> Double {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: return doubles[Int.random(in: 0..<doubles.count, using: &rng)]
        case 1: return Double(Int.random(in: -1_000_000...1_000_000, using: &rng)) / 64
        case 2: return Double.random(in: -1e6...1e6, using: &rng)
        default:
            // Any finite bit pattern.
            while true {
                let d = Double(bitPattern: rng.next())
                if d.isFinite { return d }
            }
        }
    }

    static func float(_ rng: inout SeededGenerator) -> Float {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: return floats[Int.random(in: 0..<floats.count, using: &rng)]
        case 1: return Float.random(in: -1e4...1e4, using: &rng)
        default:
            while true {
                let f = Float(bitPattern: UInt32(truncatingIfNeeded: rng.next()))
                if f.isFinite { return f }
            }
        }
    }

    static let decimals = ["0", "3.14", "-12.5", "0.1", "1000", "0.000001", "-0", "1e3", "7.0", "123456789.125"]

    static func json(_ rng: inout SeededGenerator, depth: Int = 0) -> JSONValue {
        switch Int.random(in: 0...(depth > 2 ? 4 : 6), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .integer(Int64.random(in: Int64.min...Int64.max, using: &rng) >> Int64.random(in: 0...63, using: &rng))
        case 3:
            // An integral double reads back as an integer (in either decoder): kept apart.
            let d = double(&rng)
            return d.rounded() == d ? .integer(Int64(clamping: Int(exactly: d) ?? 0)) : .number(d)
        case 4: return .string(string(&rng))
        case 5: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in json(&rng, depth: depth + 1) })
        default:
            var o: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...3, using: &rng) { o[string(&rng, max: 4)] = json(&rng, depth: depth + 1) }
            return .object(o)
        }
    }

    static func sample(_ rng: inout SeededGenerator, depth: Int = 0, hostile: Bool = false) -> Sample {
        func maybe<T>(_ make: (inout SeededGenerator) -> T) -> T? { Bool.random(using: &rng) ? make(&rng) : nil }
        let choice: Choice = switch Int.random(in: 0..<4, using: &rng) {
        case 0: .none
        case 1: .one(Int.random(in: -99...99, using: &rng))
        case 2: .two(string(&rng), double(&rng))
        default: .named(x: Int.random(in: -5...5, using: &rng), y: maybe { rng in (0..<Int.random(in: 0...2, using: &rng)).map { _ in string(&rng) } })
        }
        var scores: [String: Int] = [:]
        for _ in 0..<Int.random(in: 0...4, using: &rng) { scores[string(&rng, max: 4)] = Int.random(in: -1000...1000, using: &rng) }
        var byNumber: [Int: String] = [:]
        for _ in 0..<Int.random(in: 0...3, using: &rng) { byNumber[Int.random(in: -50...50, using: &rng)] = string(&rng) }
        return Sample(
            name: string(&rng),
            count: Int.random(in: Int.min...Int.max, using: &rng) >> Int.random(in: 0...63, using: &rng),
            small: Int8.random(in: Int8.min...Int8.max, using: &rng),
            unsigned: UInt16.random(in: 0...UInt16.max, using: &rng),
            wide: Int32.random(in: Int32.min...Int32.max, using: &rng),
            // Beyond Int64.max only when the test wants values the canonical form refuses.
            big: hostile && Bool.random(using: &rng) ? UInt64.max - UInt64.random(in: 0...1000, using: &rng) : UInt64.random(in: 0...UInt64(Int64.max), using: &rng),
            signed: [Int64.min, Int64.max, 0, -1, Int64.random(in: -1_000_000...1_000_000, using: &rng)][Int.random(in: 0..<5, using: &rng)],
            ratio: double(&rng),
            single: float(&rng),
            flag: Bool.random(using: &rng),
            maybe: maybe { string(&$0) },
            maybeInt: maybe { Int.random(in: -10...10, using: &$0) },
            when: Date(timeIntervalSinceReferenceDate: [0, 12.5, -1e9, 7.0e8 + 0.123, double(&rng)][Int.random(in: 0..<5, using: &rng)]),
            blob: Data((0..<Int.random(in: 0...12, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }),
            link: maybe { rng in URL(string: ["https://a.example/x?y=1#z", "file:///tmp/a%20b", "mailto:x@y.z", "https://ü.example/ä"][Int.random(in: 0..<4, using: &rng)]) } ?? nil,
            amount: maybe { rng in
                let pool = hostile ? decimals + ["12345678901234567890.123", "0.10000000000000000001", "1e300", "123456789.123456789"] : decimals
                return Decimal(string: pool[Int.random(in: 0..<pool.count, using: &rng)])
            } ?? nil,
            tags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in string(&rng) },
            scores: scores,
            byNumber: byNumber,
            byBool: maybe { rng in [true: Int.random(in: 0...9, using: &rng), false: -1] },
            choice: choice,
            choices: (0..<Int.random(in: 0...2, using: &rng)).map { _ in [Choice.none, .one(1), .two("x", 0.5)][Int.random(in: 0..<3, using: &rng)] },
            nested: maybe { rng in Inner(title: string(&rng), note: Bool.random(using: &rng) ? string(&rng) : nil,
                                         when: Date(timeIntervalSinceReferenceDate: double(&rng)), mode: Mode.allCases[Int.random(in: 0..<3, using: &rng)]) },
            children: depth < 2 ? (0..<Int.random(in: 0...2, using: &rng)).map { _ in sample(&rng, depth: depth + 1, hostile: hostile) } : [],
            matrix: (0..<Int.random(in: 0...2, using: &rng)).map { _ in (0..<Int.random(in: 0...3, using: &rng)).map { _ in double(&rng) } },
            optionals: (0..<Int.random(in: 0...3, using: &rng)).map { _ in Bool.random(using: &rng) ? Int.random(in: 0...9, using: &rng) : nil },
            // (An optional JSONValue that is .null reads back as nil, in either decoder.)
            free: maybe { rng in json(&rng) }.flatMap { $0 == .null ? nil : $0 })
    }

    /// Today's canonical bytes: Foundation's encoder, then the ledger's canonicaliser.
    func reference<T: Encodable>(_ value: T) -> Result<[UInt8], any Error> {
        Result { try EventJSON.canonicalize(Array(JSONEncoder().encode(value))) }
    }

    func same<T: Encodable>(_ value: T, _ note: @autoclosure () -> String = "", sourceLocation: SourceLocation = #_sourceLocation) {
        let mine = Result { try LedgerJSONEncoder.encode(value) }
        switch (reference(value), mine) {
        case (.success(let a), .success(let b)):
            #expect(a == b, "\(note()): Foundation+canonical \(String(decoding: a, as: UTF8.self)) vs \(String(decoding: b, as: UTF8.self))", sourceLocation: sourceLocation)
        case (.failure, .failure): break
        case (.success(let a), .failure(let e)):
            Issue.record("\(note()): Foundation+canonical encodes \(String(decoding: a, as: UTF8.self)), the codec fails: \(e)", sourceLocation: sourceLocation)
        case (.failure(let e), .success(let b)):
            Issue.record("\(note()): Foundation+canonical fails (\(e)), the codec encodes \(String(decoding: b, as: UTF8.self))", sourceLocation: sourceLocation)
        }
    }

    // MARK: Encoder equivalence

    @Test func theEncoderGivesTheCanonicalBytesOfJSONEncoderForGeneratedValues() throws {
        var rng = SeededGenerator(seed: 38)
        for round in 0..<600 {
            let value = Self.sample(&rng, hostile: round % 3 == 0)
            same(value, "round \(round)")
        }
        for round in 0..<400 { same(Self.json(&rng), "JSON \(round)") }
    }

    @Test func edgeValuesEncodeAsTheCanonicalFormOfJSONEncodersOutput() {
        for d in Self.doubles { same(d, "\(d)"); same([d], "[\(d)]"); same(["k": d], "{k: \(d)}") }
        for f in Self.floats { same(f, "\(f)"); same(["k": f], "{k: \(f)}") }
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<3000 { let d = Self.double(&rng); same([d], "\(d)") }
        for _ in 0..<3000 { let f = Self.float(&rng); same([f], "\(f)") }
        for text in Self.decimals + ["12345678901234567890.123", "0.10000000000000000001", "1e300", "-1e-300", "18446744073709551616"] {
            let decimal = Decimal(string: text)
            same(decimal, text)
        }
        same(Decimal.nan, "NaN")
        for i: Int64 in [0, -1, 1, Int64.min, Int64.max, 10, -10, 999_999_999_999] { same(i, "\(i)") }
        for u: UInt64 in [0, UInt64(Int64.max), UInt64(Int64.max) + 1, UInt64.max] { same(u, "\(u)"); same([u], "[\(u)]") }
        same(Int128.max, "Int128.max")
        same(Int128(Int64.min), "Int128(Int64.min)")
        same(UInt128(7), "UInt128(7)")
        for s in Self.alphabet { same(s, s.debugDescription); same([s: s], s.debugDescription) }
        same(Date(timeIntervalSinceReferenceDate: 0.1), "date")
        same(Data([0, 1, 2, 255]), "data")
        same(Data(), "empty data")
        same(URL(string: "b/c", relativeTo: URL(string: "https://a.example/x/")), "relative URL")
        same([1: "a", 2: "b", -3: "c"], "[Int: String]")
        same([true: 1], "[Bool: Int]")
        same([1.5: "a"], "[Double: String]")
        same([Choice.named(x: 1, y: nil), .two("s", 1e-7)], "enums")
        same(Double.nan, "NaN")
        same(["x": [Double.infinity]], "nested infinity")
        same(Float.infinity, "Float infinity")
        same([String](), "empty array")
        same([String: Int](), "empty object")
        same(Optional<Int>.none, "nil at the top")
        same([Int?.none, 1], "nil in an array")
    }

    // MARK: Encoder semantics where containers are used by hand

    struct Custom: Encodable {
        let body: @Sendable (any Encoder) throws -> Void
        func encode(to encoder: any Encoder) throws { try body(encoder) }
    }

    enum K: String, CodingKey { case a, b, c }

    @Test func handWrittenEncodingsMatchJSONEncoder() {
        let cases: [(String, Custom)] = [
            ("a key twice: the last wins", Custom { e in
                var c = e.container(keyedBy: K.self)
                try c.encode(1, forKey: .a)
                try c.encode("two", forKey: .a)
            }),
            ("a nested container, then the key encoded", Custom { e in
                var c = e.container(keyedBy: K.self)
                var n = c.nestedContainer(keyedBy: K.self, forKey: .a)
                try n.encode(1, forKey: .b)
                try c.encode(2, forKey: .a)
            }),
            ("a nested container written after its parent's later keys", Custom { e in
                var c = e.container(keyedBy: K.self)
                var n = c.nestedContainer(keyedBy: K.self, forKey: .b)
                var u = c.nestedUnkeyedContainer(forKey: .c)
                try c.encode(0, forKey: .a)
                try n.encode(1, forKey: .b)
                try u.encode(true)
                var nn = n.nestedContainer(keyedBy: K.self, forKey: .a)
                try u.encode(false)
                try nn.encode("deep", forKey: .c)
            }),
            ("a nested container asked for twice continues the first", Custom { e in
                var c = e.container(keyedBy: K.self)
                var n1 = c.nestedContainer(keyedBy: K.self, forKey: .a)
                try n1.encode(1, forKey: .a)
                var n2 = c.nestedContainer(keyedBy: K.self, forKey: .a)
                try n2.encode(2, forKey: .b)
                var u1 = c.nestedUnkeyedContainer(forKey: .b)
                try u1.encode(1)
                var u2 = c.nestedUnkeyedContainer(forKey: .b)
                try u2.encode(2)
            }),
            ("the keyed container asked for twice", Custom { e in
                var c1 = e.container(keyedBy: K.self)
                try c1.encode(1, forKey: .b)
                var c2 = e.container(keyedBy: K.self)
                try c2.encode(2, forKey: .a)
            }),
            ("super encoders", Custom { e in
                var c = e.container(keyedBy: K.self)
                let s = c.superEncoder()
                var u = s.unkeyedContainer()
                try u.encode(1)
                try c.encode(3, forKey: .b)
                let s2 = c.superEncoder(forKey: .a)
                var k = s2.container(keyedBy: K.self)
                try c.encode(5, forKey: .c)
                try k.encode(4, forKey: .b)
            }),
            ("an unused super encoder is {}", Custom { e in
                var c = e.container(keyedBy: K.self)
                _ = c.superEncoder()
                try c.encode(1, forKey: .b)
                var u = c.nestedUnkeyedContainer(forKey: .c)
                _ = u.superEncoder()
                try u.encode(2)
            }),
            ("values that encode nothing are {}", Custom { e in
                var c = e.container(keyedBy: K.self)
                try c.encode(Custom { _ in }, forKey: .a)
                var u = c.nestedUnkeyedContainer(forKey: .b)
                try u.encode(Custom { _ in })
            }),
            ("a single value that encodes nothing is {}", Custom { e in
                var c = e.singleValueContainer()
                try c.encode(Custom { _ in })
            }),
            ("unkeyed nested containers", Custom { e in
                var u = e.unkeyedContainer()
                var k = u.nestedContainer(keyedBy: K.self)
                var inner = u.nestedUnkeyedContainer()
                try inner.encode(1)
                try k.encode("x", forKey: .c)
                try u.encodeNil()
                try inner.encode(2)
            }),
            ("keys that sort by bytes", Custom { e in
                var c = e.container(keyedBy: AnyKey.self)
                for name in ["b", "a", "é", "z", "Z", "aa", "10", "9", "😀", "ｚ", "", "a\u{0}", "\""] {
                    try c.encode(name, forKey: AnyKey(stringValue: name))
                }
            }),
            ("keys equal as strings are one key: the first spelling, the last value", Custom { e in
                var c = e.container(keyedBy: AnyKey.self)
                for (i, name) in ["e\u{301}", "b", "é", "K", "\u{212A}", "Z", "é"].enumerated() {
                    try c.encode(i, forKey: AnyKey(stringValue: name))
                }
                var n = c.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey(stringValue: "ö"))
                try n.encode(1, forKey: AnyKey(stringValue: "x"))
                var m = c.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey(stringValue: "o\u{308}"))
                try m.encode(2, forKey: AnyKey(stringValue: "y"))
            }),
        ]
        for (name, value) in cases { same(value, name) }
        // Nothing at all is an error, as in JSONEncoder.
        #expect(throws: EncodingError.self) { try LedgerJSONEncoder.encode(Custom { _ in }) }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    @Test func refusalsNameThePathAndNumbersAsWrittenKeepWhatJSONEncoderWrote() throws {
        struct Row: Codable, Equatable {
            var id: UInt64
            var amount: Decimal
            var values: [Double]
        }
        let row = Row(id: UInt64.max, amount: try #require(Decimal(string: "12345678901234567890.123")), values: [1, -0.0, 0.5])
        do {
            _ = try LedgerJSONEncoder.encode(row)
            Issue.record("an integer beyond 64 bits was kept")
        } catch let EncodingError.invalidValue(_, context) {
            #expect(context.codingPath.map(\.stringValue) == ["amount"] || context.codingPath.map(\.stringValue) == ["id"])
            #expect(context.debugDescription.contains("send it as a string"))
        }
        // Rows and documents keep them as JSONEncoder wrote them.
        let bytes = try LedgerJSONEncoder.encode(row, numbers: .asWritten)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"amount":12345678901234567890.123,"id":18446744073709551615,"values":[1,0,0.5]}"#)
        #expect(try LedgerJSONDecoder.decode(Row.self, from: bytes) == row)
        // Non-finite numbers are refused at their path, in both modes.
        for numbers in [LedgerJSONEncoder.Numbers.exact, .asWritten] {
            do {
                _ = try LedgerJSONEncoder.encode(["a": ["b": [0, Double.nan]]], numbers: numbers)
                Issue.record("NaN was encoded")
            } catch let EncodingError.invalidValue(_, context) {
                #expect(context.codingPath.map(\.stringValue) == ["a", "b", "Index 1"])
                #expect(context.debugDescription == "Unable to encode Double.nan directly in JSON.")
            }
            #expect(throws: EncodingError.self) { try LedgerJSONEncoder.encode(Decimal.nan, numbers: numbers) }
        }
        // A float is its own shortest decimal, not the double it converts to.
        #expect(String(decoding: try LedgerJSONEncoder.encode(["f": Float(0.1)]), as: UTF8.self) == #"{"f":0.1}"#)
    }

    // MARK: Decoder equivalence

    /// Decodes `bytes` as `T` with both decoders: equal values, or errors of the same kind at the
    /// same path (`JSONDecoder` reports a number a type cannot hold at the root: the codec at
    /// the value, checked by `numberPath`).
    func agree<T: Decodable & Equatable>(_ type: T.Type, _ text: String, numberPath: [String]? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        agree(type, Array(text.utf8), numberPath: numberPath, sourceLocation: sourceLocation)
    }

    func agree<T: Decodable & Equatable>(_ type: T.Type, _ bytes: [UInt8], numberPath: [String]? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        let text = String(decoding: bytes, as: UTF8.self)
        let foundation = Result { try JSONDecoder().decode(T.self, from: Data(bytes)) }
        let mine = Result { try LedgerJSONDecoder.decode(T.self, from: bytes) }
        switch (foundation, mine) {
        case (.success(let a), .success(let b)):
            #expect(a == b, "\(T.self) from \(text): \(a) vs \(b)", sourceLocation: sourceLocation)
        case (.failure(let a as DecodingError), .failure(let b as DecodingError)):
            let (ka, pa) = Self.summary(a), (kb, pb) = Self.summary(b)
            #expect(ka == kb, "\(T.self) from \(text): \(a) vs \(b)", sourceLocation: sourceLocation)
            if let numberPath {
                #expect(pb == numberPath, "\(T.self) from \(text): \(b)", sourceLocation: sourceLocation)
            } else {
                #expect(pa == pb, "\(T.self) from \(text): \(a) vs \(b)", sourceLocation: sourceLocation)
            }
        default:
            Issue.record("\(T.self) from \(text): Foundation \(foundation), codec \(mine)", sourceLocation: sourceLocation)
        }
    }

    static func summary(_ error: DecodingError) -> (String, [String]) {
        func keys(_ path: [any CodingKey]) -> [String] { path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue } }
        switch error {
        case .typeMismatch(_, let c): return ("typeMismatch", keys(c.codingPath))
        case .valueNotFound(_, let c): return ("valueNotFound", keys(c.codingPath))
        case .keyNotFound(let k, let c): return ("keyNotFound", keys(c.codingPath + [k]))
        case .dataCorrupted(let c): return ("dataCorrupted", keys(c.codingPath))
        @unknown default: return ("unknown", [])
        }
    }

    @Test func theDecoderReadsWhatJSONDecoderReadsToTheSameValues() throws {
        var rng = SeededGenerator(seed: 2038)
        let sorted = JSONEncoder()
        sorted.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let pretty = JSONEncoder()
        pretty.outputFormatting = [.prettyPrinted]
        for round in 0..<500 {
            let value = Self.sample(&rng)
            let canonical = try LedgerJSONEncoder.encode(value)
            // Round trips, through its own bytes and through every form Foundation writes.
            let back = try LedgerJSONDecoder.decode(Sample.self, from: canonical)
            #expect(back == value, "round \(round) \(Self.diff(back, value))")
            for encoder in [JSONEncoder(), sorted, pretty] {
                let bytes = Array(try encoder.encode(value))
                agree(Sample.self, bytes)
                #expect(try LedgerJSONDecoder.decode(Sample.self, from: bytes) == value, "round \(round)")
            }
            agree(Sample.self, canonical)
            let free = Self.json(&rng)
            agree(JSONValue.self, try LedgerJSONEncoder.encode(free))
            #expect(try LedgerJSONDecoder.decode(JSONValue.self, from: try LedgerJSONEncoder.encode(free)) == free)
        }
        // Values beyond the canonical form's numbers, as rows may hold them.
        for _ in 0..<100 {
            let value = Self.sample(&rng, hostile: true)
            let bytes = try LedgerJSONEncoder.encode(value, numbers: .asWritten)
            #expect(try LedgerJSONDecoder.decode(Sample.self, from: bytes) == value)
            agree(Sample.self, bytes)
        }
    }

    static func diff(_ a: Sample, _ b: Sample) -> String {
        func equal<T: Equatable>(_ a: T, _ b: Any) -> Bool { a == b as? T }
        return zip(Mirror(reflecting: a).children, Mirror(reflecting: b).children).compactMap { x, y in
            guard let e = x.value as? any Equatable, !equal(e, y.value) else { return nil }
            if let c = x.value as? [Sample], let d = y.value as? [Sample] { return zip(c, d).map { diff($0, $1) }.joined(separator: "; ") }
            return "\(x.label ?? ""): \(x.value) vs \(y.value)"
        }.joined(separator: "; ")
    }

    struct Accented: Codable, Equatable { var é: Int; var K: Int }
    struct Item: Codable, Equatable { var n: Int }
    struct Items: Codable, Equatable { var items: [Item]; var title: String? }
    struct Flags: Codable, Equatable { var b: Bool; var s: String?; var d: Date?; var u: URL?; var x: Data?; var m: Decimal? }

    @Test func numbersConvertAsJSONDecoderConvertsThem() throws {
        for text in ["0", "-0", "1", "-1", "1.0", "1e2", "1E2", "0.5e1", "50e-1", "-0.0", "0e-5", "0.0e-400", "1.0000000000000001",
                     "127", "128", "-128", "-129", "255", "256", "300", "32767", "65535", "65536", "2147483648", "4294967296",
                     "9007199254740992", "9007199254740993", "9007199254740993.0", "123456789012345678.0", "1e18", "1e19",
                     "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "-9.223372036854775808e18",
                     "9007199254740993.5", "-9007199254740993.9", "1.2345678901234567891e20", "1e20", "-1e19", "1e40",
                     "18446744073709551615", "18446744073709551616", "1.8446744073709551615e19", "1.5", "5e-1", "1e400", "-1e400",
                     "1e-400", "0e-400", "1.7976931348623157e308", "1.7976931348623159e308", "3.4028235e38", "3.4028236e38",
                     "3.5e38", "1e-45", "1e-46", "0.1", "123", "2.5e-3", "170141183460469231731687303715884105727"] {
            agree(Int8.self, text, numberPath: [])
            agree(Int16.self, text, numberPath: [])
            agree(Int32.self, text, numberPath: [])
            agree(Int.self, text, numberPath: [])
            agree(Int64.self, text, numberPath: [])
            agree(UInt8.self, text, numberPath: [])
            agree(UInt16.self, text, numberPath: [])
            agree(UInt32.self, text, numberPath: [])
            agree(UInt.self, text, numberPath: [])
            agree(UInt64.self, text, numberPath: [])
            agree(Int128.self, text, numberPath: [])
            agree(UInt128.self, text, numberPath: [])
            agree(Double.self, text, numberPath: [])
            agree(Float.self, text, numberPath: [])
            agree(Decimal.self, text, numberPath: [])
            agree(Date.self, text, numberPath: [])
            agree([String: Int8].self, #"{"v":\#(text)}"#, numberPath: ["v"])
            agree([Double].self, "[0,\(text)]", numberPath: ["[1]"])
        }
        // The one number JSONDecoder refuses and the codec reads: a zero with a short exponent.
        #expect(try LedgerJSONDecoder.decode([Double].self, from: Array("[0e5,0E1]".utf8)) == [0, 0])
    }

    @Test func errorsAreJSONDecodersKindsAtTheirPaths() {
        // Type mismatches, nulls, missing keys, at every depth.
        agree(Items.self, #"{"items":[{"n":1},{"n":"two"}]}"#)
        agree(Items.self, #"{"items":[{"n":1},{}]}"#)
        agree(Items.self, #"{"items":[{"n":1},null]}"#)
        agree(Items.self, #"{"items":[{"n":1},5]}"#)
        agree(Items.self, #"{"items":{}}"#)
        agree(Items.self, #"{"items":null}"#)
        agree(Items.self, #"{}"#)
        agree(Items.self, #"[]"#)
        agree(Items.self, #"{"items":[],"title":5}"#)
        agree(Items.self, #"{"items":[],"title":null}"#)
        agree(Items.self, #"{"items":[{"n":null}]}"#)
        agree(Items.self, #"{"items":[{"n":1.5}]}"#, numberPath: ["items", "[0]", "n"])
        agree(Items.self, #"{"items":[{"n":1,"n":2}]}"#)  // the first of a repeated key
        agree(Flags.self, #"{"b":null}"#)
        agree(Flags.self, #"{"b":1}"#)
        agree(Flags.self, #"{"b":true,"s":true}"#)
        agree(Flags.self, #"{"b":true,"d":"x"}"#)
        agree(Flags.self, #"{"b":true,"d":12.5,"u":"https://x.example/a b"}"#)
        agree(Flags.self, #"{"b":true,"u":""}"#)
        agree(Flags.self, #"{"b":true,"u":5}"#)
        agree(Flags.self, #"{"b":true,"x":"AAEC/w=="}"#)
        agree(Flags.self, #"{"b":true,"x":"AAE"}"#)
        agree(Flags.self, #"{"b":true,"x":"!!"}"#)
        agree(Flags.self, #"{"b":true,"x":5}"#)
        agree(Flags.self, #"{"b":true,"m":"3"}"#)
        agree(Flags.self, #"{"b":true,"m":3.25}"#)
        agree(Flags.self, #"{"b":true,"m":null,"x":null,"u":null,"d":null,"s":null}"#)
        agree(Date.self, "null")
        agree(Data.self, "null")
        agree(URL.self, "null")
        agree(Decimal.self, "null")
        agree(Bool.self, "null")
        agree(String.self, "null")
        agree(Int.self, "true")
        agree(String.self, #""\u00e9\ud83d\ude00\n\/""#)
        agree([Int].self, #"[1,"a"]"#)
        agree([Int?].self, "[1,null,3]")
        agree([String: Int].self, #"{"a":1,"a":2}"#)
        // Keys are found as JSONDecoder finds them: equal as strings, the first of equal ones.
        agree([String: Int].self, #"{"é":1,"e\u0301":2,"a":3}"#)
        agree([String: Int].self, "{\"e\u{301}\":1,\"é\":2}")
        agree(Accented.self, "{\"e\u{301}\":1,\"\u{212A}\":2}")
        agree(Accented.self, #"{"é":1,"K":2,"e\u0301":3}"#)
        agree([Int: String].self, #"{"1":"a","x":"b"}"#)
        agree([Int: String].self, #"{"1":"a","-2":"b"}"#)
        agree([Choice].self, #"[{"one":{"_0":1}},{"none":{}},{"two":{"_0":"s","_1":0.5}},{"named":{"x":1}}]"#)
        agree([Choice].self, #"[{"one":{"_0":1},"none":{}}]"#)
        agree([Choice].self, #"[{"zz":{}}]"#)
        agree([Mode].self, #"["open","archived/old"]"#)
        agree([Mode].self, #"["nope"]"#)
        agree(JSONValue.self, #"{"a":[1,2.5,"x",null,true,{"b":{}}],"c":-9223372036854775808,"d":1e300}"#)
        // Malformed JSON is dataCorrupted at the root (JSONDecoder, which reads numbers only when
        // a value is asked for, may name a type mismatch first).
        for text in ["", " ", "{", "[1", #"{"a"}"#, #"{"a":}"#, "tru", "nul", "01", "1.", "-", "+1", ".5", "1e", #""\x""#, "\"a\u{1}\"",
                     #""\ud800""#, "[1] 2", "{\"a\":1 \"b\":2}", #"{"items":[{"n":01}]}"#] {
            #expect(throws: (any Error).self) { try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) }
            for decode in [{ _ = try LedgerJSONDecoder.decode(JSONValue.self, from: Array(text.utf8)) }, { _ = try LedgerJSONDecoder.decode(Items.self, from: Array(text.utf8)) }] {
                do {
                    try decode()
                    Issue.record("\(text) decoded")
                } catch DecodingError.dataCorrupted(let context) {
                    #expect(context.codingPath.isEmpty && context.debugDescription.hasPrefix("The given data was not valid JSON: "), "\(text)")
                } catch {
                    Issue.record("\(text): \(error)")
                }
            }
        }
        agree(JSONValue.self, "\u{FEFF}[1]")  // a byte order mark
        agree(JSONValue.self, [0x22, 0xFF, 0x22])  // not UTF-8
    }

    @Test func malformedAndDeepDocumentsAreRefusedWithoutTrapping() throws {
        // Deeper than JSONDecoder's limit of 512: refused.
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: DecodingError.self) { try LedgerJSONDecoder.decode(JSONValue.self, from: Array(deep.utf8)) }
        let ok = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        _ = try LedgerJSONDecoder.decode(JSONValue.self, from: Array(ok.utf8))
        // A trailing comma, which JSONDecoder tolerates, is malformed JSON here.
        for text in ["[1,]", #"{"a":1,}"#] {
            do {
                _ = try LedgerJSONDecoder.decode([String: Int].self, from: Array(text.utf8))
                Issue.record("\(text) decoded")
            } catch DecodingError.dataCorrupted(let context) {
                #expect(context.codingPath.isEmpty && context.debugDescription.hasPrefix("The given data was not valid JSON"))
            }
        }
        // Random bytes never trap.
        var rng = SeededGenerator(seed: 99)
        let pieces = ["{", "}", "[", "]", ",", ":", "\"", "a", "1", "-", ".", "e", "null", "true", " ", "\\", "u", "0"]
        for _ in 0..<5000 {
            let text = (0..<Int.random(in: 0...12, using: &rng)).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &rng)] }.joined()
            let squeezed = text.filter { $0 != " " }
            let foundation = Result { try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) }
            let mine = Result { try LedgerJSONDecoder.decode(JSONValue.self, from: Array(text.utf8)) }
            switch (foundation, mine) {
            case (.success(let a), .success(let b)): #expect(a == b, "\(text)")
            case (.failure, .failure): break
            case (.success, .failure):
                // The one leniency of JSONDecoder's not kept: a trailing comma.
                #expect(squeezed.contains(",]") || squeezed.contains(",}"), "\(text): \(mine)")
            case (.failure(let error), .success): Issue.record("\(text): the codec decodes what JSONDecoder refuses (\(error))")
            }
        }
    }

    // MARK: Containers by hand

    struct Interleaved: Decodable, Equatable {
        var inner: String
        var outer: Int
        enum K: String, CodingKey { case a, b }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: K.self)
            let n = try c.nestedContainer(keyedBy: K.self, forKey: .a)
            outer = try c.decode(Int.self, forKey: .b)
            inner = try n.decode(String.self, forKey: .b)
        }
    }

    struct Walker: Decodable, Equatable {
        var log: [String] = []
        init(from decoder: any Decoder) throws {
            var u = try decoder.unkeyedContainer()
            log.append("count \(u.count ?? -1) at \(u.currentIndex)")
            log.append("nil \(try u.decodeNil()) at \(u.currentIndex)")
            log.append("first \(String(describing: try u.decodeIfPresent(Int.self))) at \(u.currentIndex)")
            log.append("second \(String(describing: try u.decodeIfPresent(Int.self))) at \(u.currentIndex)")
            var nested = try u.nestedUnkeyedContainer()
            log.append("nested \(try nested.decode(String.self)) \(nested.isAtEnd)")
            let keyed = try u.nestedContainer(keyedBy: AnyKey.self)
            log.append("keys \(keyed.allKeys.map(\.stringValue).sorted())")
            let sup = try u.superDecoder()
            log.append("super \(try sup.singleValueContainer().decode(Bool.self)) path \(sup.codingPath.map(\.stringValue))")
            log.append("end \(u.isAtEnd) \(String(describing: try u.decodeIfPresent(Int.self))) at \(u.currentIndex)")
            do { _ = try u.decode(Int.self) } catch { log.append("\(LedgerJSONCodecTests.summary(error as? DecodingError ?? .dataCorrupted(.init(codingPath: [], debugDescription: ""))))") }
        }
    }

    struct Super: Decodable, Equatable {
        var base: [Int]
        var named: String
        var missing: Bool
        enum K: String, CodingKey { case named, absent }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: K.self)
            base = try [Int](from: c.superDecoder())
            named = try String(from: c.superDecoder(forKey: .named))
            missing = try c.superDecoder(forKey: .absent).singleValueContainer().decodeNil()
        }
    }

    @Test func containersBehaveAsJSONDecodersWhateverTheOrderTheyAreUsedIn() {
        agree(Interleaved.self, #"{"a":{"b":"in"},"b":2}"#)
        agree(Interleaved.self, #"{"a":{"b":1},"b":2}"#)
        agree(Interleaved.self, #"{"a":{"c":1},"b":2}"#)
        agree(Walker.self, #"[null,null,3,["s"],{"k":1,"j":2},true]"#)
        agree(Walker.self, #"[1,2,3,["s",4],{},false]"#)
        agree(Super.self, #"{"super":[1,2],"named":"n"}"#)
        agree(Super.self, #"{"named":"n"}"#)
        // A large object (a dictionary is indexed) decodes every key, the first of repeated ones.
        var text = "{"
        for i in 0..<300 { text += #""k\#(i % 250)":\#(i),"# }
        text += #""last":-1}"#
        agree([String: Int].self, text)
        agree([String: [Int]].self, #"{"a":[1],"b":[],"c":[2,3]}"#)
    }

    // MARK: The ledger's error paths

    @Test func eventDecodingErrorsNameTheFieldPath() throws {
        struct Note: LedgerEvent, Equatable {
            static let eventType = "com.example.codec-note"
            var items: [Entry]
            struct Entry: Codable, Equatable { var title: String; var due: Date? }
        }
        func event(_ payload: String) -> Event {
            Event(sequence: 9, timestampMicros: 0, origin: Origin(role: "t", pid: 1), type: Note.eventType, key: nil, payload: Array(payload.utf8))
        }
        func failure(_ payload: String) -> (String, String)? {
            switch Result(catching: { () throws(LedgerError) -> Note in try event(payload).decode(as: Note.self) }) {
            case .success: return nil
            case .failure(let error):
                guard case .eventDecoding(9, _, let field, let reason) = error else { return ("?", "\(error)") }
                return (field, reason)
            }
        }
        #expect(try event(#"{"items":[{"title":"a"},{"title":"b","due":1.5}]}"#).decode(as: Note.self).items.count == 2)
        #expect(failure(#"{"items":[{"title":"a"},{"title":"b"},{"title":3}]}"#)?.0 == "data.items[2].title")
        #expect(failure(#"{"items":[{"title":"a"},{"title":"b"},{"title":3}]}"#)?.1.hasPrefix("expected String: Expected to decode String but found number") == true)
        #expect(failure(#"{"items":[{}]}"#).map { [$0.0, $0.1] } == ["data.items[0].title", "missing"])
        #expect(failure(#"{"items":[{"title":null}]}"#).map { [$0.0, $0.1] } == ["data.items[0].title", "expected String, found null"])
        #expect(failure(#"{"items":[{"title":"a","due":"x"}]}"#)?.0 == "data.items[0].due")
        #expect(failure(#"{"items":[{"title":"a","due":1e400}]}"#)?.0 == "data.items[0].due")
        #expect(failure(#"{"items":[{"title":"a"}"#)?.0 == "data")
        #expect(failure(#"[]"#)?.0 == "data")
    }

    @Test func rowsStoredByJSONEncoderStillDecodeAndCanonicaliseToTheNewBytes() throws {
        var rng = SeededGenerator(seed: 5)
        let legacy = JSONEncoder()
        legacy.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for _ in 0..<200 {
            let value = Self.sample(&rng)
            let old = Array(try legacy.encode(value))
            #expect(try LedgerJSONDecoder.decode(Sample.self, from: old) == value)
            #expect(try EventJSON.canonicalize(old) == LedgerJSONEncoder.encode(value, numbers: .asWritten))
        }
    }
}
