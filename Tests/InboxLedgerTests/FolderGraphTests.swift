import Foundation
import Testing

/// The folders of Sources/InboxLedger depend on each other one way only (docs/design.md,
/// "Folders"): an edge A → B when a file of A names a type declared in B, or calls a member of
/// `Ledger` declared in B (`ledger.read(…)`, or `read(…)` inside `extension Ledger`). The files
/// at the top of the target — the `Ledger` façade — are a node of their own, `(root)`: the
/// folders below it may not call back into it.
///
/// `scripts/folder-graph.sh` prints the graph (FOLDER_GRAPH_PRINT=1).
@Suite struct FolderGraphTests {
    @Test func theFoldersHaveNoCycle() throws {
        let graph = try FolderGraph(root: FolderGraph.sources)
        #expect(graph.folders.count >= 8, "found only \(graph.folders.sorted()) under \(FolderGraph.sources)")
        if ProcessInfo.processInfo.environment["FOLDER_GRAPH_PRINT"] != nil { print(graph.description) }
        let cycle = graph.cycle()
        #expect(cycle == nil, "a folder cycle: \(cycle?.joined(separator: " → ") ?? "")\n\(graph.description)")
    }

    @Test func onlyTheStoreImportsLMDB() throws {
        let enumerator = FileManager.default.enumerator(atPath: FolderGraph.sources)
        var offenders: [String] = []
        while let relative = enumerator?.nextObject() as? String {
            guard relative.hasSuffix(".swift"), !relative.hasPrefix("Store/") else { continue }
            let source = try String(contentsOfFile: FolderGraph.sources + "/" + relative, encoding: .utf8)
            let lines = FolderGraph.withoutComments(source).split(separator: "\n")
            if lines.contains(where: { $0.hasPrefix("import LMDB") || $0.contains("rawTransaction") }) { offenders.append(relative) }
        }
        #expect(offenders.isEmpty, "import LMDB or the raw transaction outside Store/: \(offenders.sorted())")
    }

    @Test func theGraphSeesACallOfALedgerMember() {
        // Calling a member another folder declared on `Ledger` is an edge to that folder, whether
        // through a handle or from inside an extension; the root's files are the node `(root)`.
        let graph = FolderGraph(files: [
            (FolderGraph.rootNode, "public final class Ledger {\n    func read() {}\n}"),
            ("A", "extension Ledger {\n    func helper() {}\n}"),
            ("B", "struct Beta { func f(ledger: Ledger) { ledger.helper() } }"),
            ("C", "extension Ledger {\n    func g() { helper() }\n}"),
            ("D", "struct Delta { func f(x: Gamma) { x.helper() } }\nstruct Gamma {}"),
        ])
        #expect(graph.edges["B"]?["A"] == ["helper()"])
        #expect(graph.edges[FolderGraph.rootNode] == nil)
        #expect(graph.edges["C"]?["A"] == ["helper()"])
        #expect(graph.edges["C"]?[FolderGraph.rootNode] == ["Ledger"])
        #expect(graph.edges["D"] == nil)
    }

    @Test func theGraphSeesAnEdgeAndACycle() {
        // The check itself can fail: two folders naming each other's types form a cycle.
        let graph = FolderGraph(files: [
            ("A", "struct Alpha {}\nlet b: Beta"),
            ("B", "enum Beta {}\nfunc f(_ a: Alpha) {}"),
            ("C", "// Alpha in a comment is no use\nstruct Gamma { let a: Alpha }"),
        ])
        #expect(graph.edges["C"] == ["A": ["Alpha"]])
        #expect(graph.cycle() == ["A", "B", "A"])
    }
}

/// Which folder's files name types declared in which folder.
struct FolderGraph: CustomStringConvertible {
    /// Sources/InboxLedger, or the directory in `FOLDER_GRAPH_SOURCES` (the graph of another
    /// checkout, e.g. before a change: `scripts/folder-graph.sh <dir>`).
    static let sources = ProcessInfo.processInfo.environment["FOLDER_GRAPH_SOURCES"]
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/InboxLedger").standardizedFileURL.path

