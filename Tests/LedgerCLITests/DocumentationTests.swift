import Foundation
import Testing
import TestSupport

/// Every Swift snippet of README.md and docs/ is compiled: each one must appear, verbatim
/// (ignoring indentation and blank lines), in the DocSnippets target or in the tests that run
/// the documentation's examples; a package manifest snippet must load with `swift package
/// dump-package`. A snippet edited in the docs alone, or code changed under it, fails here.
@Suite struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    struct Snippet: CustomStringConvertible {
        var file: String
        var line: Int
        var lines: [String]
        var description: String { "\(file):\(line)" }
    }

    static func normalized(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    static func snippets() throws -> [Snippet] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        var found: [Snippet] = []
        for file in ["README.md"] + docs {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            var current: (start: Int, lines: [Substring])?
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                if current == nil, line.trimmingCharacters(in: .whitespaces) == "```swift" {
                    current = (number + 1, [])
                } else if let open = current, line.trimmingCharacters(in: .whitespaces) == "```" {
                    found.append(Snippet(file: file, line: open.start, lines: normalized(open.lines.joined(separator: "\n"))))
                    current = nil
                } else {
                    current?.lines.append(line)
                }
            }
        }
        return found
    }

    static func compiledSources() throws -> [[String]] {
        let directory = root.appendingPathComponent("Tests/DocSnippets")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".swift") }
            .map { directory.appendingPathComponent($0) } + [
                root.appendingPathComponent("Tests/InboxLedgerTests/DocExampleTests.swift"),
                root.appendingPathComponent("Tests/InboxLedgerTests/SourceExampleTests.swift"),
            ]
        return try files.map { normalized(try String(contentsOf: $0, encoding: .utf8)) }
    }

    /// Every ```` ```swift ```` example of a `///` comment under Sources/ (the comment markers
    /// and the one space after them removed).
    static func sourceExamples() throws -> [Snippet] {
        let sources = root.appendingPathComponent("Sources")
        guard let walk = FileManager.default.enumerator(atPath: sources.path) else { return [] }
        var found: [Snippet] = []
        for case let relative as String in walk where relative.hasSuffix(".swift") {
            let file = "Sources/" + relative
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            var current: (start: Int, lines: [Substring])?
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let trimmed = line.drop { $0 == " " }
                guard trimmed.hasPrefix("///") else {
                    current = nil  // the comment ended without closing its example
                    continue
                }
                var body = trimmed.dropFirst(3)
                if body.first == " " { body = body.dropFirst() }
                if current == nil, body.trimmingCharacters(in: .whitespaces) == "```swift" {
                    current = (number + 1, [])
                } else if let open = current, body.trimmingCharacters(in: .whitespaces) == "```" {
                    found.append(Snippet(file: file, line: open.start, lines: normalized(open.lines.joined(separator: "\n"))))
                    current = nil
                } else {
                    current?.lines.append(body)
                }
            }
        }
        return found.sorted { ($0.file, $0.line) < ($1.file, $1.line) }
    }

    static func isCompiled(_ snippet: Snippet, in sources: [[String]]) -> Bool {
        sources.contains { source in
            source.count >= snippet.lines.count
                && (0...(source.count - snippet.lines.count)).contains { Array(source[$0..<($0 + snippet.lines.count)]) == snippet.lines }
        }
    }

    /// The code examples of the doc comments are compiled too: each must appear, verbatim, in
    /// Tests/DocSnippets (the SourceExamples files) or in SourceExampleTests. An example edited
    /// in a comment alone, or an API changed under one, fails here.
    @Test func everySourceCodeExampleIsCompiled() throws {
        let examples = try Self.sourceExamples()
        let sources = try Self.compiledSources()
        #expect(examples.count >= 60, "the doc comments' examples were not found: \(examples.count)")
        #expect(examples.contains { $0.file == "Sources/LMDB/LMDBError.swift" })
        for example in examples {
            #expect(!example.lines.isEmpty, "\(example): empty example")
            #expect(
                Self.isCompiled(example, in: sources),
                "\(example): this doc comment example is not in Tests/DocSnippets (or SourceExampleTests) verbatim, so nothing compiles it")
        }
    }

    @Test func everySwiftSnippetIsCompiled() throws {
        let snippets = try Self.snippets()
        let sources = try Self.compiledSources()
        #expect(snippets.filter { $0.file == "docs/apps.md" }.count >= 8, "docs/apps.md lost its snippets")
        #expect(snippets.contains { $0.file == "README.md" })
        for snippet in snippets {
            #expect(!snippet.lines.isEmpty, "\(snippet): empty snippet")
            if snippet.lines.first?.hasPrefix("// swift-tools-version") == true {
                try checkManifest(snippet)
                continue
            }
            #expect(Self.isCompiled(snippet, in: sources), "\(snippet): this snippet is not in Tests/DocSnippets (or DocExampleTests) verbatim, so nothing compiles it")
        }
    }

    /// The operations and sync pages also name calls in running text (`Ledger.suspend()`,
    /// `client.syncOnce()`): each one must be a call the sources declare public, static on a type, an
    /// instance member on a value — `ledger.suspend()` (suspend is static) would not compile.
    @Test func everyCallNamedInTheOperationsAndSyncPagesExists() throws {
        var types = Set<String>(), statics = Set<String>(), instance = Set<String>()
        let sources = Self.root.appendingPathComponent("Sources")
        let walk = FileManager.default.enumerator(atPath: sources.path)
        while let relative = walk?.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            let text = try String(contentsOf: sources.appendingPathComponent(relative), encoding: .utf8)
            for line in text.split(separator: "\n") where line.contains("func ") || line.contains("var ") || line.contains("let ")
                || line.contains("case ") || line.contains("struct ") || line.contains("class ") || line.contains("enum ")
                || line.contains("extension ") || line.contains("protocol ") || line.contains("actor ") {
                if let m = line.firstMatch(of: #/\b(?:struct|class|enum|extension|actor|protocol)\s+(\w+)/#) { types.insert(String(m.1)) }
                if let m = line.firstMatch(of: #/^\s*(?:@\w+\s+)*public\s+(?:nonisolated\s+)?(static\s+|class\s+)?(?:mutating\s+)?(?:func|var|let)\s+(\w+)/#) {
                    if m.1 == nil { instance.insert(String(m.2)) } else { statics.insert(String(m.2)) }
                }
                if let m = line.firstMatch(of: #/^\s*case\s+(\w+)/#) { statics.insert(String(m.1)) }
            }
        }
        #expect(types.contains("Ledger") && statics.contains("suspend") && instance.contains("syncOnce"), "the sources were not read")
        let values: Set<String> = ["ledger", "client", "sync", "consumer", "relay"]
        var checked = 0
        for file in ["docs/operations.md", "docs/sync.md"] {
            let text = try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
            // Inline code: the odd pieces between backquotes, on one line.
            for (index, piece) in text.split(separator: "`", omittingEmptySubsequences: false).enumerated() where index % 2 == 1 && !piece.contains("\n") {
                guard let dot = piece.firstIndex(of: "."), let open = piece.firstIndex(of: "("), dot < open else { continue }
                let receiver = String(piece[..<dot]), member = String(piece[piece.index(after: dot)..<open])
                guard receiver.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }), member.first?.isLowercase == true,
                      member.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { continue }
                if values.contains(receiver) {
                    checked += 1
                    #expect(instance.contains(member), "\(file): `\(piece)`: \(member) is no instance member in Sources\(statics.contains(member) ? " (it is static: call it on the type)" : "")")
                } else if types.contains(receiver) {
                    // `Type.member()` in prose may name an instance method too; it must exist.
                    checked += 1
                    #expect(statics.contains(member) || instance.contains(member), "\(file): `\(piece)`: \(receiver) has no member \(member) in Sources")
                }
            }
        }
        #expect(checked >= 10, "only \(checked) calls found in running text")
    }

    func checkManifest(_ snippet: Snippet) throws {
        let dir = TemporaryDirectory()
        let package = dir.child("App")
        try FileManager.default.createDirectory(atPath: package + "/Sources/App", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir.child("InboxLedger"), withIntermediateDirectories: true)
        try snippet.lines.joined(separator: "\n").write(toFile: package + "/Package.swift", atomically: true, encoding: .utf8)
        try "".write(toFile: package + "/Sources/App/App.swift", atomically: true, encoding: .utf8)
        let out = try Processes.run("/usr/bin/env", ["swift", "package", "--package-path", package, "dump-package"], timeout: 300)
        #expect(out.status == 0, "\(snippet): the manifest does not load: \(out.stderr)")
    }

    @Test func theReadmesFirstScreenLeadsAnAppDeveloperToTheAppGuide() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let firstScreen = readme.split(separator: "\n", omittingEmptySubsequences: false).prefix(30).joined(separator: "\n")
        #expect(firstScreen.contains("make demo") && firstScreen.contains("make test"), "the two set-up commands come first")
        #expect(firstScreen.contains("docs/apps.md"))
    }
}
