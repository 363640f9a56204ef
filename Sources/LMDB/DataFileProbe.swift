#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a directory's `data.mdb` looks like, read from its meta pages with `pread` before
/// LMDB maps anything, so nothing (not even `lock.mdb`) is created while checking and no
/// damage the probe can see ever reaches LMDB's map (where it would be a SIGBUS or an abort).
/// docs/lmdb.md (rules 23–25) says why each case exists.
public enum DataFileProbe: Sendable, Equatable {
    /// The directory has no `data.mdb`.
    case missing
    /// `data.mdb` (or `lock.mdb`) exists but is not a regular file (a FIFO, a directory, a
    /// device…): opening or reading it could block forever.
    case notRegularFile(name: String, kind: String)
    /// A creation that never finished: `data.mdb` is empty, or holds nothing but zeros and meta
    /// pages of transaction 0 (LMDB's initial pages). Nothing was ever committed in it, so it
    /// is safe to create the store afresh (``Environment/open(directory:configuration:)`` does).
    case unfinishedCreation(fileSize: Int)
    /// `data.mdb` cannot be read (the `errno`).
    case unreadable(errno: Int32)
    /// `data.mdb` is not an LMDB file (bad magic or version).
    case notLMDB
    /// A meta page is damaged (LMDB would refuse or misread the file).
    case damagedMeta(reason: String)
    /// A page every open reads (the main tree, the ledger's metadata) is damaged.
    case damagedPage(reason: String)
    /// `data.mdb` is shorter than the pages its current meta page refers to.
    case truncated(fileSize: Int, requiredSize: Int)
    /// A plausible LMDB data file.
    case valid(pageSize: Int, fileSize: Int)

    /// Reads the two meta pages of `directory/data.mdb` (and checks the kinds of both files).
    /// A file shorter than its meta page's last used page is walked (``PageWalker``) to tell
    /// a real truncation from pages that were allocated and freed without ever being written.
    public static func probe(directory: String) -> DataFileProbe {
        // The probe's descriptor must not be 0–2 either (docs/lmdb.md rule 28); a failure to fill
        // them is reported by the opening that follows (StorePreparation).
        do { try StandardDescriptors.ensureOpen() } catch {}
        if let problem = irregularFile(directory: directory, name: "lock.mdb") { return problem }
        if let problem = irregularFile(directory: directory, name: "data.mdb") { return problem }
        let path = directory + "/data.mdb"
        let fd = openFile(path, O_RDONLY | O_NONBLOCK)
        if fd < 0 { return errno == ENOENT ? .missing : .unreadable(errno: errno) }
        defer { close(fd) }
        return probe(fd: fd)
    }

    /// The size of an unfinished creation in `fd` (``unfinishedCreation(fileSize:)``), or nil:
    /// only that question, without the rest of the probe.
    static func unfinishedCreationSize(fd: Int32) -> Int? {
        var s = stat_t()
        guard fstat(fd, &s) == 0, (s.st_mode & S_IFMT) == S_IFREG, case .success(let head) = metaPages(fd) else { return nil }
        if head.isEmpty { return 0 }
        guard case .unfinishedCreation(let size)? = unfinishedCreation(fd: fd, head: head, fileSize: Int(s.st_size)) else { return nil }
        return size
    }

    /// Both meta pages: two pages of the first meta's page size (every open comes here, so the
    /// common case reads 8 KiB); 128 KiB only when the first page is no meta page.
    static func metaPages(_ fd: Int32) -> Result<[UInt8], LMDBError> {
        let first = readAt(fd, offset: 0, count: 8192)
        guard case .success(let head) = first else { return first }
        let wanted = MetaPage(head, at: 0).map { 2 * $0.pageSize } ?? 2 * MetaPage.largestPageSize
        return wanted > head.count && head.count == 8192 ? readAt(fd, offset: 0, count: wanted) : .success(head)
    }

