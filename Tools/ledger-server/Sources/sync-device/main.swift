// A device for the server's tests: a SyncClient in a process of its own, so that tests can kill
// it at chosen instants.
//   sync-device LEDGER URL TOKEN STATE once|watch
//   sync-device LEDGER append ROLE TYPE KEY|- PAYLOAD   one event, as a widget or an extension
//                                     process records it; prints `appended replay=true|false`
// Faults (environment):
//   SYNC_DEVICE_EXIT_AFTER_ANSWER=n   exit at once (as if killed) after the n-th up answer,
//                                     before the relay's cursor is committed
//   SYNC_DEVICE_LOSE_ANSWER_EVERY=n   drop every n-th up answer after the server committed it
//                                     (what a connection lost at that instant does)
//   SYNC_DEVICE_SUSPEND_CYCLES=n      (watch) n cycles of Ledger.suspend() / Ledger.resume(), as
//                                     an app going to the background and back, while syncing
//   SYNC_DEVICE_BATCH=n, SYNC_DEVICE_DOWN_PAGE=n   up batch and down page sizes (100, 500)
// Configuration (environment):
//   SYNC_DEVICE_SHARED_TYPES=a,b      the custom types the client shares and records in the
//                                     ledger (com.example.note)
// Prints `status sent=… up-cursor=… up-lag=… down-cursor=… phase=…` on every status change.
import Foundation
import InboxLedger
import InboxLedgerSync
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

final class FaultyTransport: SyncTransport {
    let inner: HTTPSyncTransport
    let exitAfter: Int?
    let loseEvery: Int?
    let answers = Mutex(0)

    init(inner: HTTPSyncTransport, exitAfter: Int?, loseEvery: Int?) {
        self.inner = inner
        self.exitAfter = exitAfter
        self.loseEvery = loseEvery
    }

    func send(_ request: SyncWire.UpRequest) async throws(SyncError) -> SyncWire.UpResponse {
        let answer = try await inner.send(request)
        let n = answers.withLock { $0 += 1; return $0 }
        if let exitAfter, n >= exitAfter {
            FileHandle.standardOutput.write(Data("exiting after answer \(n) through \(answer.acked)\n".utf8))
            _exit(9)
        }
        if let loseEvery, n % loseEvery == 0 { throw .offline("answer dropped after the server committed (fault injection)") }
        return answer
    }

    func fetch(after: UInt64, limit: Int, waitSeconds: Int) async throws(SyncError) -> SyncWire.DownResponse {
        try await inner.fetch(after: after, limit: limit, waitSeconds: waitSeconds)
    }
}

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let args = CommandLine.arguments
if args.count == 7, args[2] == "append" {
    do {
        let ledger = try Ledger(path: args[1], options: LedgerOptions(role: args[3]))
        let receipt = try ledger.append(AppendRequest([NewEvent(type: args[4], payload: Array(args[6].utf8), key: args[5] == "-" ? nil : args[5])]))
        say("appended replay=\(receipt.isReplay)")
        exit(0)
    } catch {
        say("error \(error)")
        exit(1)
    }
}
guard args.count == 6, let url = URL(string: args[2]) else {
    say("usage: sync-device LEDGER URL TOKEN STATE once|watch")
    exit(2)
}
let env = ProcessInfo.processInfo.environment
do {
    let ledger = try Ledger(path: args[1], options: LedgerOptions(role: "device"))
    let sharedCustom = Set((env["SYNC_DEVICE_SHARED_TYPES"] ?? "com.example.note").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
    var configuration = SyncConfiguration(server: url, token: args[3], stateFile: args[4], sharedCustomTypes: sharedCustom)
    configuration.initialBackoff = .milliseconds(20)
    configuration.maxBackoff = .milliseconds(500)
    configuration.longPollSeconds = 5
    configuration.batchSize = Int(env["SYNC_DEVICE_BATCH"] ?? "") ?? 100
    configuration.downPageSize = Int(env["SYNC_DEVICE_DOWN_PAGE"] ?? "") ?? 500
    let transport = FaultyTransport(inner: HTTPSyncTransport(server: url, token: args[3]),
                                    exitAfter: env["SYNC_DEVICE_EXIT_AFTER_ANSWER"].flatMap { Int($0) },
                                    loseEvery: env["SYNC_DEVICE_LOSE_ANSWER_EVERY"].flatMap { Int($0) })
    let client = try SyncClient(ledger: ledger, configuration: configuration, transport: transport)
    if args[5] == "once" {
        let report = try await client.syncOnce()
        say("done sent=\(report.sent) duplicates=\(report.duplicates) received=\(report.received) up-cursor=\(report.upCursor) down-cursor=\(report.downCursor)")
    } else {
        Task { await client.run() }
        if let cycles = env["SYNC_DEVICE_SUSPEND_CYCLES"].flatMap({ Int($0) }) {
            Task {
                var done = 0
                while done < cycles {
                    do {
                        try Ledger.suspend()
                        try await Task.sleep(for: .milliseconds(15))  // in the background a while
                        Ledger.resume()
                        done += 1
                        try await Task.sleep(for: .milliseconds(15))
                    } catch {
                        Ledger.resume()  // a writer held the lock past the wait: try again
                    }
                }
                say("suspend cycles done \(done)")
            }
        }
        for await s in client.statusUpdates() {
            say("status sent=\(s.eventsSent) up-cursor=\(s.upCursor) up-lag=\(s.upLag) down-cursor=\(s.downCursor) phase=\(s.phase.rawValue) error=\(s.lastError ?? "-")")
        }
    }
} catch {
    say("error \(error)")
    exit(1)
}
