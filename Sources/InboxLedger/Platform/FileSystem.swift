#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The few POSIX file-system questions opening a ledger asks.
enum FileSystem {
    enum Kind { case missing, directory, other, inaccessible(Int32) }

    static func kind(of path: String) -> Kind {
        var s = stat()
        guard stat(path, &s) == 0 else { return errno == ENOENT ? .missing : .inaccessible(errno) }
        return (s.st_mode & S_IFMT) == S_IFDIR ? .directory : .other
    }

    /// The size of a file, or nil if it cannot be stat'ed.
    static func size(of path: String) -> Int? {
        var s = stat()
        guard stat(path, &s) == 0 else { return nil }
        return Int(s.st_size)
    }

    /// Creates `path` and its missing parents (`mkdir -p`). Returns an errno on failure.
    static func createDirectories(_ path: String) -> Int32? {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component + "/"
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST { return errno }
        }
        return nil
    }

    /// Creates the directory `path` itself, never a parent (a mistyped parent must not become
    /// an empty ledger). Returns an errno on failure (`ENOENT`: a parent is missing); one that
    /// already exists (another process was first) is success.
    static func createDirectory(_ path: String) -> Int32? {
        mkdir(path, 0o755) != 0 && errno != EEXIST ? errno : nil
    }

    /// The directory that holds `path` (`.` for a relative name without one).
    static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// Whether `code` says the path itself is wrong (a component missing, not a directory,
    /// too long, a symlink loop): retrying the same path cannot help.
    static func isPathError(_ code: Int32) -> Bool {
        code == ENOENT || code == ENOTDIR || code == ENAMETOOLONG || code == ELOOP
    }

    /// Names in `path` other than `.` and `..`, or nil if it cannot be listed.
    static func entries(of path: String) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Bytes an unprivileged process may still write on the file system holding `path`.
    static func availableBytes(at path: String) -> Int? {
        var s = statvfs()
        guard statvfs(path, &s) == 0 else { return nil }
        return Int(s.f_bavail) * Int(s.f_frsize)
    }

    /// Creates a new, private (0700) directory named `prefix` + random characters in the first
    /// writable directory of `parents`. Returns its path, or the errno of the last attempt.
    static func makeTemporaryDirectory(prefix: String, in parents: [String]) -> TemporaryDirectoryOutcome {
        var code = ENOENT
        for parent in parents where !parent.isEmpty {
            var template = Array((parent.hasSuffix("/") ? parent : parent + "/") .utf8CString.dropLast()) + Array(prefix.utf8CString.dropLast()) + Array("XXXXXX".utf8CString)
            let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
                guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
                return String(cString: base)
            }
            if let made { return .made(made) }
            code = errno
        }
        return .failed(errno: code)
    }

    /// Removes the files of directory `path` (not recursively: a ledger's directory holds two
    /// files) and then the directory. Returns false if something stayed.
    @discardableResult
    static func removeDirectory(_ path: String) -> Bool {
        for name in entries(of: path) ?? [] { unlink(path + "/" + name) }
        return rmdir(path) == 0
    }

    enum TemporaryDirectoryOutcome {
        case made(String)
        case failed(errno: Int32)
    }

    static func errorMessage(_ code: Int32) -> String {
        guard let s = strerror(code) else { return "errno \(code)" }
        return String(cString: s)
    }
}
