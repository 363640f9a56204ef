/// Deep links into the app: `<scheme>://message/<id>`, with the id percent-encoded.
///
/// ```swift
/// let url = DeepLink.message(id: "inbox/42 ✓", scheme: "myapp")  // myapp://message/inbox%2F42%20%E2%9C%93
/// DeepLink.messageID(from: url, scheme: "myapp")                 // "inbox/42 ✓"
/// ```
public enum DeepLink {
    /// The link that opens message `id`.
    public static func message(id: String, scheme: String) -> String {
        "\(scheme)://message/" + percentEncode(id)
    }

    /// The message id of a link built by ``message(id:scheme:)``, or nil if `link` is not one.
    public static func messageID(from link: String, scheme: String) -> String? {
        let prefix = "\(scheme)://message/"
        guard link.lowercased().hasPrefix(prefix.lowercased()) else { return nil }
        let encoded = link.dropFirst(prefix.count)
        guard !encoded.isEmpty, !encoded.contains("/"), !encoded.contains("?"), !encoded.contains("#") else { return nil }
        guard let id = percentDecode(encoded), !id.isEmpty else { return nil }
        return id
    }

    /// Unreserved characters (RFC 3986) stay; every other byte of the UTF-8 becomes `%XX`.
    static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]], as: UTF8.self)
            }
        }
        return out
    }

    static func percentDecode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while let c = iterator.next() {
            if c == UInt8(ascii: "%") {
                guard let h = iterator.next().flatMap(hexValue), let l = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(h << 4 | l)
            } else {
                bytes.append(c)
            }
        }
        return String(utf8: bytes)
    }
}
