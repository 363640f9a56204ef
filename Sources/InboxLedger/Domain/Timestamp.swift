/// A point in time with microsecond precision, parsed from and printed as ISO 8601
/// (`2026-11-22T08:00:00Z`, `2026-11-22T09:00:00.250+01:00`). Foundation-free and exact.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Microseconds since 1970-01-01T00:00:00Z.
    public var micros: Int64

    /// The instant `micros` microseconds after 1970-01-01T00:00:00Z.
    public init(micros: Int64) { self.micros = micros }

    /// Earlier instants sort first.
    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.micros < b.micros }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `nil` if it is not exactly that.
    public init?(iso8601 text: String) {
        var text = text
        guard let parsed = text.withUTF8({ Timestamp(iso8601UTF8: $0) }) else { return nil }
        self = parsed
    }

    /// ``init(iso8601:)`` on UTF-8 bytes where they lie (the payload decoder's path).
    init?(iso8601UTF8 b: UnsafeBufferPointer<UInt8>) {
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in 0..<n {
                let c = b[i + k]
                guard c >= 0x30 && c <= 0x39 else { return nil }
                v = v * 10 + Int(c - 0x30)
            }
            i += n
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(0x2D), let month = digits(2), expect(0x2D), let day = digits(2),
              i < b.count, b[i] == 0x54 || b[i] == 0x74 || b[i] == 0x20
        else { return nil }
        i += 1
        guard let hour = digits(2), expect(0x3A), let minute = digits(2), expect(0x3A), let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), (1...Timestamp.daysIn(month: month, year: year)).contains(day),
              hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var micros = 0
        if i < b.count, b[i] == 0x2E || b[i] == 0x2C {
            i += 1
            var n = 0
            var scale = 100_000
            while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 {
                if n < 6 { micros += Int(b[i] - 0x30) * scale; scale /= 10 }
                n += 1
                i += 1
            }
            guard n > 0 else { return nil }
        }
        var offsetSeconds = 0
        guard i < b.count else { return nil }
        if b[i] == 0x5A || b[i] == 0x7A {
            i += 1
        } else if b[i] == 0x2B || b[i] == 0x2D {
            let sign = b[i] == 0x2D ? -1 : 1
            i += 1
            guard let oh = digits(2) else { return nil }
            _ = expect(0x3A)
            guard let om = digits(2), oh <= 23, om <= 59 else { return nil }
            offsetSeconds = sign * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = Timestamp.daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86400 + hour * 3600 + minute * 60 + min(second, 59) - offsetSeconds
        self.micros = Int64(seconds) * 1_000_000 + Int64(micros)
    }

    /// `2026-11-22T08:00:00Z`, with `.ffffff` when there are microseconds.
    public var iso8601: String {
        var bytes: [UInt8] = []
        writeISO8601(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``iso8601``'s text to `out`, digit by digit (the canonical writer's path).
    func writeISO8601(to out: inout [UInt8]) {
        let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        let fraction = Int(micros - seconds * 1_000_000)
        let days = Int(seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400)
        let secondOfDay = Int(seconds) - days * 86400
        let (y, m, d) = Timestamp.civilFromDays(days)
        func digits(_ v: Int, _ n: Int) {
            var divisor = 1
            for _ in 1..<n { divisor *= 10 }
            var rest = v
            for _ in 0..<n {
                out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        if (0...9999).contains(y) {
            digits(y, 4)
        } else {
            // Years outside 0–9999 (never parsed back; kept as they were always written):
            // the decimal number, zero-padded on the left to four characters.
            let text = String(y)
            out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: max(0, 4 - text.utf8.count)))
            out.append(contentsOf: text.utf8)
        }
        out.append(UInt8(ascii: "-")); digits(m, 2); out.append(UInt8(ascii: "-")); digits(d, 2)
        out.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2); out.append(UInt8(ascii: ":")); digits(secondOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":")); digits(secondOfDay % 60, 2)
        if fraction != 0 {
            var f = fraction, width = 6
            while f % 10 == 0 { f /= 10; width -= 1 }
            out.append(UInt8(ascii: "."))
            digits(f, width)
        }
        out.append(UInt8(ascii: "Z"))
    }

    /// The ISO 8601 form.
    public var description: String { iso8601 }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's days_from_civil / civil_from_days.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}

extension Timestamp {
    /// The current time.
    public static var now: Timestamp { Timestamp(micros: currentMicros()) }
}
