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

    @Test func aCancelledRequestEndsAtOnceAsCancelled() async throws {
        let listener = try Listener()
        defer { listener.stop() }
        let transport = HTTPSyncTransport(server: try #require(URL(string: "http://127.0.0.1:\(listener.port)")), token: "t", timeoutSeconds: 3600)
        let request = Task { () -> SyncError? in
            do throws(SyncError) {
                _ = try await transport.fetch(after: 0, limit: 1, waitSeconds: 30)
                return nil
            } catch {
                return error
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        request.cancel()
        let outcome = await request.value
        #expect(outcome == .cancelled)  // without cancellation it would wait an hour
    }
}
