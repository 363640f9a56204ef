// The data every system is given: a realistic inbox, generated deterministically.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// One inbox message as a sync delivers it (the fields a widget row shows).
public struct Message: Codable, Sendable {
    public var id: String
    public var title: String
    public var subheading: String
    public var iconURL: String
    /// Microseconds since 1970.
    public var sentAt: Int64
    public var read: Bool
}

/// One inbox-sync delta carrying one message: the parsed fields (what SQLite and the rewrite
/// bind or store) and the JSON payload (what the ledger is given), built once, outside timing.
public struct SyncDelta: Sendable {
    public var message: Message
    public var payload: [UInt8]
}

/// A deterministic inbox of `distinctMessages` ids: delta `i` (re)delivers message `i % distinct`
/// with a new date, so the message tables stop growing while the log keeps growing.
public enum Inbox {
    public static let distinctMessages = 500

    private static let senders = ["Order updates", "Your bank", "Travel desk", "Team chat", "Calendar", "Delivery"]
    private static let titles = [
        "Your order #%d has shipped and is on its way",
        "Payment of €%d.40 to Green Grocer was approved",
        "Gate change: flight LH %d now leaves from B42",
        "Maya replied in #design-review (%d new messages)",
        "Reminder: quarterly planning at 14:00 in room %d",
        "Your parcel %d will arrive tomorrow between 9 and 12",
    ]
    private static let subheadings = [
        "Track the parcel and see the estimated delivery window for Tuesday",
        "Tap to see the receipt and your available balance",
        "Boarding starts 40 minutes before departure; bring your passport",
        "“Looks great — can we move the badge to the top-right corner?”",
        "Agenda: roadmap, hiring, budget. Dial-in details in the invite",
        "Leave it with a neighbour or choose a pick-up point in the app",
    ]

    public static func delta(_ i: Int) -> SyncDelta {
        let kind = i % senders.count
        let message = Message(
            id: "msg-\(String(i % distinctMessages, radix: 16))-\(kind)",
            title: titles[kind].replacing("%d", with: String(10_000 + i % 90_000)),
            subheading: subheadings[kind],
            iconURL: "https://cdn.example.com/inbox/icons/\(senders[kind].lowercased().replacing(" ", with: "-"))@3x.png",
            sentAt: 1_795_000_000_000_000 + Int64(i) * 1_000_000,
            read: i % 3 == 0
        )
        return SyncDelta(message: message, payload: payload(message))
    }

    public static func deltas(_ range: Range<Int>) -> [SyncDelta] { range.map(delta) }

    /// The JSON the ledger is given. (The generated texts hold no `"` or `\\` to escape.)
    private static func payload(_ m: Message) -> [UInt8] {
        func quoted(_ s: String) -> String { "\"" + s + "\"" }
        let json = #"{"mode":"delta","messages":[{"id":\#(quoted(m.id)),"title":\#(quoted(m.title)),"subheading":\#(quoted(m.subheading)),"iconURL":\#(quoted(m.iconURL)),"sentAt":\#(quoted(isoDate(m.sentAt))),"read":\#(m.read)}]}"#
        return Array(json.utf8)
    }

    private static func isoDate(_ micros: Int64) -> String {
        var seconds = time_t(micros / 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}
