import Foundation
import Testing

/// Two rules of the sources (docs/design.md, "Folders"), checked in every module under
/// `Sources/`: every public declaration has a `///` comment, and every `try?` says in a comment
/// why dropping the error is right (on its line, or on the line above it or above its chain).
@Suite struct SourceHygieneTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources").standardizedFileURL.path

    @Test func everyPublicDeclarationIsDocumented() throws {
        var missing: [String] = []
        for (file, text) in try Self.files() { missing += Self.undocumented(text).map { "\(file):\($0)" } }
        #expect(missing.isEmpty, "public declarations without a /// comment:\n\(missing.joined(separator: "\n"))")
    }

    @Test func everyTryQuestionMarkIsExplained() throws {
        var silent: [String] = []
        for (file, text) in try Self.files() { silent += Self.unexplainedTries(text).map { "\(file):\($0)" } }
        #expect(silent.isEmpty, "`try?` without a comment saying why the error may be dropped:\n\(silent.joined(separator: "\n"))")
    }

    @Test func theChecksCanFail() {
        let source = """
        /// Documented.
        public struct A {
            @discardableResult
            public func undocumented() -> Int { 1 }
            /// Documented.
            @inlinable public func fine() {}
            func f() {
                _ = try? g()
                // The cache is best effort.
                _ = try? g()
                _ = try? g()   // a miss is fine
                let entry: Entry? = nil
            }
        }
        """
        #expect(Self.undocumented(source) == [4])
        #expect(Self.unexplainedTries(source) == [8])
    }

    static func files() throws -> [(String, String)] {
        guard let walk = FileManager.default.enumerator(atPath: sources) else { return [] }
        return try walk.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map {
            ($0, try String(contentsOfFile: sources + "/" + $0, encoding: .utf8))
        }
    }

    /// Line numbers of `public`/`open` declarations whose previous line (attributes skipped) is
    /// not the end of a doc comment. Protocol witnesses named by the protocol
    /// (`typealias Element`/`Failure`) are the protocol's to document.
    static func undocumented(_ text: String) -> [Int] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        var found: [Int] = []
        for (index, line) in lines.enumerated() {
            guard line.firstMatch(of: /^(@[\w().,: ]+\s+)*(public|open)\s/) != nil,
                  line.firstMatch(of: /typealias (Element|Failure|AsyncIterator)\b/) == nil else { continue }
            var previous = index - 1
            while previous >= 0, lines[previous].hasPrefix("@") { previous -= 1 }
            let comment = previous >= 0 ? lines[previous] : ""
            if !comment.hasPrefix("///") && !comment.hasSuffix("*/") { found.append(index + 1) }
        }
        return found
    }

    /// Line numbers of `try?` in code with no comment on the line, or on the line above (or
    /// above a chain of `try?` lines).
    static func unexplainedTries(_ text: String) -> [Int] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        var found: [Int] = []
        for (index, line) in lines.enumerated() {
            guard !line.hasPrefix("//"), line.firstMatch(of: /\btry\?/) != nil else { continue }
            if line.contains("//") { continue }
            var previous = index - 1
            while previous >= 0, lines[previous].firstMatch(of: /\btry\?/) != nil, !lines[previous].hasPrefix("//") { previous -= 1 }
            if previous < 0 || !lines[previous].hasPrefix("//") { found.append(index + 1) }
        }
        return found
    }
}
