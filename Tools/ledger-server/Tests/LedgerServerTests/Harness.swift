import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import InboxLedger
import InboxLedgerSync
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// How long a wait may last before it counts as a hang: minutes, so a loaded machine only makes
/// the tests slower. No assertion relies on it. `SYNC_TEST_HANG_GUARD=SECONDS` shortens it to
/// look at a hang without waiting ten minutes.
let hangGuard: Duration = .seconds(ProcessInfo.processInfo.environment["SYNC_TEST_HANG_GUARD"].flatMap { Int($0) } ?? 600)

/// The repository's root (for scripts/sync-postgres.sh) and the built products.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
let productsDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var url = URL(fileURLWithPath: exe)
    while url.path.contains(".xctest") { url.deleteLastPathComponent() }
    return url.hasDirectoryPath ? url.path : url.deletingLastPathComponent().path
}()

struct HarnessError: Error, CustomStringConvertible {
    var description: String
}

/// Polls `condition` (an event: a file, a line, a count) until it holds; fails only on a hang.
func waitFor(_ what: String, _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + hangGuard
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw HarnessError(description: "hang: waited \(hangGuard) for \(what)") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// Polls an asynchronous `condition` (an answer from the server) until it holds; fails only on a hang.
func waitForAsync(_ what: String, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + hangGuard
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw HarnessError(description: "hang: waited \(hangGuard) for \(what)") }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// A child process (posix_spawn; waitpid on a thread of its own) whose output is collected as
/// it comes.
final class Child: Sendable {
    let pid: pid_t
    let name: String
    let output = Mutex(Data())
    let outputClosed = Mutex(false)
    let status = Mutex<Int32?>(nil)

    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        name = URL(fileURLWithPath: executable).lastPathComponent
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw HarnessError(description: "pipe: \(errno)") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup($0) } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, nil, argv, envp)
        close(fds[1])
        guard rc == 0 else {
            close(fds[0])
            throw HarnessError(description: "posix_spawn \(executable): \(rc)")
        }
        pid = child
        let readEnd = fds[0]
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = read(readEnd, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                output.withLock { $0.append(contentsOf: buffer[0..<n]) }
            }
            close(readEnd)
            outputClosed.withLock { $0 = true }
        }
        Thread.detachNewThread { [self] in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            // WIFEXITED: the exit code; otherwise the signal's number.
            let code = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : raw & 0x7f
            status.withLock { $0 = code }
        }
    }

    var text: String { String(decoding: output.withLock { $0 }, as: UTF8.self) }
    var isRunning: Bool { status.withLock { $0 } == nil }

    /// Waits for a line containing `needle`; throws if the process ends without printing it.
    func waitForLine(containing needle: String) async throws {
        do {
            try await waitFor("'\(needle)' from \(name)") {
                if text.contains(needle) { return true }
                if !isRunning {
                    throw HarnessError(description: "\(name) exited (\(status.withLock { $0 } ?? -1)) without '\(needle)':\n\(text)")
                }
                return false
            }
        } catch let error as HarnessError where error.description.hasPrefix("hang") {
            // What the process said last is what tells a hang from a slow run.
            let tail = text.split(separator: "\n").suffix(30).joined(separator: "\n")
            throw HarnessError(description: "\(error.description); the last of its output:\n\(tail)")
        }
    }

    /// Waits for the exit (and the end of its own output); returns the exit code (or signal).
    func exitStatus() async throws -> Int32 {
        try await waitFor("the exit of \(name)") { !isRunning }
        return status.withLock { $0 } ?? -1
    }

    /// Waits for the exit and for the last of its output (`text` complete); for a process that
    /// leaves no child holding its output open.
    func finished() async throws -> Int32 {
        let status = try await exitStatus()
        try await waitFor("the end of \(name)'s output") { outputClosed.withLock { $0 } }
        return status
    }

    func kill() {
        if isRunning { _ = Glibc.kill(pid, SIGKILL) }
        while isRunning { usleep(1000) }  // the waiter thread reaps it
    }
}

