import Foundation
import InboxLedger

/// ANSI colour, only when stdout is a terminal and NO_COLOR is not set (https://no-color.org).
enum Style {
    static let enabled: Bool = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil

    static func paint(_ text: String, _ code: String) -> String { enabled ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
    static func good(_ text: String) -> String { paint(text, "32") }
    static func warn(_ text: String) -> String { paint(text, "33") }
    static func bad(_ text: String) -> String { paint(text, "31;1") }

    /// The width human output keeps to.
    static let width = 80

    /// `line` cut to ``width`` columns, with `…` where it was cut.
    static func fit(_ line: String) -> String { line.count <= width ? line : String(line.prefix(width - 1)) + "…" }

    /// The widget's counts as `ledger widget` and `ledger inspect` print them: everything the
    /// badge adds up (docs/semantics.md, "Badge"), announced messages included when there are any.
    static func widgetCounts(badge: Int, unread: Int, announced: Int, pendingActions: Int) -> String {
        let announcedPart = announced > 0 ? " · \(announced) announced by pushes" : ""
        return "badge \(badge) · \(unread) unread\(announcedPart) · \(pendingActions) pending actions"
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

    /// `850 ms`, `12.4 s`, `3 min`, `2.1 h`.
    static func duration(micros: Int64) -> String {
        let seconds = Double(max(0, micros)) / 1_000_000
        if seconds < 1 { return String(format: "%.0f ms", seconds * 1000) }
        if seconds < 60 { return String(format: "%.1f s", seconds) }
        if seconds < 3600 { return String(format: "%.0f min", seconds / 60) }
        return String(format: "%.1f h", seconds / 3600)
    }

    /// `text` after `label`, wrapped at spaces to 80 columns, continuation lines indented under it.
    static func wrap(_ label: String, _ text: String, styledLabel: String? = nil) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, label.count + line.count + 1 + word.count > 80 {
                lines.append(line)
                line = String(word)
            } else {
                line += line.isEmpty ? String(word) : " " + word
            }
        }
        lines.append(line)
        let indent = String(repeating: " ", count: label.count)
        return lines.enumerated().map { i, l in (i == 0 ? (styledLabel ?? label) : indent) + l }
    }

    /// `label app 120 · widget 40`, largest first, wrapped to 80 columns under the label; an
    /// item wider than a line is broken at its spaces, continued two columns further in.
    static func list(_ label: String, _ counts: [String: UInt64]) -> [String] {
        let items = counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        if items.isEmpty { return [label + "–"] }
        let indent = String(repeating: " ", count: label.count)
        var lines: [String] = []
        var line = label
        for item in items {
            let separator = line.count == label.count ? "" : " · "
            if line.count + separator.count + item.count <= 80 {
                line += separator + item
                continue
            }
            if line.count > label.count {
                lines.append(line)
                line = indent
            }
            if line.count + item.count <= 80 {
                line += item
                continue
            }
            for (i, word) in item.split(separator: " ").enumerated() {
                if i > 0, line.count + 1 + word.count > 80 {
                    lines.append(line)
                    line = indent + "  " + word
                } else {
                    line += (i > 0 ? " " : "") + word
                }
            }
        }
        lines.append(Style.fit(line))
        return lines
    }
}

enum EventFormatting {
    /// One line: `#42  widget[311]  message.read  {"ids":["m1"],"read":true}`, cut to `width`.
    static func line(_ event: Event, width: Int) -> String {
        let payload = String(decoding: event.payload.prefix(200), as: UTF8.self)
        let text = "#\(event.sequence)  \(event.origin)  \(event.type)  \(payload)"
        return text.count <= width ? text : String(text.prefix(width - 1)) + "…"  // `width` may be narrower than Style.width
    }
}

/// Text from the ledger's contents — a row's key, a failure's reason, stored JSON — as human
/// output prints it: always on one line (docs/cli.md, "ledger projection").
enum Untrusted {
    /// `text` with `\` and what would break or end its line escaped as in a JSON string: `\\`,
    /// `\n`, `\r`, `\t`, and `\uXXXX` for the other control characters (U+0000–U+001F,
    /// U+007F–U+009F) and the line and paragraph separators (U+2028, U+2029). Any other text —
    /// letters of any script, emoji, spaces — is printed as it is.
    static func escaped(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out.append(contentsOf: #"\\"#.unicodeScalars)
            case "\n": out.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": out.append(contentsOf: #"\r"#.unicodeScalars)
            case "\t": out.append(contentsOf: #"\t"#.unicodeScalars)
            default:
                if breaksLine(scalar) { out.append(contentsOf: hexEscape(scalar).unicodeScalars) } else { out.append(scalar) }
            }
        }
        return String(out)
    }

    /// Valid JSON `json` on one line, still the same JSON: the whitespace between its tokens
    /// (tab, line feed, carriage return: JSON allows no other control character outside a
    /// string, nor these inside one) as spaces, and inside its strings the characters JSON
    /// leaves unescaped that would break the line (U+007F–U+009F, U+2028, U+2029) as `\uXXXX`.
    static func oneLineJSON(_ json: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            switch scalar {
            case "\n", "\r", "\t": out.append(" ")
            default:
                if breaksLine(scalar) { out.append(contentsOf: hexEscape(scalar).unicodeScalars) } else { out.append(scalar) }
            }
        }
        return String(out)
    }

    /// Whether `scalar` is a control character or a line or paragraph separator (the rule an
    /// origin role is checked by: `Ledger.validateRole`).
    static func breaksLine(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// `\u001B`: four hex digits, enough for every scalar ``breaksLine(_:)`` is true of.
    static func hexEscape(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return #"\u"# + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
