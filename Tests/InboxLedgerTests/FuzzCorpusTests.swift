import Foundation
import Testing
import TestSupport
@_spi(Testing) import InboxLedger

/// The fuzzer's corpus (Tests/Corpus: seeds, plus every input libFuzzer kept for new coverage
/// or found crashing) replayed through every decoder of untrusted bytes, and random mutations of
/// it: no trap, no hang, and canonical JSON that is stable.
@Suite struct FuzzCorpusTests {
    static let corpus: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Corpus").path

    func inputs() throws -> [[UInt8]] {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.corpus).sorted()
        return names.compactMap { FileManager.default.contents(atPath: Self.corpus + "/" + $0).map { [UInt8]($0) } }
    }

    @Test func everyCorpusInputDecodesWithoutTrapping() throws {
        let all = try inputs()
        #expect(all.count >= 16)
        for (target, count) in DecoderFuzzing.Target.allCases.map({ t in (t, all.filter { $0.first.map { $0 % 3 } == t.rawValue }.count) }) {
            #expect(count > 0, "no corpus input for \(target)")
        }
        for input in all {
            let outcome = DecoderFuzzing.run(input)
            #expect(!outcome.contains("CANONICAL UNSTABLE"), "\(input.prefix(40))")
        }
    }

    @Test func seedsStillDecodeAsTheyDid() throws {
        // The seeds are real records and rows taken from a ledger: they must stay readable.
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.corpus).filter { $0.hasPrefix("seed-") }
        for name in names {
            let bytes = try #require(FileManager.default.contents(atPath: Self.corpus + "/" + name))
            let outcome = DecoderFuzzing.run([UInt8](bytes))
            if name.hasPrefix("seed-record") { #expect(outcome.hasPrefix("record: ") && outcome.hasSuffix("bytes"), "\(name): \(outcome)") }
            if name.hasPrefix("seed-snapshot") { #expect(outcome.contains(" ok"), "\(name): \(outcome)") }
            if name.hasPrefix("seed-json") { #expect(outcome.contains("canonical stable"), "\(name): \(outcome)") }
        }
    }

    @Test func randomMutationsOfTheCorpusDecodeWithoutTrapping() throws {
        let all = try inputs()
        var rng = SeededGenerator(seed: 99)
        for _ in 0..<30_000 {
            var input = all[Int.random(in: 0..<all.count, using: &rng)]
            for _ in 0..<Int.random(in: 1...4, using: &rng) where input.count > 1 {
                let at = Int.random(in: 1..<input.count, using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: input[at] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
                case 1: input.remove(at: at)
                case 2: input.insert(UInt8.random(in: 0...255, using: &rng), at: at)
                default: input.removeLast(Int.random(in: 0..<(input.count - at), using: &rng))
                }
            }
            let outcome = DecoderFuzzing.run(input)
            #expect(!outcome.contains("CANONICAL UNSTABLE"), "\(input)")
        }
    }
}
