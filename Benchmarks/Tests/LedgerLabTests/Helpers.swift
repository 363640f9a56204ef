import Foundation
import Testing

/// One line of a tool's `--json` output as an object (as the root's CLI tests read them).
func jsonObject(_ text: String) throws -> [String: Any] {
    let value = try JSONSerialization.jsonObject(with: Data(text.utf8))
    return try #require(value as? [String: Any])
}
