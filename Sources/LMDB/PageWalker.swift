import CLMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a walk of every B-tree page of a data file found.
public struct PageWalkReport: Sendable, Hashable {
    /// Pages read and checked (branch, leaf and overflow pages of every tree).
    public var pagesVisited: Int
    /// Each damaged page, precisely ("page 17 of tree 'events': …"). Empty when healthy.
    public var problems: [String]
    /// The transaction whose trees were walked.
    public var transactionID: UInt64
    /// The lowest page the trees refer to that lies past the end of the file, if any.
    var firstPageBeyondEnd: Int?

    /// No damaged page.
    public var isHealthy: Bool { problems.isEmpty }
}

/// Walks LMDB's B-trees with bounds-checked `pread`s, never through LMDB's map, so a damaged
/// or missing page is a finding instead of an `abort()` (LMDB's assertions) or a SIGBUS
/// (a page past the end of the file). docs/lmdb.md rule 25.
///
/// Each page is checked for what LMDB relies on without checking: its recorded number, its
/// type for its level in the tree, the bounds of its node table and of every node, child page
/// numbers within the used pages, overflow pages' headers and lengths, and that no page is
/// reached twice. The free list and the main tree are walked, and every named database found
/// in the main tree.
struct PageWalker {
    let fd: Int32
    let pageSize: Int
    let fileSize: Int
    let meta: MetaPage

    // MDB_page flags and MDB_node flags (lmdb's mdb.c).
    private static let branchFlag: UInt16 = 0x01
    private static let leafFlag: UInt16 = 0x02
    private static let overflowFlag: UInt16 = 0x04
    private static let leaf2Flag: UInt16 = 0x20
    private static let bigData: UInt16 = 0x01
    private static let subData: UInt16 = 0x02
    private static let dupData: UInt16 = 0x04
    private static let headerSize = 16
    private static let nodeHeaderSize = 8

    private struct Step {
        var page: Int
        var level: Int
        var tree: String
        var isMain: Bool
    }

