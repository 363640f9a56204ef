import Crypto
import Foundation

/// The claims of a development token, `ledger-server token`'s (docs/sync.md, "Authentication").
/// An identity provider's JWTs are verified by `IdentityVerifier`.
struct Claims: Codable, Equatable, Sendable {
    /// A device token reads and writes its user's data; a publish token lists messages.
    enum Scope: String, Codable, Sendable { case device, publish }

    var sub: String
    var scope: Scope
    var exp: Int64
}

/// Why a development token was refused; every case answers 401.
enum TokenError: Error, Equatable, CustomStringConvertible {
    case malformed(String), badSignature, expired(Int64)

    var description: String {
        switch self {
        case .malformed(let why): "malformed token: \(why)"
        case .badSignature: "the token's signature does not match (forged, or signed with another secret)"
        case .expired(let exp): "the token expired at \(exp) (unix seconds)"
        }
    }
}

/// Signs and verifies development tokens, `v1.<claims>.<HMAC-SHA256>`, with the server's
/// development secret (constant-time comparison by swift-crypto).
struct TokenSigner: Sendable {
    let secret: [UInt8]

    init(secret: String) { self.secret = Array(secret.utf8) }

    var key: SymmetricKey { SymmetricKey(data: secret) }

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
        // Claims that do not decode are a malformed token, whatever the decoder's reason.
        guard let json = Self.unbase64url(parts[1]), let claims = try? JSONDecoder().decode(Claims.self, from: json) else {
            throw .malformed("the claims are not {sub, scope, exp}")
        }
        guard Identity.isValidUser(claims.sub) else { throw .malformed("bad user id") }
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
