import Foundation
import Testing

/// docs/reference.md cannot fall behind the code: the public declarations of the types it
/// documents — read from the Swift sources, the type's body and its extensions — and every
/// `async` call of the library must each be named in the page's section for them.
@Suite struct ReferenceTests {
    static let root = DocumentationTests.root
    /// The types whose every public member the page lists, each in its `## \`Type\`` section.
    static let types = ["LedgerOptions", "WidgetList", "WidgetItem", "PendingAction", "AppendRequest", "AppendReceipt", "ProjectionNote",
                         "Ledger", "LedgerSnapshot", "ProjectionSnapshot", "LedgerObservation", "LedgerConsumers", "LedgerProjections", "LedgerMaintenance"]
    /// The same for the sync client's values (Sources/InboxLedgerSync), each in its section too.
    static let syncTypes = ["SyncConfiguration", "SyncStatus", "SyncReport", "SyncError", "NetworkFailure"]

    /// The library's sources (or the sync client's), as (file, text).
    static func sources(_ module: String = "InboxLedger") throws -> [(String, String)] {
        let base = root.appendingPathComponent("Sources/\(module)")
        guard let walker = FileManager.default.enumerator(atPath: base.path) else { return [] }
        return try walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map { file in
            (file, try String(contentsOf: base.appendingPathComponent(file), encoding: .utf8))
        }
    }

    /// The public members declared directly in the bodies of `type` and of its extensions: a
    /// property's or case's name, a function's or initialiser's selector (`hasChanged(since:)`).
    static func publicMembers(of type: String, in sources: [(String, String)]) -> Set<String> {
        let opener = try? Regex(#"^\s*(public\s+)?(final\s+)?(struct|enum|class|extension|actor)\s+\#(type)\b"#)
        var members = Set<String>()
        for (_, text) in sources {
            var depth = 0
            var inside = false
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                if !inside, depth == 0, let opener, (try? opener.prefixMatch(in: String(code))) != nil { inside = true }
                if inside, depth == 1, let member = member(declaredBy: String(code)) { members.insert(member) }
                for c in code { if c == "{" { depth += 1 } else if c == "}" { depth -= 1 } }
                if inside, depth == 0, code.contains("}") { inside = false }
            }
        }
        return members
    }

    /// `name` of `public var name` / `public let name` / `case name(…)` (enums list their cases
    /// without `public`), the selector of `public func name(a b: T, _ c: U)` → `name(a:_:)`.
    static func member(declaredBy line: String) -> String? {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("case "), !trimmed.contains("=") || trimmed.contains("(") {
            let rest = trimmed.dropFirst(5)
            return String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
        }
        guard trimmed.hasPrefix("public ") else { return nil }
        var words = trimmed.split(separator: " ").map(String.init)
        while let first = words.first, ["public", "static", "mutating", "nonisolated", "@discardableResult", "override"].contains(first) { words.removeFirst() }
        guard let kind = words.first else { return nil }
        if kind == "func" || kind.hasPrefix("init(") || kind.hasPrefix("init?(") || kind.hasPrefix("init<") { return selector(of: trimmed) }
        guard kind == "var" || kind == "let", words.count >= 2 else { return nil }
        return String(words[1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
    }

    /// `name(label:label:)` of a function or initialiser declaration.
    static func selector(of declaration: String) -> String? {
        guard let open = declaration.firstIndex(of: "(") else { return nil }
        // The name: after `func `, or `init`; up to a generic clause or the parameters.
        let start = declaration.range(of: "func ")?.upperBound ?? declaration.range(of: "init")?.lowerBound ?? declaration.startIndex
        let name = String(declaration[start...].prefix { $0 != "<" && $0 != "(" && $0 != "?" })
        // The parameter list: up to the matching parenthesis.
        var depth = 0
        var end = open
        for i in declaration[open...].indices {
            if declaration[i] == "(" { depth += 1 } else if declaration[i] == ")" { depth -= 1; if depth == 0 { end = i; break } }
        }
        let list = declaration[declaration.index(after: open)..<end]
        var labels: [String] = []
        var level = 0
        var current = ""
        for c in list {
            if "([<".contains(c) { level += 1 } else if ")]>".contains(c) { level -= 1 }
            if c == ",", level == 0 { labels.append(current); current = "" } else { current.append(c) }
        }
        if !current.trimmingCharacters(in: .whitespaces).isEmpty { labels.append(current) }
        let selectorLabels = labels.map { parameter -> String in
            let beforeColon = parameter.split(separator: ":", maxSplits: 1).first ?? ""
            return (beforeColon.split(separator: " ").first.map(String.init) ?? "_") + ":"
        }
        return "\(name)(\(selectorLabels.joined()))"
    }

    /// Every `public func … async` of the library, as `Type.selector`.
    static func asyncCalls(in sources: [(String, String)]) -> Set<String> {
        var calls = Set<String>()
        for (_, text) in sources {
            var owner = ""
            for line in text.split(separator: "\n") {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if !line.hasPrefix(" "), let match = trimmed.firstMatch(of: #/^(?:public\s+)?(?:final\s+)?(?:struct|class|extension|enum|actor)\s+(\w+)/#) {
                    owner = String(match.1)
                }
                guard trimmed.hasPrefix("public "), trimmed.contains(" func "), trimmed.contains(") async"),
                      let selector = selector(of: trimmed) else { continue }
                calls.insert("\(owner).\(selector)")
            }
        }
        return calls
    }

    /// The text of the page's section headed `## \(title)` (up to the next `## `).
    static func section(_ title: String, of page: String) -> String? {
        guard let start = page.range(of: "\n## \(title)\n") else { return nil }
        let rest = page[start.upperBound...]
        return String(rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)])
    }