    /// Walks the free list, the main tree and the named databases — all of them, or only those
    /// in `databases` (the free list is then skipped too).
    func walk(stopAtFirstProblem: Bool = false, databases: Set<String>? = nil) -> PageWalkReport {
        var report = PageWalkReport(pagesVisited: 0, problems: [], transactionID: meta.transactionID)
        var visited = Set<Int>()
        var stack: [Step] = []
        if databases == nil, let root = meta.freeDB.root {
            stack.append(Step(page: root, level: meta.freeDB.depth, tree: "free list", isMain: false))
        }
        if let root = meta.mainDB.root { stack.append(Step(page: root, level: meta.mainDB.depth, tree: "main", isMain: true)) }
        func problem(_ page: Int, _ tree: String, _ text: String) {
            report.problems.append("page \(page) of tree '\(tree)': \(text)")
        }
        while let step = stack.popLast() {
            if stopAtFirstProblem, !report.problems.isEmpty { break }
            guard visited.insert(step.page).inserted else {
                problem(step.page, step.tree, "is referenced twice")
                continue
            }
            guard let page = read(step.page, tree: step.tree, report: &report) else { continue }
            report.pagesVisited += 1
            let flags = MetaPage.load16(page, 10)
            let isBranch = flags & Self.branchFlag != 0
            let isLeaf = flags & (Self.leafFlag | Self.leaf2Flag) != 0
            guard step.level >= 1 else { problem(step.page, step.tree, "lies deeper than the tree's recorded depth"); continue }
            if step.level > 1 ? !isBranch : !isLeaf {
                problem(step.page, step.tree, "expected a \(step.level > 1 ? "branch" : "leaf") page, found flags 0x\(String(flags, radix: 16))")
                continue
            }
            if flags & Self.leaf2Flag != 0 { continue }  // fixed-size keys only (MDB_DUPFIXED): no nodes to follow
            let lower = Int(MetaPage.load16(page, 12)), upper = Int(MetaPage.load16(page, 14))
            guard lower >= Self.headerSize, lower <= upper, upper <= pageSize, (lower - Self.headerSize) % 2 == 0 else {
                problem(step.page, step.tree, "node table bounds \(lower)–\(upper) are impossible")
                continue
            }
            let count = (lower - Self.headerSize) / 2
            if isBranch && count == 0 { problem(step.page, step.tree, "is a branch page without children"); continue }
            for index in 0..<count {
                let at = Int(MetaPage.load16(page, Self.headerSize + 2 * index))
                guard at >= upper, at + Self.nodeHeaderSize <= pageSize else {
                    problem(step.page, step.tree, "node \(index) starts outside the page (\(at))")
                    break
                }
                let low = UInt64(MetaPage.load16(page, at)), high = UInt64(MetaPage.load16(page, at + 2))
                let nodeFlags = MetaPage.load16(page, at + 4)
                let keySize = Int(MetaPage.load16(page, at + 6))
                let keyEnd = at + Self.nodeHeaderSize + keySize
                guard keyEnd <= pageSize else { problem(step.page, step.tree, "node \(index)'s key runs past the page"); break }
                if isBranch {
                    let child = Int(low | high << 16 | UInt64(nodeFlags) << 32)
                    guard child >= 2, child <= meta.lastPage else {
                        problem(step.page, step.tree, "node \(index) points to page \(child), outside the used pages 2–\(meta.lastPage)")
                        continue
                    }
                    stack.append(Step(page: child, level: step.level - 1, tree: step.tree, isMain: step.isMain))
                    continue
                }
                let dataSize = Int(low | high << 16)
                if nodeFlags & Self.bigData != 0 {
                    guard keyEnd + 8 <= pageSize else { problem(step.page, step.tree, "node \(index)'s overflow reference runs past the page"); break }
                    let first = Int(clamping: MetaPage.load64(page, keyEnd))
                    checkOverflow(first, dataSize: dataSize, tree: step.tree, visited: &visited, report: &report)
                    continue
                }
                guard keyEnd + dataSize <= pageSize else { problem(step.page, step.tree, "node \(index)'s value runs past the page"); break }
                if step.isMain, nodeFlags & Self.subData != 0, nodeFlags & Self.dupData == 0 {
                    guard dataSize == 48 else { problem(step.page, step.tree, "node \(index) holds a database record of \(dataSize) bytes"); continue }
                    let record = Array(page[keyEnd..<keyEnd + 48])
                    let tree = TreeDescriptor(record, at: 0)
                    let name = String(decoding: page[(at + Self.nodeHeaderSize)..<keyEnd], as: UTF8.self)
                    if let root = tree.root {
                        guard root >= 2, root <= meta.lastPage else {
                            problem(step.page, step.tree, "database '\(name)' has its root at page \(root), outside the used pages")
                            continue
                        }
                        if databases?.contains(name) ?? true {
                            stack.append(Step(page: root, level: tree.depth, tree: name, isMain: false))
                        } else if (root + 1) * pageSize > fileSize {
                            report.firstPageBeyondEnd = min(report.firstPageBeyondEnd ?? root, root)
                            problem(step.page, step.tree, "database '\(name)' has its root at page \(root), past the end of the file")
                        }
                    }
                }
            }
        }
        return report
    }

    private func checkOverflow(_ first: Int, dataSize: Int, tree: String, visited: inout Set<Int>, report: inout PageWalkReport) {
        guard first >= 2, first <= meta.lastPage else {
            report.problems.append("tree '\(tree)': an overflow value points to page \(first), outside the used pages")
            return
        }
        guard visited.insert(first).inserted else {
            report.problems.append("page \(first) of tree '\(tree)': is referenced twice")
            return
        }
        guard let header = read(first, tree: tree, report: &report) else { return }
        report.pagesVisited += 1
        let pages = Int(MetaPage.load32(header, 12))
        guard MetaPage.load16(header, 10) & Self.overflowFlag != 0, pages >= 1,
              first + pages - 1 <= meta.lastPage, dataSize <= pages * pageSize - Self.headerSize else {
            report.problems.append("page \(first) of tree '\(tree)': not a valid overflow page for a value of \(dataSize) bytes")
            return
        }
        let lastByte = (first + pages) * pageSize
        if lastByte > fileSize {
            let beyond = max(first, fileSize / pageSize)
            report.firstPageBeyondEnd = min(report.firstPageBeyondEnd ?? beyond, beyond)
            report.problems.append("page \(beyond) of tree '\(tree)': lies past the end of the file (\(fileSize) bytes)")
        }
    }

