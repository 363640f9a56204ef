import Foundation
import Testing

/// `Ledger` stays an access handle (docs/design.md, "Folders"): at most
/// ``LedgerSurface/maxPublicMembers`` public members (its nested types count as one each, their
/// members are theirs) and at most ``LedgerSurface/maxFiles`` files declaring it (the class and
/// its extensions, internal ones included). A feature is a type reached from the handle
/// (`ledger.consumers`, `ledger.projections`, `ledger.maintenance`), not more methods on it.
@Suite struct LedgerSurfaceTests {
    @Test func theHandleKeepsItsBudget() throws {
        let surface = try LedgerSurface(root: FolderGraph.sources)
        if ProcessInfo.processInfo.environment["LEDGER_SURFACE_PRINT"] != nil { print(surface.description) }
        #expect(!surface.files.isEmpty, "no file declares Ledger under \(FolderGraph.sources)")
        #expect(surface.publicMembers.count <= LedgerSurface.maxPublicMembers,
                "Ledger has \(surface.publicMembers.count) public members (budget \(LedgerSurface.maxPublicMembers)): make the new feature a type reached from the handle\n\(surface.description)")
        #expect(surface.files.count <= LedgerSurface.maxFiles,
                "Ledger is declared in \(surface.files.count) files (budget \(LedgerSurface.maxFiles)): \(surface.files.sorted())")
    }

    @Test func theCountSeesMembersExtensionsAndNestedTypes() {
        // The check itself can fail: every public declaration at the top of a `Ledger` body
        // counts, in the class and in its extensions; nested types once; SPI, internal members,
        // other types, comments and strings not at all.
        let surface = LedgerSurface(files: [
            ("Ledger.swift", """
            public final class Ledger: Sendable {
                /// public var notInAComment: Int
                public let path: String
                let internalOne = "{ public func inAString() }"
                public enum Limits {
                    public static let maxKeyBytes = 511
                }
            }
            """),
            ("Ledger+Read.swift", """
            extension Ledger {
                @discardableResult
                public func read() {}
                @_spi(Testing) public static func hook() {}
                package func helper() {}
            }
            public struct LedgerSnapshot { public func head() {} }
            extension LedgerSnapshot { public func more() {} }
            """),
            ("Other.swift", "struct Other { public func notLedger() {} }"),
        ])
        #expect(surface.files == ["Ledger+Read.swift", "Ledger.swift"])
        #expect(surface.publicMembers.map(\.name) == ["let path", "enum Limits", "func read"])
        let tooMany = LedgerSurface(files: [("Ledger.swift", "extension Ledger {\n" + (0...LedgerSurface.maxPublicMembers).map { "public func f\($0)() {}" }.joined(separator: "\n") + "\n}")])
        #expect(tooMany.publicMembers.count == LedgerSurface.maxPublicMembers + 1)
    }
}

/// The public members of `Ledger` and the files that declare it, read from the sources.
struct LedgerSurface: CustomStringConvertible {
    /// GRDB's `DatabasePool` has 28, all about access.
    static let maxPublicMembers = 32
    static let maxFiles = 8

    private(set) var files: Set<String> = []
    private(set) var publicMembers: [(file: String, name: String)] = []

    init(root: String) throws {
        var files: [(String, String)] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            files.append((relative, try String(contentsOfFile: root + "/" + relative, encoding: .utf8)))
        }
        self.init(files: files.sorted { $0.0 < $1.0 })
    }

    init(files: [(path: String, source: String)]) {
        for (path, source) in files {
            let code = FolderGraph.withoutComments(source)
            for body in Self.ledgerBodies(code) {
                self.files.insert(path)
                for name in Self.publicDeclarations(atTopOf: body) { publicMembers.append((path, name)) }
            }
        }
    }

    /// The bodies (between the braces) of `class Ledger` and `extension Ledger` at the top level.
    static func ledgerBodies(_ code: String) -> [Substring] {
        let header = /^(?:public\s+)?(?:final\s+)?(?:class|extension)\s+Ledger\b(?![.+\w])[^{\n]*\{/.anchorsMatchLineEndings()
        var bodies: [Substring] = []
        for match in code.matches(of: header) {
            var depth = 1
            var index = match.range.upperBound
            let start = index
            while index < code.endIndex, depth > 0 {
                switch code[index] {
                case "{": depth += 1
                case "}": depth -= 1
                default: break
                }
                if depth > 0 { index = code.index(after: index) }
            }
            bodies.append(code[start..<index])
        }
        return bodies
    }

    /// "kind name" of each `public` declaration at depth 0 of `body`, SPI excluded. A
    /// declaration is judged at its first `{` or the end of its first line, whichever comes
    /// first; an attribute alone on a line (`@_spi(…)`) carries over to the next.
    static func publicDeclarations(atTopOf body: Substring) -> [String] {
        var names: [String] = []
        var depth = 0
        var statement = ""  // the current top-level line (or line up to its first brace)
        var carried = ""    // attributes alone on the lines before it
        func judge() {
            let text = carried + " " + statement
            if statement.trimmingCharacters(in: .whitespaces).hasPrefix("@"), !statement.contains("public") {
                carried += " " + statement
            } else {
                if let name = declaration(text) { names.append(name) }
                carried = ""
            }
            statement = ""
        }
        for ch in body {
            switch ch {
            case "{":
                if depth == 0 { judge() }
                depth += 1
            case "}":
                depth -= 1
            case "\n" where depth == 0:
                judge()
            default:
                if depth == 0 { statement.append(ch) }
            }
        }
        return names
    }

    /// "kind name" if `statement` declares something public (not SPI).
    private static func declaration(_ statement: String) -> String? {
        let words = statement.split(whereSeparator: { $0.isWhitespace || $0 == "(" || $0 == ":" || $0 == "<" || $0 == "=" })
        guard words.contains("public"), !statement.contains("@_spi") else { return nil }
        let kinds: Set<Substring> = ["func", "var", "let", "init", "enum", "struct", "class", "actor", "typealias", "subscript", "protocol"]
        guard let kindIndex = words.firstIndex(where: { kinds.contains($0) }) else { return nil }
        let kind = words[kindIndex]
        if kind == "init" || kind == "subscript" { return String(kind) }
        return kindIndex + 1 < words.count ? "\(kind) \(words[kindIndex + 1])" : String(kind)
    }

    var description: String {
        "Ledger: \(publicMembers.count) public members in \(files.count) files\n"
            + publicMembers.map { "  \($0.file): \($0.name)" }.joined(separator: "\n")
    }
}