    static func page() throws -> String {
        try String(contentsOf: root.appendingPathComponent("docs/reference.md"), encoding: .utf8)
    }

    @Test func theParserFindsWhatItShould() throws {
        let sources = try Self.sources()
        let options = Self.publicMembers(of: "LedgerOptions", in: sources)
        #expect(options.isSuperset(of: ["role", "readOnly", "create", "closesWhenIdle", "projectionUpgrade", "init(role:)"]), "\(options.sorted())")
        #expect(Self.publicMembers(of: "AppendReceipt", in: sources).isSuperset(of: ["sequences", "notes", "replayed", "isReplay"]))
        #expect(Self.publicMembers(of: "ProjectionNote", in: sources).isSuperset(of: ["unknownAction", "description"]))
        #expect(Self.selector(of: "public func append(contentsOf events: [NewEvent], expectingHead: UInt64) async throws -> [UInt64] {") == "append(contentsOf:expectingHead:)")
        #expect(Self.selector(of: "public func append<E: LedgerEvent>(_ event: E, key: String? = nil) async throws -> UInt64 {") == "append(_:key:)")
        let calls = Self.asyncCalls(in: sources)
        #expect(calls.contains("Ledger.read(_:)") && calls.contains("Consumer.commit(_:appending:)") && calls.contains("Ledger.waitForChange(after:)"), "\(calls.sorted())")
    }

    @Test(arguments: [("InboxLedger", types), ("InboxLedgerSync", syncTypes)])
    func everyPublicMemberOfTheDocumentedTypesIsOnThePage(module: String, types: [String]) throws {
        let sources = try Self.sources(module)
        let page = try Self.page()
        for type in types {
            guard let section = Self.section("`\(type)`", of: page) else {
                Issue.record("docs/reference.md has no section '## `\(type)`'")
                continue
            }
            let members = Self.publicMembers(of: type, in: sources)
            #expect(!members.isEmpty, "found no public members of \(type) in Sources/\(module)")
            for member in members.sorted() where !section.contains("`\(member)`") && !section.contains("`\(member) ") && !section.contains("`.\(member)") {
                Issue.record("docs/reference.md, section \(type): `\(member)` is public in the sources but not listed")
            }
        }
    }

    @Test func everyAsyncCallIsOnThePage() throws {
        let page = try Self.page()
        guard let section = Self.section("Async forms", of: page) else {
            Issue.record("docs/reference.md has no section '## Async forms'")
            return
        }
        for call in Self.asyncCalls(in: try Self.sources()).sorted() where !section.contains("`\(call.split(separator: ".", maxSplits: 1).last ?? "")`") {
            Issue.record("docs/reference.md, Async forms: `\(call)` is async in the sources but not listed")
        }
    }

    @Test func theReadmeAndTheAppGuideLinkThePage() throws {
        for file in ["README.md", "docs/apps.md"] {
            let text = try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
            #expect(text.contains("reference.md"), "\(file) does not link docs/reference.md")
        }
    }
}