    /// Reads page `number`; records a problem and returns nil if it lies past the end of the
    /// file, cannot be read, or records another number.
    private func read(_ number: Int, tree: String, report: inout PageWalkReport) -> [UInt8]? {
        if (number + 1) * pageSize > fileSize {
            report.firstPageBeyondEnd = min(report.firstPageBeyondEnd ?? number, number)
            report.problems.append("page \(number) of tree '\(tree)': lies past the end of the file (\(fileSize) bytes)")
            return nil
        }
        switch readAt(fd, offset: number * pageSize, count: pageSize) {
        case .failure(let error):
            report.problems.append("page \(number) of tree '\(tree)': cannot be read (\(error.message))")
            return nil
        case .success(let page):
            guard page.count == pageSize else {
                report.firstPageBeyondEnd = min(report.firstPageBeyondEnd ?? number, number)
                report.problems.append("page \(number) of tree '\(tree)': lies past the end of the file")
                return nil
            }
            let recorded = MetaPage.load64(page, 0)
            guard recorded == UInt64(number) else {
                report.problems.append("page \(number) of tree '\(tree)': records itself as page \(recorded)")
                return nil
            }
            return page
        }
    }
}

extension DataFileProbe {
    /// Walks the pages of `directory/data.mdb` without opening the environment (for a store
    /// LMDB refuses to open). Without a reader slot nothing pins the pages, so run it only on a
    /// store no process is writing; nil if the file has no readable meta page.
    public static func walkPages(directory: String) -> PageWalkReport? {
        let fd = openFile(directory + "/data.mdb", O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var s = stat_t()
        guard fstat(fd, &s) == 0, (s.st_mode & S_IFMT) == S_IFREG,
              case .success(let metas) = MetaPage.read(fd), let meta = metas.newest else { return nil }
        return PageWalker(fd: fd, pageSize: meta.pageSize, fileSize: Int(s.st_size), meta: meta).walk()
    }
}

extension Environment {
    /// Walks every B-tree page of the snapshot a read transaction sees, with `pread`s (never
    /// through LMDB's map), and reports each damaged page. The read transaction pins the
    /// snapshot, so pages are not reused under the walk while other processes write.
    ///
    /// ```swift
    /// let report = try env.walkPages()
    /// for problem in report.problems { print(problem) }
    /// ```
    public func walkPages() throws(LMDBError) -> PageWalkReport {
        let path = directory + "/data.mdb"
        let fd = openFile(path, O_RDONLY)
        guard fd >= 0 else { throw LMDBError(rawValue: errno) }
        defer { close(fd) }
        for _ in 0..<20 {
            let attempt: PageWalkReport?
            do throws(LMDBError) {
                attempt = try shared.withReadTransactionID { (id: UInt64) throws(LMDBError) -> PageWalkReport? in
                    // The meta page of the snapshot this transaction reads; a writer may have
                    // rewritten its slot (every other commit does) since: then try again.
                    guard let meta = try MetaPage.read(fd).get().first(where: { $0.transactionID == id }) else { return nil }
                    var s = stat_t()
                    guard fstat(fd, &s) == 0 else { throw LMDBError(rawValue: errno) }
                    return PageWalker(fd: fd, pageSize: meta.pageSize, fileSize: Int(s.st_size), meta: meta).walk()
                }
            } catch {
                guard error == .mapResized else { throw error }
                try shared.adoptMapSize()
                continue
            }
            if let attempt { return attempt }
        }
        throw .tryAgain
    }
}

extension SharedEnvironment {
    /// Runs `body` with the ID of a fresh read transaction, held open for the call.
    func withReadTransactionID<T>(_ body: (UInt64) throws(LMDBError) -> T) throws(LMDBError) -> T {
        var result: T?
        do { try transaction(.read) { txn in result = try body(UInt64(txn.id)) } } catch {
            throw (error as? LMDBError) ?? .badTransaction
        }
        guard let result else { throw .badTransaction }
        return result
    }
}
