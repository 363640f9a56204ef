import Foundation
import InboxLedgerSync
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Where the database is and whether it answers: every request asks ``Database/withConnection``,
/// which answers `503 unavailable` at once while the health probe (FeedNotifier's own
/// connection) sees the database down, and gives up a connection lease that does not start
/// before the database is seen down or ``leaseTimeout`` passes — instead of waiting out the
/// pool's connection attempts (docs/sync.md, "Failure modes").
final class Database: Sendable {
    enum Health: Sendable, Equatable {
        /// The probe's last query answered.
        case up
        /// The probe cannot connect or its query failed: why.
        case down(String)
    }

    let client: PostgresClient
    /// `HOST:PORT`, for every message about the database.
    let address: String
    let connectionConfiguration: PostgresConnection.Configuration
    let logger: Logger
    let health = Mutex<Health>(.up)
    /// How long a request waits for a pooled connection before it answers 503.
    let leaseTimeout: Duration
    /// Pooled connections leased now (`ledger_db_connections_in_use`).
    let connectionsInUse = Atomic<Int>(0)

    init(client: PostgresClient, address: String, connection: PostgresConnection.Configuration, logger: Logger,
         leaseTimeout: Duration = .seconds(10)) {
        self.client = client
        self.address = address
        self.connectionConfiguration = connection
        self.logger = logger
        self.leaseTimeout = leaseTimeout
    }

    var isUp: Bool { health.withLock { $0 == .up } }

    func markUp() {
        let was = health.withLock { h in
            defer { h = .up }
            return h
        }
        if was != .up { logger.notice("PostgreSQL at \(address) answers again") }
    }

    func markDown(_ error: any Error) {
        let reason = Self.describe(error)
        let was = health.withLock { h in
            defer { h = .down(reason) }
            return h
        }
        if was == .up { logger.error("PostgreSQL at \(address) unreachable: \(reason); requests answer 503 until it answers") }
    }

    /// 503, naming the database and why.
    func unavailable(_ reason: String) -> APIError {
        APIError(.unavailable, "PostgreSQL at \(address) is unavailable (\(reason)); nothing was written, retry later")
    }

    /// Runs `body` on a pooled connection, or throws 503 when the database is down or no
    /// connection is leased in time.
    func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        if case .down(let reason) = health.withLock({ $0 }) { throw unavailable(reason) }
        let started = Flag()
        let asked = ContinuousClock.now
        return try await withThrowingTaskGroup(of: LeaseOutcome<T>.self) { group in
            group.addTask {
                .value(try await self.client.withConnection { c in
                    started.set()
                    ServerMetrics.connectionWait(ContinuousClock.now - asked)
                    self.connectionsInUse.add(1, ordering: .relaxed)
                    defer { self.connectionsInUse.subtract(1, ordering: .relaxed) }
                    return try await body(c)
                })
            }
            group.addTask {
                // Watches the lease only: once the body runs, it is never cancelled from here.
                let deadline = ContinuousClock.now + self.leaseTimeout
                while !started.isSet {
                    if case .down(let reason) = self.health.withLock({ $0 }) { throw self.unavailable(reason) }
                    if ContinuousClock.now >= deadline { throw self.unavailable("no connection within \(self.leaseTimeout)") }
                    try await Task.sleep(for: .milliseconds(50))
                }
                return .leased
            }
            while let outcome = try await group.next() {
                if case .value(let value) = outcome {
                    group.cancelAll()
                    return value
                }
            }
            throw APIError(.internal, "a database call ended without a result")
        }
    }

    /// The error a request answers for a database failure: our own refusals (raised by
    /// `ledger_up_v3` and its predecessors), a value PostgreSQL refused (400), the database unreachable (503); nil for
    /// anything else (a bug: 500).
    func apiError(for error: any Error) -> APIError? {
        switch error {
        case let error as APIError:
            return error
        case let error as PostgresTransactionError:
            // withTransaction wraps whatever failed inside it.
            if let inner = error.closureError, let mapped = apiError(for: inner) { return mapped }
            for inner in [error.beginError, error.commitError, error.rollbackError].compactMap({ $0 }) {
                if let mapped = apiError(for: inner) { return mapped }
            }
            return nil
        case let error as PSQLError:
            guard let state = error.serverInfo?[.sqlState] else {
                // No answer from the server: the connection failed or closed.
                switch error.code {
                case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed,
                     .sslUnsupported, .failedToAddSSLHandler:
                    markDown(error)
                    return unavailable(Self.describe(error))
                default:
                    return nil
                }
            }
            let message = error.serverInfo?[.message] ?? state
            switch state {
            case "LG403": return APIError(.forbidden, message)
            case "LG409": return APIError(.gap, message, acked: error.serverInfo?[.detail].flatMap { UInt64($0) })
            case "LG429": return APIError(.tooMany, message)
            default: break
            }
            switch state.prefix(2) {
            case "22": return APIError(.badRequest, "the database refused a value: \(message)")  // data exception
            case "08", "53", "57": return unavailable(message)  // connection, resources, shutdown
            default: return nil
            }
        case is CancellationError:
            return unavailable("the request was cancelled")
        default:
            return nil
        }
    }

    /// A database error in words (PSQLError's description hides the server's message).
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if let underlying = error.underlying { return "\(underlying)" }
            return "\(error.code)"
        }
        return "\(error)"
    }

    // MARK: - Startup

    /// Connects once, retrying every second for `patience`: "waiting for PostgreSQL at
    /// HOST:PORT" on standard error while it cannot, and that sentence in the error it gives up with.
    func connectAtStartup(patience: Duration) async throws -> PostgresConnection {
        let deadline = ContinuousClock.now + patience
        var said = ContinuousClock.now - .seconds(3600)
        while true {
            do {
                return try await PostgresConnection.connect(configuration: connectionConfiguration, id: 0, logger: logger)
            } catch {
                let reason = Self.describe(error)
                if ContinuousClock.now >= deadline {
                    throw StartupError(description: "gave up waiting for PostgreSQL at \(address) after \(patience): \(reason)")
                }
                if ContinuousClock.now - said >= .seconds(10) {
                    said = ContinuousClock.now
                    FileHandle.standardError.write(Data("ledger-server: waiting for PostgreSQL at \(address): \(reason)\n".utf8))
                }
                try await Task.sleep(for: .seconds(1))
            }
        }
    }
}

/// A flag set once, shared by tasks.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// What finished first in ``Database/withConnection(_:)``: the body, or the lease watch.
enum LeaseOutcome<T: Sendable>: Sendable {
    case value(T)
    case leased
}

/// The server cannot start; says why (ArgumentParser prints it, exit 1).
struct StartupError: Error, CustomStringConvertible {
    var description: String
}
