import Foundation
import Testing

/// The folders of Sources/InboxLedger depend on each other one way only (docs/design.md,
/// "Folders"): an edge A → B when a file of A names a type declared in B. The files at the
/// top of the target (`Ledger`, its options and errors, `Schema`) are the façade every folder
/// extends, left out of the graph.
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
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/InboxLedger").standardizedFileURL.path

    /// Folder → folder → the type names that make the edge.
    private(set) var edges: [String: [String: Set<String>]] = [:]
    private(set) var folders: Set<String> = []

    init(root: String) throws {
        var files: [(String, String)] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            guard relative.hasSuffix(".swift"), relative.contains("/") else { continue }
            let folder = String(relative.prefix { $0 != "/" })
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
        for (folder, source) in stripped {
            for word in Self.capitalizedWords(source) {
                for declaring in owner[word] ?? [] where declaring != folder {
                    edges[folder, default: [:]][declaring, default: []].insert(word)
                }
            }
        }
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

    /// The source without `//` comments (documentation mentions types it does not use).
    static func withoutComments(_ source: String) -> String {
        source.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            guard let range = line.range(of: "//") else { return line }
            return line[..<range.lowerBound]
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
