import Foundation
import InboxLedger
import InboxLedgerSync
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `HTTPSyncTransport`'s failures in words (issue 31: `NSURLErrorDomain Code=-1001 "(null)"`
/// told nobody it had timed out), against loopback sockets that refuse, never answer, or answer
/// TLS with plain text.
@Suite struct TransportErrorTests {
    /// `localizedDescription` is the error in words (issue 40: it was Foundation's "The operation
    /// could not be completed. (InboxLedgerSync.SyncError error 0.)"), with what to do.
    @Test(arguments: [SyncError.unauthorized("token expired"), .offline("connection refused: nothing at 127.0.0.1:1"),
                      .gap(serverAcked: 3, deviceCursor: 9), .rejected(status: 400, code: "bad_request", message: "NUL in id")])
    func aSyncErrorSaysWhatInItsLocalizedDescription(_ error: SyncError) {
        let erased: any Error = error
        #expect(erased.localizedDescription == error.description)
        #expect(!erased.localizedDescription.contains("could not be completed"))
        #expect((erased as? LocalizedError)?.recoverySuggestion?.isEmpty == false)
    }

    /// A loopback TCP socket listening on a free port; `reply` is written to each connection
    /// accepted (nil: connections are never accepted, so nothing ever answers).
    final class Listener: @unchecked Sendable {
        let fd: Int32
        let port: Int

        init(reply: [UInt8]? = nil) throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.fd = fd
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            guard bound == 0, listen(fd, 16) == 0 else { throw CocoaError(.fileWriteUnknown) }
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            port = Int(UInt16(bigEndian: address.sin_port))
            if let reply {
                Thread.detachNewThread {
                    while true {
                        let connection = accept(fd, nil, nil)
                        guard connection >= 0 else { return }
                        _ = reply.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                        usleep(200_000)
                        close(connection)
                    }
                }
            }
        }

        func stop() { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }

        /// Answers every request with `body` (`200`, JSON) after 0–`maxDelay` ms: a slow server.
        func answerSlowly(_ body: [UInt8], maxDelay: Int) {
            let response = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8) + body
            let fd = self.fd
            Thread.detachNewThread {
                while true {
                    let connection = accept(fd, nil, nil)
                    guard connection >= 0 else { return }
                    Thread.detachNewThread {
                        var head: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 4096)
                        while !head.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
                            let n = buffer.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
                            guard n > 0 else { close(connection); return }
                            head += buffer[..<n]
                        }
                        usleep(UInt32.random(in: 0...UInt32(maxDelay * 1000)))
                        _ = response.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                        close(connection)
                    }
                }
            }
        }
    }

    func failure(_ url: String, timeout: Double = 30) async -> NetworkFailure? {
        guard let server = URL(string: url) else { return nil }
        do {
            _ = try await HTTPSyncTransport(server: server, token: "t", timeoutSeconds: timeout).fetch(after: 0, limit: 1, waitSeconds: 0)
            return nil
        } catch {
            guard case .offline(let failure) = error else { Issue.record("not offline: \(error)"); return nil }
            return failure
        }
    }

    @Test func aServerThatNeverAnswersTimesOutInWords() async throws {
        let listener = try Listener()
        defer { listener.stop() }
        let failure = await failure("http://127.0.0.1:\(listener.port)", timeout: 1)
        #expect(failure?.reason == .timedOut)
        #expect(failure?.message == "timed out: 127.0.0.1:\(listener.port) did not answer GET /v1/down within 1 s", "\(String(describing: failure))")
    }

    @Test func aClosedPortIsConnectionRefused() async throws {
        let listener = try Listener()
        let port = listener.port
        listener.stop()
        let failure = await failure("http://127.0.0.1:\(port)")
        #expect(failure?.reason == .connectionRefused)
        #expect(failure?.message.hasPrefix("connection refused: nothing accepts connections at 127.0.0.1:\(port)") == true, "\(String(describing: failure))")
    }

    @Test func aNameThatDoesNotResolveIsDNS() async {
        let failure = await failure("http://inbox-ledger-test.invalid", timeout: 10)
        #expect(failure?.reason == .hostNotFound)
        #expect(failure?.message == "DNS: the host name inbox-ledger-test.invalid does not resolve", "\(String(describing: failure))")
    }

    @Test func plainTextWhereTLSWasExpectedIsTLS() async throws {
        let listener = try Listener(reply: Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8))
        defer { listener.stop() }
        let failure = await failure("https://127.0.0.1:\(listener.port)", timeout: 5)
        #expect(failure?.reason == .tls, "\(String(describing: failure))")
        #expect(failure?.message.hasPrefix("TLS: the secure connection to 127.0.0.1:\(listener.port) failed") == true, "\(String(describing: failure))")
    }

    /// A `GET /v1/down` in a task of its own: nil when answered, else its error.
    static func fetching(_ transport: HTTPSyncTransport, waitSeconds: Int) -> Task<SyncError?, Never> {
        Task {
            do throws(SyncError) {
                _ = try await transport.fetch(after: 0, limit: 1, waitSeconds: waitSeconds)
                return nil
            } catch {
                return error
            }
        }
    }

    @Test func aCancelledRequestEndsAtOnceAsCancelled() async throws {
        let listener = try Listener()
        defer { listener.stop() }
        let transport = HTTPSyncTransport(server: try #require(URL(string: "http://127.0.0.1:\(listener.port)")), token: "t", timeoutSeconds: 3600)
        let request = Self.fetching(transport, waitSeconds: 30)
        try await Task.sleep(for: .milliseconds(100))
        request.cancel()
        let outcome = await request.value
        #expect(outcome == .cancelled)  // without cancellation it would wait an hour
    }

    /// Cancelling mid-transfer can never hang (issue 40: cancelling while URLSession completes a
    /// transfer deadlocked swift-corelibs-foundation, and the host process with its ledger locks):
    /// a thousand requests to a server that answers after 0–30 ms, each cancelled after 0–20 ms —
    /// every call comes back (cancelled, or answered when the answer won), then a request that is
    /// not cancelled is answered. The hang guard is the time limit.
    @Test(.timeLimit(.minutes(10))) func aThousandCancellationsMidTransferNeverHang() async throws {
        let listener = try Listener()
        defer { listener.stop() }
        listener.answerSlowly(Array(try JSONEncoder().encode(SyncWire.DownResponse(user: "u", head: 0, changes: []))), maxDelay: 30)
        let transport = HTTPSyncTransport(server: try #require(URL(string: "http://127.0.0.1:\(listener.port)")), token: "t", timeoutSeconds: 60)
        var cancelled = 0, answered = 0
        for _ in 0..<1000 {
            let request = Self.fetching(transport, waitSeconds: 0)
            try await Task.sleep(for: .microseconds(Int.random(in: 0...20_000)))
            request.cancel()
            switch await request.value {
            case nil: answered += 1
            case .cancelled?: cancelled += 1
            case let other?: Issue.record("neither answered nor cancelled: \(other)")
            }
        }
        #expect(cancelled > 0, "\(cancelled) cancelled, \(answered) answered")
        #expect(try await transport.fetch(after: 0, limit: 1, waitSeconds: 0).head == 0)
    }
}