    static func probe(fd: Int32) -> DataFileProbe {
        var s = stat_t()
        guard fstat(fd, &s) == 0 else { return .unreadable(errno: errno) }
        guard (s.st_mode & S_IFMT) == S_IFREG else { return .notRegularFile(name: "data.mdb", kind: fileKind(s.st_mode)) }
        let head: [UInt8]
        switch metaPages(fd) {
        case .failure(let error): return .unreadable(errno: error.rawValue)
        case .success(let bytes): head = bytes
        }
        if head.isEmpty { return .unfinishedCreation(fileSize: 0) }
        if let unfinished = unfinishedCreation(fd: fd, head: head, fileSize: Int(s.st_size)) { return unfinished }
        guard let first = MetaPage(head, at: 0) else {
            if head.count >= 24, MetaPage.load32(head, 16) == MetaPage.magic {
                return MetaPage.load32(head, 20) == MetaPage.dataVersion ? .damagedMeta(reason: "meta page 0 is damaged") : .notLMDB
            }
            return damagedStart(fd: fd, head: head, fileSize: Int(s.st_size)) ?? .notLMDB
        }
        let pageSize = first.pageSize
        let secondBytes = head.count > pageSize ? Array(head[pageSize..<min(head.count, 2 * pageSize)]) : []
        let second = MetaPage(secondBytes, at: 0)
        // The size is taken after the meta pages are read: another process may be committing
        // right now, and the file only grows, so the size can only be larger than the meta needs.
        guard fstat(fd, &s) == 0 else { return .unreadable(errno: errno) }
        let fileSize = Int(s.st_size)
        guard let second else {
            if secondBytes.count < min(pageSize, 24) { return .truncated(fileSize: fileSize, requiredSize: 2 * pageSize) }
            return .damagedMeta(reason: "meta page 1 is damaged")
        }
        guard second.pageSize == pageSize else { return .damagedMeta(reason: "the meta pages disagree on the page size") }
        let current = second.transactionID > first.transactionID ? second : first
        let (required, overflow) = (current.lastPage + 1).multipliedReportingOverflow(by: pageSize)
        if overflow || current.lastPage < 1 { return .damagedMeta(reason: "meta page records last page \(current.lastPage)") }
        for root in current.roots where root >= current.lastPage + 1 {
            return .damagedMeta(reason: "meta page refers to page \(root) past its last page \(current.lastPage)")
        }
        // Pages allocated and freed within one transaction may never be written, so a short
        // file is damaged only if a page the trees refer to lies past its end: then every tree is
        // walked. Otherwise only the pages every open reads (the main tree, which names the
        // databases, and `openedFirst`): damage there is a typed error, not a signal at open.
        let short = fileSize < required
        let walk = stableWalk(fd: fd, meta: current, fileSize: fileSize, databases: short ? nil : openedFirst)
        if let walk, let beyond = walk.firstPageBeyondEnd {
            return .truncated(fileSize: fileSize, requiredSize: (beyond + 1) * pageSize)
        }
        if let problem = walk?.problems.first { return .damagedPage(reason: problem) }
        return .valid(pageSize: pageSize, fileSize: fileSize)
    }

    /// The named databases an open reads before anything else (the ledger's metadata).
    static let openedFirst: Set<String> = ["meta"]

    /// Walks the trees of `meta` without a reader slot, so only a walk during which no commit
    /// happened counts: a page of transaction T can be reused only by a commit after T + 1,
    /// which needs T + 1's meta page first. Nil when no stable walk could be had (a busy
    /// ledger): nothing is concluded then.
    private static func stableWalk(fd: Int32, meta: MetaPage, fileSize: Int, databases: Set<String>?) -> PageWalkReport? {
        var current = meta
        var size = fileSize
        for _ in 0..<5 {
            let walk = PageWalker(fd: fd, pageSize: current.pageSize, fileSize: size, meta: current)
                .walk(stopAtFirstProblem: true, databases: databases)
            guard case .success(let metas) = MetaPage.read(fd), let newest = metas.newest else { return nil }
            if newest.transactionID == current.transactionID { return walk }
            current = newest
            var s = stat_t()
            guard fstat(fd, &s) == 0 else { return nil }
            size = Int(s.st_size)
        }
        return nil
    }

    /// The most pages a creation by this library writes before its first meta page that
    /// records a commit: LMDB's two initial meta pages, and the one leaf of the main tree the
    /// first transaction writes (it names the new tables, every one of them still empty).
    /// Checked by `StoreFaultTests.aCreationWritesNoMoreThanTheProbeAllows`.
    static let creationPages = 3

    /// Nothing was ever committed: both meta slots are zeros or LMDB's initial meta page
    /// (transaction 0), the file is no larger than a creation writes (``creationPages``), and
    /// its one later page is zeros or exactly what a creation's uncommitted first transaction
    /// writes there — the main tree's leaf naming empty tables. A power cut can leave any subset
    /// of those writes. Anything else — a ledger whose meta pages were zeroed, a foreign file —
    /// is not a creation to finish: emptying it would destroy what it holds (docs/lmdb.md rule 23).
    private static func unfinishedCreation(fd: Int32, head: [UInt8], fileSize: Int) -> DataFileProbe? {
        let metas = [0, 4096, 8192, 16384, 32768, 65536].compactMap { MetaPage(head, at: $0) }
        let pageSize = metas.first?.pageSize ?? Int(sysconf(Int32(_SC_PAGESIZE)))
        guard metas.allSatisfy({ $0.transactionID == 0 && $0.pageSize == pageSize }), fileSize <= creationPages * pageSize else { return nil }
        guard case .success(let bytes) = readAt(fd, offset: 0, count: fileSize) else { return nil }
        var page = 0
        while page * pageSize < bytes.count {
            let start = page * pageSize
            let slice = Array(bytes[start..<min(bytes.count, start + pageSize)])
            if !slice.allSatisfy({ $0 == 0 }) {
                if page < 2 {
                    guard let meta = MetaPage(slice, at: 0), meta.transactionID == 0,
                          slice[MetaPage.size...].allSatisfy({ $0 == 0 }) else { return nil }
                } else {
                    guard isCreationLeaf(slice, page: page) else { return nil }
                }
            }
            page += 1
        }
        return .unfinishedCreation(fileSize: fileSize)
    }

