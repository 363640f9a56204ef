import Foundation
import InboxLedger

enum Timestamps {
    /// `2026-11-22T01:53:05.123Z` for microseconds since the epoch.
    static func iso8601(micros: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(micros) / 1_000_000))
    }
}

enum Units {
    /// `12.3 MiB`.
    static func bytes(_ n: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
    }

    /// `app 120 · widget 40`, largest first.
    static func list(_ counts: [String: UInt64]) -> String {
        if counts.isEmpty { return "–" }
        return counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
            .map { "\($0.key) \($0.value)" }.joined(separator: " · ")
    }
}

enum EventFormatting {
    /// The payload as JSON if it is JSON, else `{"base64": …}`.
    static func payloadValue(_ payload: [UInt8]) -> Any {
        if let value = try? JSONSerialization.jsonObject(with: Data(payload), options: [.fragmentsAllowed]) { return value }
        return ["base64": Data(payload).base64EncodedString()]
    }

    static func jsonObject(_ event: Event) -> [String: Any] {
        [
            "sequence": event.sequence,
            "type": event.type,
            "origin": ["role": event.origin.role, "pid": Int(event.origin.pid)],
            "timestamp": Timestamps.iso8601(micros: event.timestampMicros),
            "key": event.key as Any? ?? NSNull(),
            "data": payloadValue(event.payload),
        ]
    }

    /// One line: `#42  widget[311]  message.read  {"ids":["m1"],"read":true}`, cut to `width`.
    static func line(_ event: Event, width: Int) -> String {
        let payload = String(decoding: event.payload.prefix(200), as: UTF8.self)
        let text = "#\(event.sequence)  \(event.origin)  \(event.type)  \(payload)"
        return text.count <= width ? text : String(text.prefix(width - 1)) + "…"
    }
}
