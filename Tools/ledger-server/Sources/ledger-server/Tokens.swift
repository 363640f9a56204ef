import Crypto
import Foundation

/// The claims of a bearer token (docs/sync.md, "Authentication").
struct Claims: Codable, Equatable, Sendable {
    /// A device token reads and writes its user's data; a publish token lists messages.
    enum Scope: String, Codable, Sendable { case device, publish }

    var sub: String
    var scope: Scope
    var exp: Int64
}

/// Why a token was refused; every case answers 401.
enum TokenError: Error, Equatable, CustomStringConvertible {
    case missing, malformed(String), badSignature, expired(Int64)

    var description: String {
        switch self {
        case .missing: "no bearer token (Authorization: Bearer <token>)"
        case .malformed(let why): "malformed token: \(why)"
        case .badSignature: "the token's signature does not match (forged, or signed with another secret)"
        case .expired(let exp): "the token expired at \(exp) (unix seconds)"
        }
    }
}

/// Signs and verifies `v1.<claims>.<HMAC-SHA256>` tokens with the server's secret.
struct TokenSigner: Sendable {
    let secret: [UInt8]

    init(secret: String) { self.secret = Array(secret.utf8) }

    var key: SymmetricKey { SymmetricKey(data: secret) }

    static func isValidUser(_ user: String) -> Bool {
        (1...64).contains(user.utf8.count) && user.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b == 0x2e || b == 0x5f || b == 0x2d
        }
    }

    func sign(_ claims: Claims) throws -> String {
        let body = "v1." + Self.base64url(try JSONEncoder().encode(claims))
        let mac = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key)
        return body + "." + Self.base64url(Data(mac))
    }

    func verify(_ token: String, now: Int64) throws(TokenError) -> Claims {
        guard token.utf8.count <= 1024 else { throw .malformed("longer than 1024 bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1" else { throw .malformed("expected v1.<claims>.<signature>") }
        guard let signature = Self.unbase64url(parts[2]) else { throw .malformed("the signature is not base64url") }
        let body = Data("v1.\(parts[1])".utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: body, using: key) else { throw .badSignature }
        guard let json = Self.unbase64url(parts[1]), let claims = try? JSONDecoder().decode(Claims.self, from: json) else {
            throw .malformed("the claims are not {sub, scope, exp}")
        }
        guard Self.isValidUser(claims.sub) else { throw .malformed("bad user id") }
        guard claims.exp > now else { throw .expired(claims.exp) }
        return claims
    }

    static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func unbase64url(_ text: Substring) -> Data? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.utf8.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s)
    }
}