    /// Whether `bytes` is the main tree's leaf as a creation's first transaction writes it at
    /// `page`: every node a named database (`F_SUBDATA`, a 48-byte `MDB_db`) with no entries and
    /// no root page.
    static func isCreationLeaf(_ bytes: [UInt8], page: Int) -> Bool {
        guard bytes.count >= 16, MetaPage.load64(bytes, 0) == UInt64(page), MetaPage.load16(bytes, 10) == 0x02 else { return false }
        let lower = Int(MetaPage.load16(bytes, 12)), upper = Int(MetaPage.load16(bytes, 14))
        guard lower > 16, lower <= upper, upper <= bytes.count, (lower - 16) % 2 == 0 else { return false }
        for slot in stride(from: 16, to: lower, by: 2) {
            let node = Int(MetaPage.load16(bytes, slot))
            guard node >= upper, node + 8 <= bytes.count else { return false }
            let dataSize = Int(MetaPage.load16(bytes, node)) | Int(MetaPage.load16(bytes, node + 2)) << 16
            let flags = MetaPage.load16(bytes, node + 4), keySize = Int(MetaPage.load16(bytes, node + 6))
            let record = node + 8 + keySize
            guard flags == 0x02, dataSize == 48, keySize > 0, record + 48 <= bytes.count else { return false }
            guard MetaPage.load64(bytes, record + 32) == 0, MetaPage.load64(bytes, record + 40) == UInt64.max else { return false }
        }
        return true
    }

    /// Why a file whose first page is no meta page is damaged rather than foreign: another meta
    /// page of a committed transaction (LMDB 0.9 refuses a file with either meta page damaged,
    /// but the store's trees are all there), or zeroed meta pages in front of LMDB pages (at
    /// their own numbers) that an unfinished creation cannot have written. Nil: not LMDB.
    private static func damagedStart(fd: Int32, head: [UInt8], fileSize: Int) -> DataFileProbe? {
        for pageSize in [4096, 8192, 16384, 32768, 65536] {
            if let other = MetaPage(head, at: pageSize), other.pageSize == pageSize {
                let zeroed = head.prefix(min(head.count, pageSize)).allSatisfy { $0 == 0 }
                return .damagedMeta(reason: "meta page 0 is \(zeroed ? "all zeros" : "damaged") (meta page 1, of transaction \(other.transactionID), is intact): not an unfinished creation, so nothing was emptied")
            }
        }
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard head.prefix(2 * pageSize).allSatisfy({ $0 == 0 }) else { return nil }
        // Look for LMDB pages (branch, leaf or overflow, at their own number) among the first pages.
        let pages = min(fileSize / pageSize, 64)
        guard pages > 2, case .success(let bytes) = readAt(fd, offset: 0, count: pages * pageSize) else { return nil }
        let found = (2..<pages).filter { page in
            let start = page * pageSize
            guard start + 16 <= bytes.count else { return false }
            let slice = Array(bytes[start..<(start + 16)])
            return MetaPage.load64(slice, 0) == UInt64(page) && MetaPage.load16(slice, 10) & 0x07 != 0
        }
        guard !found.isEmpty else { return nil }
        return .damagedMeta(reason: "both meta pages (its first \(2 * pageSize) bytes) are all zeros, but the file holds \(fileSize) bytes with LMDB pages (page \(found[0]) and \(found.count - 1) more among the first \(pages)): a damaged store, not an unfinished creation (at most \(creationPages * pageSize) bytes), so nothing was emptied")
    }

    private static func irregularFile(directory: String, name: String) -> DataFileProbe? {
        var s = stat_t()
        guard lstat(directory + "/" + name, &s) == 0 else { return nil }
        let kind = s.st_mode & S_IFMT
        if kind == S_IFREG { return nil }
        if kind == S_IFLNK {
            // A link is followed; what it points to must be a regular file.
            guard stat(directory + "/" + name, &s) == 0 else { return .notRegularFile(name: name, kind: "dangling symbolic link") }
            if (s.st_mode & S_IFMT) == S_IFREG { return nil }
        }
        return .notRegularFile(name: name, kind: fileKind(s.st_mode))
    }