    /// The node of the files at the top of the target (the `Ledger` façade).
    static let rootNode = "(root)"

    /// Folder → folder → the type names (and `member()` calls of `Ledger`) that make the edge.
    private(set) var edges: [String: [String: Set<String>]] = [:]
    private(set) var folders: Set<String> = []

    init(root: String) throws {
        var files: [(String, String)] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            let folder = relative.contains("/") ? String(relative.prefix { $0 != "/" }) : Self.rootNode
            files.append((folder, try String(contentsOfFile: root + "/" + relative, encoding: .utf8)))
        }
        self.init(files: files)
    }

    init(files: [(folder: String, source: String)]) {
        let stripped = files.map { (folder: $0.folder, source: Self.withoutComments($0.source)) }
        var owner: [String: Set<String>] = [:]
        for (folder, source) in stripped {
            folders.insert(folder)
            for name in Self.declaredTypes(source) { owner[name, default: []].insert(folder) }
        }
        var members: [String: Set<String>] = [:]
        for (folder, source) in stripped {
            for member in Self.ledgerMembers(source) { members[member.name + (member.isFunction ? "()" : ""), default: []].insert(folder) }
        }
        for (folder, source) in stripped {
            for word in Self.capitalizedWords(source) {
                for declaring in owner[word] ?? [] where declaring != folder {
                    edges[folder, default: [:]][declaring, default: []].insert(word)
                }
            }
            for use in Self.ledgerMemberUses(source) {
                // Names, not signatures: an overload declared in several folders (an async form
                // beside the blocking one) is the caller's own if its folder declares one, else
                // the façade's if the root declares one.
                guard let declaring = members[use], !declaring.contains(folder) else { continue }
                for target in declaring.contains(Self.rootNode) ? [Self.rootNode] : Array(declaring) {
                    edges[folder, default: [:]][target, default: []].insert(use)
                }
            }
        }
    }

    /// The members declared in `extension Ledger` blocks and in the `Ledger` class itself
    /// (private ones are invisible to other files).
    static func ledgerMembers(_ source: String) -> [(name: String, isFunction: Bool)] {
        let kinds: Set = ["func", "var", "let"]
        var names: [(name: String, isFunction: Bool)] = []
        var inLedger = false
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("extension Ledger ") || line.hasPrefix("extension Ledger{") || line.contains("class Ledger:") || line.contains("class Ledger {") {
                inLedger = true
                continue
            }
            if line.hasPrefix("}") { inLedger = false; continue }
            guard inLedger, line.prefix(while: { $0 == " " }).count == 4 else { continue }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "(" || $0 == "<" || $0 == ":" }).map(String.init)
            guard let kind = words.firstIndex(where: kinds.contains), kind + 1 < words.count,
                  !words[..<kind].contains(where: { $0.hasPrefix("private") || $0.hasPrefix("fileprivate") }) else { continue }
            let name = String(words[kind + 1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
            if name.first?.isLowercase == true { names.append((name, words[kind] == "func")) }
        }
        return names
    }

    /// Names used as members of `Ledger` (a call as `name()`): after `ledger.`, `Ledger.` or
    /// `self.`, and, inside an `extension Ledger`, bare calls (`read(…)`) and bare properties
    /// dereferenced (`store.x`).
    static func ledgerMemberUses(_ source: String) -> Set<String> {
        var uses: Set<String> = []
        var inExtension = false
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("extension Ledger ") || line.hasPrefix("extension Ledger{") { inExtension = true }
            else if line.hasPrefix("}") { inExtension = false }
            let chars = Array(line)
            var i = 0
            while i < chars.count {
                guard chars[i].isLetter || chars[i] == "_" else { i += 1; continue }
                let start = i
                while i < chars.count, chars[i].isLetter || chars[i].isNumber || chars[i] == "_" { i += 1 }
                let word = String(chars[start..<i])
                let next = i < chars.count ? chars[i] : " "
                if start > 0, chars[start - 1] == "." {
                    var q = start - 1
                    while q > 0, chars[q - 1].isLetter || chars[q - 1].isNumber || chars[q - 1] == "_" { q -= 1 }
                    let qualifier = String(chars[q..<(start - 1)])
                    if qualifier == "ledger" || qualifier == "Ledger" || (inExtension && qualifier == "self") {
                        uses.insert(next == "(" ? word + "()" : word)
                    }
                } else if inExtension, next == "(" || next == "." {
                    uses.insert(next == "(" ? word + "()" : word)
                }
            }
        }
        return uses
    }

    /// Types declared at the top level, and types nested in `extension Ledger` (``Ledger/Limits``…);
    /// private ones are invisible to other files.
    static func declaredTypes(_ source: String) -> [String] {
        let kinds: Set = ["struct", "class", "enum", "protocol", "actor", "typealias"]
        let modifiers: Set = ["public", "package", "internal", "final", "indirect"]
        var names: [String] = []
        var inLedgerExtension = false
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("extension Ledger ") || line.hasPrefix("extension Ledger{") { inLedgerExtension = true; continue }
            if line.hasPrefix("}") { inLedgerExtension = false; continue }
            let indent = line.prefix { $0 == " " }.count
            guard indent == 0 || (inLedgerExtension && indent == 4) else { continue }
            var words = line.split(separator: " ").map(String.init)[...]
            while let first = words.first, first.hasPrefix("@") || modifiers.contains(first) { words = words.dropFirst() }
            guard let kind = words.first, kinds.contains(kind), words.count > 1 else { continue }
            let name = String(words[words.startIndex + 1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
            if name.first?.isUppercase == true { names.append(name) }
        }
        return names
    }

    /// Identifiers that start with a capital letter.
    static func capitalizedWords(_ source: String) -> Set<String> {
        var words: Set<String> = []
        var current = ""
        for ch in source + " " {
            if ch.isLetter || ch.isNumber || ch == "_" { current.append(ch); continue }
            if current.first?.isUppercase == true { words.insert(current) }
            current = ""
        }
        return words
    }

    /// The source without `//` comments (documentation mentions types it does not use) and
    /// without the text of string literals (messages name calls they do not make).
    static func withoutComments(_ source: String) -> String {
        source.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            var code = ""
            var inString = false
            var escaped = false
            var previous: Character = " "
            for ch in line {
                if inString {
                    if escaped { escaped = false } else if ch == "\\" { escaped = true } else if ch == "\"" { inString = false; code.append(ch) }
                    continue
                }
                if ch == "/", previous == "/" { code.removeLast(); break }
                if ch == "\"" { inString = true }
                code.append(ch)
                previous = ch
            }
            return code
        }.joined(separator: "\n")
    }

    /// A cycle as a path that returns to its start, or nil.
    func cycle() -> [String]? {
        var state: [String: Bool] = [:]  // false: on the path; true: done
        var path: [String] = []
        func visit(_ folder: String) -> [String]? {
            if state[folder] == true { return nil }
            if state[folder] == false { return Array(path[(path.firstIndex(of: folder) ?? 0)...]) + [folder] }
            state[folder] = false
            path.append(folder)
            for next in (edges[folder] ?? [:]).keys.sorted() {
                if let found = visit(next) { return found }
            }
            path.removeLast()
            state[folder] = true
            return nil
        }
        for folder in folders.union(edges.keys).sorted() {
            if let found = visit(folder) { return found }
        }
        return nil
    }

    var description: String {
        edges.keys.sorted().flatMap { from in
            (edges[from] ?? [:]).keys.sorted().map { to in "\(from) → \(to): \((edges[from]?[to] ?? []).sorted().joined(separator: ", "))" }
        }.joined(separator: "\n")
    }
}
