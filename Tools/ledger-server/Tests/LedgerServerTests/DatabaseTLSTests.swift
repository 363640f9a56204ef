import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs a shell command to its end; returns its output, throws on a non-zero exit.
func shell(_ command: String) async throws -> String {
    let child = try Child("/bin/bash", ["-c", command])
    guard try await child.finished() == 0 else { throw HarnessError(description: "\(command): \(child.text)") }
    return child.text.trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite(.serialized, .enabled(if: Harness.postgresAvailable && FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"),
                             "needs Debian's postgresql and openssl (scripts/setup.sh installs them) and root"))
struct DatabaseTLSTests {
    /// A cluster with TLS on (a self-signed certificate for 127.0.0.1): the server connects over
    /// TLS for `require`, `verify-ca` and `verify-full` with the certificate as `sslrootcert`, and
    /// for the default (`prefer`); in plain text for `disable`; a bad `sslmode` is refused at start.
    @Test func sslModes() async throws {
        let certificates = FileManager.default.temporaryDirectory.path + "/ledger-server-tls-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: certificates, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: certificates) }  // best effort: a temporary directory
        let key = certificates + "/server.key", certificate = certificates + "/server.crt"
        _ = try await shell("""
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
              -addext 'subjectAltName=IP:127.0.0.1,DNS:localhost' -keyout \(key) -out \(certificate) 2>&1 && chmod 600 \(key) && \
              chmod 644 \(certificate) && if [ "$(id -u)" = 0 ]; then chown nobody \(key); fi
            """)
        let h = try await Harness(postgresOptions: ["ssl=on", "ssl_cert_file=\(certificate)", "ssl_key_file=\(key)"])
        do {
            let psql = (try await shell("ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1")) + "/psql"
            // The server's connections (not psql's own, which is plain) and whether they use TLS.
            func connections() async throws -> String {
                try await shell("""
                    \(psql) 'postgres://ledger@127.0.0.1:\(h.databasePort)/ledger?sslmode=disable' -Atc \
                    "SELECT string_agg(DISTINCT s.ssl::text, ',') FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                     WHERE a.datname = 'ledger' AND a.pid <> pg_backend_pid()"
                    """)
            }
            let token = try await h.token("erin")
            for (query, tls) in [("?sslmode=require", "true"), ("?sslmode=verify-full&sslrootcert=\(certificate)", "true"),
                                 ("?sslmode=verify-ca&sslrootcert=\(certificate)", "true"), ("", "true"), ("?sslmode=disable", "false")] {
                let (child, url) = try await h.startServer(["--port", "0", "--database-url", h.databaseURL + query, "--secret", Harness.secret])
                #expect(try await serverState(url, token: token).user == "erin", "\(query)")
                let seen = try await connections()
                #expect(seen == tls, "\(query): connections with TLS: \(seen)")
                child.kill()
                try await waitForAsync("the connections of the killed server to close") { try await connections().isEmpty }
            }
            let bad = try await h.startServerExpectingFailure(["--port", "0", "--database-url", h.databaseURL + "?sslmode=bogus", "--secret", Harness.secret])
            #expect(bad.contains("sslmode 'bogus'"), "\(bad)")
        } catch {
            await h.stop()
            throw error
        }
        await h.stop()
    }
}

extension Harness {
    /// Runs `ledger-server serve ARGUMENTS`, which must exit without listening; returns its output.
    func startServerExpectingFailure(_ arguments: [String], environment: [String: String] = [:]) async throws -> String {
        let child = try Child(productsDirectory + "/ledger-server", ["serve"] + arguments, environment: environment)
        servers.withLock { $0.append(child) }
        let status = try await child.finished()
        guard status != 0, !child.text.contains("listening on") else { throw HarnessError(description: "it started: \(child.text)") }
        return child.text
    }
}