    static func fileKind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "regular file"
        case S_IFDIR: "directory"
        case S_IFIFO: "FIFO"
        case S_IFSOCK: "socket"
        case S_IFCHR: "character device"
        case S_IFBLK: "block device"
        case S_IFLNK: "symbolic link"
        default: "special file"
        }
    }
}

/// One LMDB meta page, parsed from bytes (64-bit layout, native byte order).
///
/// MDB_page header (16 bytes: pgno u64, pad u16, flags u16, lower u16, upper u16), then
/// MDB_meta: magic u32 @16, version u32 @20, address @24, mapsize @32, two MDB_db of 48 bytes
/// (free @40, main @88; md_pad u32, flags u16, depth u16, branch, leaf, overflow, entries,
/// root u64 at +40 — the free DB's md_pad holds the page size), last_pg @136, txnid @144.
struct MetaPage: Equatable {
    static let magic: UInt32 = 0xBEEF_C0DE
    static let dataVersion: UInt32 = 1
    static let pageFlag: UInt16 = 0x08
    static let largestPageSize = 65536
    static let size = 152

    var pageSize: Int
    var freeDB: TreeDescriptor
    var mainDB: TreeDescriptor
    var lastPage: Int
    var transactionID: UInt64

    var roots: [Int] { [freeDB.root, mainDB.root].compactMap { $0 } }

    /// The valid meta pages of the file in `fd`: slot 0, and slot 1 at slot 0's page size.
    static func read(_ fd: Int32) -> Result<[MetaPage], LMDBError> {
        DataFileProbe.metaPages(fd).map { head in
            guard let first = MetaPage(head, at: 0) else { return [] }
            return [first, MetaPage(head, at: first.pageSize)].compactMap { $0 }
        }
    }

    /// Parses the meta page at `offset` of `bytes`; nil unless it has LMDB's flags, magic,
    /// version and a plausible page size.
    init?(_ bytes: [UInt8], at offset: Int) {
        guard bytes.count >= offset + MetaPage.size else { return nil }
        guard MetaPage.load16(bytes, offset + 10) & MetaPage.pageFlag != 0,
              MetaPage.load32(bytes, offset + 16) == MetaPage.magic,
              MetaPage.load32(bytes, offset + 20) == MetaPage.dataVersion else { return nil }
        let pageSize = Int(MetaPage.load32(bytes, offset + 40))
        guard pageSize >= 512, pageSize <= MetaPage.largestPageSize, pageSize & (pageSize - 1) == 0 else { return nil }
        self.pageSize = pageSize
        freeDB = TreeDescriptor(bytes, at: offset + 40)
        mainDB = TreeDescriptor(bytes, at: offset + 88)
        lastPage = Int(clamping: MetaPage.load64(bytes, offset + 136))
        transactionID = MetaPage.load64(bytes, offset + 144)
    }

    static func load16(_ b: [UInt8], _ at: Int) -> UInt16 { UInt16(b[at]) | UInt16(b[at + 1]) << 8 }

    static func load32(_ b: [UInt8], _ at: Int) -> UInt32 {
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(b[at + i]) << (8 * i) }
        return UInt32(littleEndian: v)
    }

    static func load64(_ b: [UInt8], _ at: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(b[at + i]) << (8 * i) }
        return UInt64(littleEndian: v)
    }
}

extension [MetaPage] {
    /// The meta page of the latest commit.
    var newest: MetaPage? { self.max { $0.transactionID < $1.transactionID } }
}

/// An `MDB_db` record: a B-tree's flags, depth and root page (nil for an empty tree).
struct TreeDescriptor: Equatable {
    var flags: UInt16
    var depth: Int
    var root: Int?

    init(_ bytes: [UInt8], at offset: Int) {
        flags = MetaPage.load16(bytes, offset + 4)
        depth = Int(MetaPage.load16(bytes, offset + 6))
        let root = MetaPage.load64(bytes, offset + 40)
        self.root = root == UInt64.max ? nil : Int(clamping: root)
    }
}

/// Reads `count` bytes at `offset` (fewer at the end of the file), retrying short reads.
func readAt(_ fd: Int32, offset: Int, count: Int) -> Result<[UInt8], LMDBError> {
    var buffer = [UInt8](repeating: 0, count: count)
    var done = 0
    while done < count {
        let n = buffer.withUnsafeMutableBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            return pread(fd, base + done, count - done, off_t(offset + done))
        }
        if n < 0 {
            if errno == EINTR { continue }
            return .failure(LMDBError(rawValue: errno))
        }
        if n == 0 { break }
        done += n
    }
    if done < count { buffer.removeLast(count - done) }
    return .success(buffer)
}

/// `open(2)` under a name no type's `open` method hides.
func openFile(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }
