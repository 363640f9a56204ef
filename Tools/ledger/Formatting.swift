import Foundation
import InboxLedger

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

    /// `850 ms`, `12.4 s`, `3 min`, `2.1 h`.
    static func duration(micros: Int64) -> String {
        let seconds = Double(max(0, micros)) / 1_000_000
        if seconds < 1 { return String(format: "%.0f ms", seconds * 1000) }
        if seconds < 60 { return String(format: "%.1f s", seconds) }
        if seconds < 3600 { return String(format: "%.0f min", seconds / 60) }
        return String(format: "%.1f h", seconds / 3600)
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

    /// One line of canonical JSON (sorted keys).
    static func json(_ value: Any) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    static func jsonObject(_ action: PendingAction) -> [String: Any] {
        [
            "sequence": action.sequence, "actionID": action.actionID, "kind": action.kind,
            "target": action.target as Any? ?? NSNull(), "name": action.name as Any? ?? NSNull(),
            "payload": action.payload.isEmpty ? NSNull() : payloadValue(action.payload),
            "origin": action.origin, "recordedAt": action.recordedAt.iso8601,
        ]
    }

    static func jsonObject(_ event: Event) -> [String: Any] {
        [
            "sequence": event.sequence,
            "type": event.type,
            "origin": ["role": event.origin.role, "pid": Int(event.origin.pid)],
            "timestamp": Timestamp(micros: event.timestampMicros).iso8601,
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

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
