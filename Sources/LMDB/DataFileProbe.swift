#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a directory's `data.mdb` looks like, read from its meta pages without opening the
/// environment, so nothing (not even `lock.mdb`) is created while checking.
public enum DataFileProbe: Sendable, Equatable {
    /// The directory has no `data.mdb`.
    case missing
    /// `data.mdb` cannot be read (the `errno`).
    case unreadable(errno: Int32)
    /// `data.mdb` is not an LMDB file (bad magic or version).
    case notLMDB
    /// `data.mdb` is shorter than its own meta page says (`fileSize` < `requiredSize`).
    case truncated(fileSize: Int, requiredSize: Int)
    /// A plausible LMDB data file.
    case valid(pageSize: Int, fileSize: Int)

    // MDB_page header (16 bytes), then MDB_meta: magic u32, version u32, address ptr,
    // mapsize size_t, 2 × MDB_db (48 bytes each: md_pad u32 — the first's holds the page size —,
    // flags u16, depth u16, branch, leaf, overflow, entries, root), last_pg, txnid.
    // 64-bit layout, native byte order: the free tree's root is at 80, the main tree's at 128.
    static let magic: UInt32 = 0xBEEF_C0DE
    static let dataVersion: UInt32 = 1

    /// Reads the two meta pages of `directory/data.mdb`.
    public static func probe(directory: String) -> DataFileProbe {
        let path = directory + "/data.mdb"
        let fd = Glibc_open(path, O_RDONLY)
        if fd < 0 { return errno == ENOENT ? .missing : .unreadable(errno: errno) }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 160)
        let n = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 160, 0) }
        guard n == 160 else { return n < 0 ? .unreadable(errno: errno) : (n < 24 ? .notLMDB : .truncated(fileSize: n, requiredSize: 8192)) }
        guard load32(header, 16) == magic, load32(header, 20) == dataVersion else { return .notLMDB }
        let pageSize = Int(load32(header, 40))
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else { return .notLMDB }
        var second = [UInt8](repeating: 0, count: 160)
        let m = second.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 160, off_t(pageSize)) }
        // The size is taken after the meta pages are read: another process may be committing
        // right now, and the file only grows, so the size can only be larger than the meta needs.
        var s = stat_t()
        guard fstat(fd, &s) == 0 else { return .unreadable(errno: errno) }
        let fileSize = Int(s.st_size)
        guard fileSize >= 2 * pageSize else { return .truncated(fileSize: fileSize, requiredSize: 2 * pageSize) }
        guard m == 160 else { return .truncated(fileSize: fileSize, requiredSize: 2 * pageSize) }
        // The meta with the larger transaction ID is the current one. The root pages of its two
        // B-trees (free list, main) were written by the commit that wrote the meta, so they must
        // lie inside the file. (Its last_pg need not: a page allocated and freed within one
        // transaction may never be written.) P_INVALID (all ones) marks an empty tree.
        var best = header
        if load32(second, 16) == magic, load64(second, 144) > load64(header, 144) { best = second }
        let roots = [load64(best, 80), load64(best, 128)].filter { $0 != UInt64.max }
        let highest = Int(clamping: roots.max() ?? 1)
        let (required, overflow) = (highest + 1).multipliedReportingOverflow(by: pageSize)
        if overflow { return .notLMDB }
        if fileSize < required { return .truncated(fileSize: fileSize, requiredSize: required) }
        return .valid(pageSize: pageSize, fileSize: fileSize)
    }

    private static func load32(_ b: [UInt8], _ at: Int) -> UInt32 {
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(b[at + i]) << (8 * i) }
        return UInt32(littleEndian: v)
    }

    private static func load64(_ b: [UInt8], _ at: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(b[at + i]) << (8 * i) }
        return UInt64(littleEndian: v)
    }
}

@inline(__always)
private func Glibc_open(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }
