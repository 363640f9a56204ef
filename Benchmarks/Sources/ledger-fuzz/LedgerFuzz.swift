// ledger-fuzz: the decoders of untrusted bytes (event records, JSON events and payloads,
// snapshot headers and projection rows) under libFuzzer, and a replayer for its corpus.
//
// Fuzz (libFuzzer through swiftc's -sanitize=fuzzer; see `make fuzz`), in Benchmarks:
//   swift build -c release --build-path .build-fuzz -Xswiftc -sanitize=fuzzer \
//       -Xswiftc -parse-as-library -Xswiftc -DFUZZING --product ledger-fuzz
//   .build-fuzz/release/ledger-fuzz ../Tests/Corpus -max_total_time=300 -rss_limit_mb=512 -timeout=5
//
// Replay (a normal build): `ledger-fuzz FILE|DIRECTORY…` runs every input and prints what the
// decoders concluded; the test suite does the same over Tests/Corpus.
@_spi(Testing) import InboxLedger

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    _ = DecoderFuzzing.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

/// libFuzzer's driver, called from our own entry point: SwiftPM links an executable's `main`
/// to `<module>_main`, so libFuzzer's `main` is not the one that runs.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@_cdecl("ledger_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments, fuzzOne)
}
#else
import Foundation

@main
struct LedgerFuzz {
    static func main() {
        var inputs: [String] = []
        for argument in CommandLine.arguments.dropFirst() {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("ledger-fuzz: no such file or directory: \(argument)\n".utf8))
                exit(2)
            }
            if isDirectory.boolValue {
                let files = (FileManager.default.enumerator(atPath: argument)?.allObjects as? [String]) ?? []
                inputs += files.sorted().map { argument + "/" + $0 }.filter { path in
                    var dir: ObjCBool = false
                    return FileManager.default.fileExists(atPath: path, isDirectory: &dir) && !dir.boolValue
                }
            } else {
                inputs.append(argument)
            }
        }
        if inputs.isEmpty {
            print("usage: ledger-fuzz FILE|DIRECTORY…   (replays inputs; see the header of Benchmarks/Sources/ledger-fuzz/LedgerFuzz.swift to fuzz)")
            exit(2)
        }
        for path in inputs {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            print("\(path): \(DecoderFuzzing.run([UInt8](data)))")
        }
    }
}
#endif