/// A private PostgreSQL (as nobody, on a free loopback port, in a temporary directory) and the
/// ledger-server processes of one test; `stop()` ends them all and removes the directory.
final class Harness: Sendable {
    static let secret = "test-secret-0123456789abcdef"
    let directory: String
    let databasePort: Int
    let servers = Mutex<[Child]>([])

    static var postgresAvailable: Bool {
        FileManager.default.fileExists(atPath: "/usr/lib/postgresql") && getuid() == 0 || ProcessInfo.processInfo.environment["PGBIN"] != nil
    }

    /// `postgresOptions`: more `postgres -c` settings (the TLS tests' `ssl=on`, certificates).
    init(postgresOptions: [String] = []) async throws {
        let dir = FileManager.default.temporaryDirectory.path + "/ledger-server-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        directory = dir
        let start = try Child("/bin/bash", [repositoryRoot + "/scripts/sync-postgres.sh", "start", dir + "/pg", "fsync=off"] + postgresOptions)
        // The port from the file the script writes: the pipe may still hold the last line when
        // the script's exit is seen.
        guard try await start.exitStatus() == 0,
              let written = FileManager.default.contents(atPath: dir + "/pg/port"),
              let port = Int(String(decoding: written, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw HarnessError(description: "PostgreSQL did not start: \(start.text)")
        }
        databasePort = port
    }

    var databaseURL: String { "postgres://ledger@127.0.0.1:\(databasePort)/ledger" }

    /// Starts a server (on `port`, or any free one) and waits for its "listening on" line.
    @discardableResult
    func startServer(port: Int = 0, extra: [String] = []) async throws -> (child: Child, url: URL) {
        try await startServer(["--port", String(port), "--database-url", databaseURL, "--secret", Self.secret] + extra)
    }

    /// Starts `ledger-server serve ARGUMENTS` with `environment` added to the test's.
    @discardableResult
    func startServer(_ arguments: [String], environment: [String: String] = [:]) async throws -> (child: Child, url: URL) {
        let child = try Child(productsDirectory + "/ledger-server", ["serve"] + arguments, environment: environment)
        servers.withLock { $0.append(child) }
        try await child.waitForLine(containing: "listening on")
        guard let line = child.text.split(separator: "\n").first(where: { $0.contains("listening on") }),
              let address = line.split(separator: " ").last, let url = URL(string: "http://\(address)") else {
            throw HarnessError(description: "no address in \(child.text)")
        }
        return (child, url)
    }

    func token(_ user: String, scope: String = "device", ttl: Int = 3600, secret: String = Harness.secret) async throws -> String {
        let child = try Child(productsDirectory + "/ledger-server", ["token", "--user", user, "--scope", scope, "--ttl=\(ttl)", "--secret", secret])
        // The whole output: a token read before its last bytes arrive would be refused (401).
        guard try await child.finished() == 0 else { throw HarnessError(description: "token: \(child.text)") }
        return child.text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs `sql` with psql (the cluster's own client) and returns its output (unaligned, tuples only).
    @discardableResult
    func psql(_ sql: String) async throws -> String {
        let bin = ProcessInfo.processInfo.environment["PGBIN"]
            ?? ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.sorted().last.map { "/usr/lib/postgresql/\($0)/bin" } ?? "")
        let run = try Child(bin + "/psql", ["-h", "127.0.0.1", "-p", String(databasePort), "-U", "ledger", "-d", "ledger",
                                            "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        guard try await run.finished() == 0 else { throw HarnessError(description: "psql \(sql): \(run.text)") }
        return run.text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops the database (an outage); ``restartDatabase()`` brings it back on its port.
    func stopDatabase() async throws {
        let stop = try Child("/bin/bash", [repositoryRoot + "/scripts/sync-postgres.sh", "stop", directory + "/pg"])
        guard try await stop.exitStatus() == 0 else { throw HarnessError(description: "stopping PostgreSQL: \(stop.text)") }
    }

    func restartDatabase() async throws {
        let start = try Child("/bin/bash", [repositoryRoot + "/scripts/sync-postgres.sh", "restart", directory + "/pg", "fsync=off"])
        guard try await start.exitStatus() == 0 else { throw HarnessError(description: "restarting PostgreSQL: \(start.text)") }
    }

    func stop() async {
        for server in servers.withLock({ $0 }) { server.kill() }
        if let stop = try? Child("/bin/bash", [repositoryRoot + "/scripts/sync-postgres.sh", "stop", directory + "/pg"]) {
            _ = try? await stop.exitStatus()
        }
        try? FileManager.default.removeItem(atPath: directory)  // best effort: a temporary directory
    }
}

/// Runs `body` with a fresh harness and always stops it.
func withHarness(_ body: (Harness) async throws -> Void) async throws {
    let harness = try await Harness()
    do {
        try await body(harness)
    } catch {
        await harness.stop()
        throw error
    }
    await harness.stop()
}

/// One HTTP request; returns the status and body.
func http(_ method: String, _ url: URL, _ path: String, token: String?, body: Data? = nil) async throws -> (status: Int, body: Data) {
    var request = URLRequest(url: URL(string: url.absoluteString + path) ?? url)
    request.httpMethod = method
    request.httpBody = body
    if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
    let (data, response) = try await URLSession.shared.data(for: request)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
}

/// The whole `/v1/state`, every page of messages followed (`pageSize` per request).
func serverState(_ url: URL, token: String, pageSize: Int? = nil) async throws -> SyncWire.ServerState {
    var whole: SyncWire.ServerState?
    var after: String?
    repeat {
        var query: [String] = []
        if let after { query.append("after=" + (after.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? after)) }
        if let pageSize { query.append("limit=\(pageSize)") }
        let (status, data) = try await http("GET", url, "/v1/state" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")), token: token)
        guard status == 200 else { throw HarnessError(description: "state: \(status) \(String(decoding: data, as: UTF8.self))") }
        let page = try JSONDecoder().decode(SyncWire.ServerState.self, from: data)
        if var w = whole {
            w.messages += page.messages
            whole = w
        } else {
            whole = page
        }
        if let next = page.nextAfter, next == after { throw HarnessError(description: "state: the cursor did not move past \(next)") }
        after = page.nextAfter
    } while after != nil
    whole?.nextAfter = nil
    guard let whole else { throw HarnessError(description: "state: no answer") }
    return whole
}

func publish(_ url: URL, token: String, ids: [String]) async throws {
    let messages = ids.enumerated().map { i, id in InboxMessage(id: id, title: "Message \(id)", sentAt: Timestamp(micros: 1_795_000_000_000_000 + Int64(i) * 1_000_000)) }
    let (status, data) = try await http("POST", url, "/v1/publish", token: token, body: try JSONEncoder().encode(SyncWire.PublishRequest(messages: messages)))
    guard status == 200 else { throw HarnessError(description: "publish: \(status) \(String(decoding: data, as: UTF8.self))") }
}

/// A device ledger in the harness's directory.
func deviceLedger(_ harness: Harness, _ name: String) throws -> (ledger: Ledger, path: String, state: String) {
    let path = harness.directory + "/" + name
    return (try Ledger(path: path, options: LedgerOptions(role: "test")), path, path + ".sync-state")
}

/// The down cursor a device's state file holds (0 before its first page).
func downCursor(_ stateFile: String) -> UInt64 {
    guard let data = FileManager.default.contents(atPath: stateFile),
          let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return 0 }
    return (object["downCursor"] as? NSNumber)?.uint64Value ?? 0
}

/// The shared events of a ledger (what the server must hold exactly once).
func sharedEvents(_ ledger: Ledger) throws -> [Event] {
    var all: [Event] = []
    var after: UInt64 = 0
    while true {
        let page = try ledger.read({ try $0.events(after: after, limit: 1000) })
        guard let last = page.last else { break }
        all += page
        after = last.sequence
    }
    return all.filter { event in
        !(event.key?.hasPrefix(SyncWire.downKeyPrefix) ?? false)
            && (SyncConfiguration.defaultSharedTypes.contains(event.type) || event.type == "com.example.note")
    }
}
