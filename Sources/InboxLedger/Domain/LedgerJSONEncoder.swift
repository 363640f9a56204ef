#if canImport(FoundationEssentials)
import FoundationEssentials
#elseif canImport(Foundation)
import Foundation
#endif

/// Encodes `Encodable` values straight to the ledger's canonical JSON (docs/format.md: object
/// keys sorted by their UTF-8 bytes, no whitespace, integers without a fraction, doubles in
/// their shortest exact form, strings escaped as ``EventJSON/writeString(_:to:)`` does): the
/// replacement for Foundation's `JSONEncoder` followed by ``CanonicalJSON/canonicalize(_:)``.
///
/// For every value, ``encode(_:numbers:)`` with ``Numbers/exact`` gives exactly the bytes of
/// `CanonicalJSON.canonicalize(JSONEncoder().encode(value))` (idempotency keys compare canonical
/// payloads across library versions), and fails where that fails: `JSONEncoder`'s default
/// strategies (`Date` as seconds since 2001, `Data` as base64, `URL` as its absolute string,
/// `Decimal` as a number, a `Float` as its shortest decimal), a key encoded twice in one
/// container kept last, a value that encodes nothing written `{}`, non-finite numbers refused,
/// and numbers the canonical form cannot keep (an integer beyond 64 bits, a `Decimal` a double
/// does not hold to the digit) refused with the parser's reason. Where `JSONEncoder` traps
/// (a container asked for where another kind was encoded), the last one asked for is kept.
///
/// Keys are one key when they are equal as Swift strings (canonically equivalent, `é` and
/// `e\u{301}`), as in `JSONEncoder`'s dictionary of members: the spelling first given is written,
/// with the value last given.
///
/// Values are written as they are encoded into one scratch buffer, each container keeping its
/// members as a list of slots; the output is then assembled once, each object's members
/// sorted by key. Containers can be used in any order (a nested container written after its
/// parent's later keys), as `JSONEncoder`'s can.
enum LedgerJSONEncoder {
    /// What to do with a number the canonical form does not keep exactly.
    enum Numbers {
        /// Refuse it, as ``CanonicalJSON/canonicalize(_:)`` does (payloads).
        case exact
        /// Write it as `JSONEncoder` does (projection rows and documents, which earlier
        /// versions stored with `JSONEncoder` and an app may fill with any `UInt64`).
        case asWritten
    }

    /// The canonical JSON of `value`.
    static func encode<T: Encodable>(_ value: T, numbers: Numbers = .exact) throws -> [UInt8] {
        let encoder = CanonicalEncoder(numbers: numbers)
        try encoder.encode(value, into: 0, root: true)
        guard encoder.slots[0].kind != .empty else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        return encoder.output()
    }
}

/// The state of one ``LedgerJSONEncoder/encode(_:numbers:)``: the scratch buffer and the slots
/// (the root, every member and element), and the slot the encoder is at.
final class CanonicalEncoder: Encoder {
    enum Kind: UInt8 {
        /// Nothing encoded (yet): written `{}`, as `JSONEncoder` writes a value that encodes nothing.
        case empty
        /// A scalar's canonical bytes, `scratch[first..<last]`.
        case bytes
        case object
        case array
    }

    /// A value and where it is: in which container, under which key (its UTF-8 in `scratch`)
    /// or at which index. Containers link their members through `first`, `last` and `next`.
    /// (Offsets in 32 bits: one value's JSON stays under 2 GiB, as the decoder requires.)
    struct Slot {
        var parent: Int32
        var keyStart: Int32 = -1
        var keyEnd: Int32 = -1
        var index: Int32 = 0
        var kind = Kind.empty
        var first: Int32 = -1
        var last: Int32 = -1
        var next: Int32 = -1
        var count: Int32 = 0
    }

    // Unchecked exclusivity (dynamic checks cost a fifth of an encode): one encode runs on one
    // thread, and no access to these overlaps another (`set` writes `scratch` only through its
    // `inout` argument).
    @exclusivity(unchecked) var scratch: [UInt8] = []
    @exclusivity(unchecked) var slots: [Slot] = []
    /// The UTF-8 bytes of every key, for the bound of the output (escapes).
    @exclusivity(unchecked) private var keyBytes = 0
    let exactNumbers: Bool
    /// The slot this encoder (and its single value container) writes.
    @exclusivity(unchecked) private var current: Int32 = 0

    init(numbers: LedgerJSONEncoder.Numbers) {
        exactNumbers = numbers == .exact
        scratch.reserveCapacity(256)
        slots.reserveCapacity(16)
        slots.append(Slot(parent: -1))
    }

    // MARK: Encoder

    var codingPath: [any CodingKey] { path(current) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(CanonicalKeyedContainer<Key>(encoder: self, slot: makeContainer(current, .object)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        CanonicalUnkeyedContainer(encoder: self, slot: makeContainer(current, .array))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { CanonicalSingleValueContainer(encoder: self, slot: current) }

    // MARK: Slots

    /// `slot` as a container of `kind`: the one already there, or a new one in place of what was.
    func makeContainer(_ slot: Int32, _ kind: Kind) -> Int32 {
        if slots[Int(slot)].kind != kind {
            slots[Int(slot)].kind = kind
            slots[Int(slot)].first = -1
            slots[Int(slot)].last = -1
            slots[Int(slot)].count = 0
        }
        return slot
    }

    /// A new member of `container`, under the key `name` (nil: an element).
    func member(of container: Int32, name: String?) -> Int32 {
        let new = Int32(slots.count)
        var slot = Slot(parent: container, index: slots[Int(container)].count)
        if var name {
            slot.keyStart = Int32(scratch.count)
            name.withUTF8 { scratch.append(contentsOf: $0) }
            slot.keyEnd = Int32(scratch.count)
            keyBytes += Int(slot.keyEnd - slot.keyStart)
        }
        slots.append(slot)
        let last = slots[Int(container)].last
        if last < 0 { slots[Int(container)].first = new } else { slots[Int(last)].next = new }
        slots[Int(container)].last = new
        slots[Int(container)].count += 1
        return new
    }

    /// The last member of object `container` under `key` when it is a container of `kind` (a
    /// nested container asked for again continues the one there, as in `JSONEncoder`).
    func existing(in container: Int32, name: String, _ kind: Kind) -> Int32? {
        var name = name
        return name.withUTF8 { name -> Int32? in
            var found: Int32?
            var member = slots[Int(container)].first
            while member >= 0 {
                let slot = slots[Int(member)]
                // Equal as strings, as JSONEncoder's dictionary of members compares keys.
                if String(decoding: scratch[Int(slot.keyStart)..<Int(slot.keyEnd)], as: UTF8.self) == String(decoding: name, as: UTF8.self) {
                    found = slot.kind == kind ? member : nil
                }
                member = slot.next
            }
            return found
        }
    }

    /// The coding path of `slot`: keys by their text, elements by their index.
    func path(_ slot: Int32) -> [any CodingKey] {
        var keys: [any CodingKey] = []
        var slot = slot
        while slot > 0 {
            let s = slots[Int(slot)]
            if s.keyStart >= 0 {
                keys.append(NamedKey(String(decoding: scratch[Int(s.keyStart)..<Int(s.keyEnd)], as: UTF8.self)))
            } else {
                keys.append(IndexKey(Int(s.index)))
            }
            slot = s.parent
        }
        return keys.reversed()
    }

    /// Writes a scalar into `slot` with `write`, which appends its canonical bytes to `scratch`.
    @inline(__always)
    func set(_ slot: Int32, _ write: (inout [UInt8]) throws -> Void) rethrows {
        let start = Int32(scratch.count)
        try write(&scratch)
        slots[Int(slot)].kind = .bytes
        slots[Int(slot)].first = start
        slots[Int(slot)].last = Int32(scratch.count)
    }

    // MARK: Values

    func encodeNil(into slot: Int32) { set(slot) { $0.append(contentsOf: "null".utf8) } }
    func encode(_ value: Bool, into slot: Int32) { set(slot) { $0.append(contentsOf: (value ? "true" : "false").utf8) } }
    func encode(_ value: String, into slot: Int32) { set(slot) { EventJSON.writeString(value, to: &$0) } }
    func encode(_ value: Int64, into slot: Int32) { set(slot) { Self.appendInteger(value, to: &$0) } }

    /// An unsigned integer: beyond `Int64.max`, refused or written as it is (``LedgerJSONEncoder/Numbers``).
    func encode<T: UnsignedInteger & FixedWidthInteger>(unsigned value: T, into slot: Int32) throws {
        if let small = Int64(exactly: value) { return encode(small, into: slot) }
        try encode(number: String(value), value, into: slot)
    }

    /// A signed integer wider than 64 bits.
    func encode<T: SignedInteger & FixedWidthInteger>(wide value: T, into slot: Int32) throws {
        if let small = Int64(exactly: value) { return encode(small, into: slot) }
        try encode(number: String(value), value, into: slot)
    }

    /// A double as `JSONEncoder` writes it (its description without a trailing `.0`), then
    /// canonicalised: integral values below 2^53 as integers, others in their shortest form.
    func encode(_ value: Double, into slot: Int32) throws {
        guard value.isFinite else { throw nonFinite(value, slot) }
        if value.rounded() == value, value.magnitude < 9_007_199_254_740_992 { return encode(Int64(value), into: slot) }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }  // ±2^53, which JSONEncoder writes as an integer
        set(slot) { $0.append(contentsOf: text.utf8) }
    }

    /// A float as `JSONEncoder` writes it — its own shortest decimal (`0.1`), not the double it
    /// converts to (`0.10000000149011612`) — then canonicalised.
    func encode(_ value: Float, into slot: Int32) throws {
        guard value.isFinite else { throw nonFinite(value, slot) }
        if value.rounded() == value, value.magnitude < 16_777_216 { return encode(Int64(value), into: slot) }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        try encode(number: text, value, into: slot)
    }

    /// The number `JSONEncoder` writes as `text`, as ``CanonicalJSON/canonicalize(_:)`` reads it:
    /// refused (``LedgerJSONEncoder/Numbers/exact``) or written as it is when it cannot keep it.
    func encode(number text: String, _ value: Any, into slot: Int32) throws {
        switch Self.canonicalNumber(text) {
        case .success(let number):
            set(slot) { EventJSON.write(number, to: &$0) }
        case .failure(let failure):
            guard !exactNumbers, failure.reason != nil else {
                throw EncodingError.invalidValue(value, .init(codingPath: path(slot), debugDescription: failure.reason ?? "\(text) is not a JSON number"))
            }
            set(slot) { $0.append(contentsOf: text.utf8) }
        }
    }

    private func nonFinite<T: BinaryFloatingPoint>(_ value: T, _ slot: Int32) -> EncodingError {
        .invalidValue(value, .init(codingPath: path(slot), debugDescription: "Unable to encode \(T.self).\(value) directly in JSON."))
    }

    /// Any value into `slot`: the types `JSONEncoder` treats apart as it does, any other by its
    /// `encode(to:)` with this encoder at `slot`. The root stays empty when the value encodes
    /// nothing (an error); a value given to a container is then `{}`, as in `JSONEncoder`.
    func encode<T: Encodable>(_ value: T, into slot: Int32, root: Bool = false) throws {
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self, try special(value, into: slot) { return }
        let saved = current
        current = slot
        defer { current = saved }
        try value.encode(to: self)
        if !root, slots[Int(slot)].kind == .empty { _ = makeContainer(slot, .object) }
    }

    /// A `Date` (seconds since 2001, as its own `encode(to:)` writes them), `Data` (base64),
    /// `URL` (its absolute string) or `Decimal` (a number); false for any other value.
    private func special<T: Encodable>(_ value: T, into slot: Int32) throws -> Bool {
        if let date = value as? Date {
            try encode(date.timeIntervalSinceReferenceDate, into: slot)
        } else if let data = value as? Data {
            encode(data.base64EncodedString(), into: slot)
        } else if let url = value as? URL {
            encode(url.absoluteString, into: slot)
        } else if let decimal = value as? Decimal {
            try encode(number: decimal.description, decimal, into: slot)
        } else {
            return false
        }
        return true
    }

    /// `text` read as the strict parser reads a number.
    static func canonicalNumber(_ text: String) -> Result<JSONValue, JSONParser.Failure> {
        var text = text
        return text.withUTF8 { bytes in
            var cursor = JSONParser.Cursor(bytes: bytes)
            do throws(JSONParser.Failure) {
                guard bytes.first.map({ $0 == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) == true else { throw JSONParser.Failure() }
                let number = try cursor.number()
                guard cursor.index == bytes.count else { throw JSONParser.Failure() }
                return .success(number)
            } catch {
                return .failure(error)
            }
        }
    }

    /// `value` in decimal.
    static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        // The digits from the last, in a buffer on the stack, then appended at once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = value.magnitude
            var i = digits.count
            repeat {
                i -= 1
                digits[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 { out.append(UInt8(ascii: "-")) }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[i...]))
        }
    }

    // MARK: Output

    /// The canonical bytes of the root, written into an array of the largest size they can
    /// take: every scalar's bytes, every key escaped at worst (6 bytes a byte), 4 bytes of
    /// quotes, colon and comma a member, 2 brackets a container.
    func output() -> [UInt8] {
        let bound = scratch.count + 5 * keyBytes + 6 * slots.count + 2
        var out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            scratch.withUnsafeBufferPointer { scratch in
                slots.withUnsafeBufferPointer { slots in
                    var writer = Writer(out: buffer, slots: slots, scratch: scratch)
                    writer.write(0)
                    count = writer.count
                }
            }
        }
        // A large value keeps no spare capacity.
        if out.count > 4096, out.capacity > out.count + out.count / 2 { out = Array(out[...]) }
        return out
    }

    /// Writes the canonical bytes of slots into a buffer large enough for them.
    private struct Writer {
        let out: UnsafeMutableBufferPointer<UInt8>
        let slots: UnsafeBufferPointer<Slot>
        let scratch: UnsafeBufferPointer<UInt8>
        var count = 0

        init(out: UnsafeMutableBufferPointer<UInt8>, slots: UnsafeBufferPointer<Slot>, scratch: UnsafeBufferPointer<UInt8>) {
            self.out = out
            self.slots = slots
            self.scratch = scratch
        }

        mutating func byte(_ b: UInt8) {
            out[count] = b
            count += 1
        }

        mutating func bytes(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let base = out.baseAddress, let source = bytes.baseAddress, !bytes.isEmpty else { return }
            (base + count).update(from: source, count: bytes.count)
            count += bytes.count
        }

        func key(_ slot: Int32) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: scratch[Int(slots[Int(slot)].keyStart)..<Int(slots[Int(slot)].keyEnd)])
        }

        /// A key as a JSON string, escaped as ``EventJSON/writeString(_:to:)`` does.
        mutating func string(_ text: UnsafeBufferPointer<UInt8>) {
            byte(UInt8(ascii: "\""))
            if !text.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                bytes(text)
            } else {
                var escaped: [UInt8] = []
                EventJSON.writeString(utf8: text, to: &escaped)
                escaped.withUnsafeBufferPointer { bytes(UnsafeBufferPointer(rebasing: $0[1..<($0.count - 1)])) }
            }
            byte(UInt8(ascii: "\""))
        }

        mutating func write(_ slot: Int32) {
            let s = slots[Int(slot)]
            switch s.kind {
            case .empty:
                byte(UInt8(ascii: "{"))
                byte(UInt8(ascii: "}"))
            case .bytes:
                bytes(UnsafeBufferPointer(rebasing: scratch[Int(s.first)..<Int(s.last)]))
            case .array:
                byte(UInt8(ascii: "["))
                var member = s.first
                while member >= 0 {
                    if member != s.first { byte(UInt8(ascii: ",")) }
                    write(member)
                    member = slots[Int(member)].next
                }
                byte(UInt8(ascii: "]"))
            case .object:
                byte(UInt8(ascii: "{"))
                withUnsafeTemporaryAllocation(of: Int32.self, capacity: Int(s.count)) { order in
                    members(of: s, in: order)
                }
                byte(UInt8(ascii: "}"))
            }
        }

        func precedes(_ a: Int32, _ b: Int32) -> Bool {
            let x = key(a), y = key(b)
            for i in 0..<min(x.count, y.count) where x[i] != y[i] { return x[i] < y[i] }
            return x.count != y.count ? x.count < y.count : a < b
        }

        /// An object's members in key order (sorted in `order`, room for every member); of a
        /// key given twice, the last (the higher slot).
        mutating func members(of object: Slot, in order: UnsafeMutableBufferPointer<Int32>) {
            var count = 0
            var member = object.first
            while member >= 0, count < order.count {
                order[count] = member
                count += 1
                member = slots[Int(member)].next
            }
            if count <= 16 {
                // Insertion sort: most objects are small, and often nearly in order.
                for i in 1..<max(count, 1) {
                    let item = order[i]
                    var j = i
                    while j > 0, precedes(item, order[j - 1]) {
                        order[j] = order[j - 1]
                        j -= 1
                    }
                    order[j] = item
                }
            } else {
                var head = UnsafeMutableBufferPointer(rebasing: order[..<count])
                let this = self
                head.sort { this.precedes($0, $1) }
            }
            if (0..<count).contains(where: { key(order[$0]).contains(where: { $0 >= 0x80 }) }) {
                return equivalentMembers(UnsafeMutableBufferPointer(rebasing: order[..<count]))
            }
            var first = true
            for i in 0..<count {
                let member = order[i]
                if i + 1 < count, key(member).elementsEqual(key(order[i + 1])) { continue }
                if !first { byte(UInt8(ascii: ",")) }
                first = false
                string(key(member))
                byte(UInt8(ascii: ":"))
                write(member)
            }
        }

        /// The members of an object with keys beyond ASCII, `order` holding them: keys equal as
        /// Swift strings (canonically equivalent, `é` and `e\u{301}`) are one member, as in
        /// `JSONEncoder`'s dictionary of members — the spelling first given, the value last given.
        mutating func equivalentMembers(_ order: UnsafeMutableBufferPointer<Int32>) {
            var groups: [String: (first: Int32, last: Int32)] = [:]
            for member in order {
                let name = String(decoding: key(member), as: UTF8.self)
                let group = groups[name] ?? (member, member)
                groups[name] = (min(group.first, member), max(group.last, member))
            }
            let this = self
            let members = groups.values.sorted { this.precedes($0.first, $1.first) }
            for (i, member) in members.enumerated() {
                if i > 0 { byte(UInt8(ascii: ",")) }
                string(key(member.first))
                byte(UInt8(ascii: ":"))
                write(member.last)
            }
        }
    }
}

// MARK: - Containers

/// An object's container: each key a new member (the output keeps the last of a key).
struct CanonicalKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: CanonicalEncoder
    let slot: Int32

    var codingPath: [any CodingKey] { encoder.path(slot) }

    private func member(_ key: Key) -> Int32 { encoder.member(of: slot, name: key.stringValue) }

    mutating func encodeNil(forKey key: Key) throws { encoder.encodeNil(into: member(key)) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { encoder.encode(value, into: member(key)) }
    mutating func encode(_ value: String, forKey key: Key) throws { encoder.encode(value, into: member(key)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try encoder.encode(value, into: member(key)) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try encoder.encode(value, into: member(key)) }
    mutating func encode(_ value: Int, forKey key: Key) throws { encoder.encode(Int64(value), into: member(key)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { encoder.encode(Int64(value), into: member(key)) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { encoder.encode(Int64(value), into: member(key)) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { encoder.encode(Int64(value), into: member(key)) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { encoder.encode(value, into: member(key)) }
    mutating func encode(_ value: Int128, forKey key: Key) throws { try encoder.encode(wide: value, into: member(key)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try encoder.encode(unsigned: value, into: member(key)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { encoder.encode(Int64(value), into: member(key)) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { encoder.encode(Int64(value), into: member(key)) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { encoder.encode(Int64(value), into: member(key)) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try encoder.encode(unsigned: value, into: member(key)) }
    mutating func encode(_ value: UInt128, forKey key: Key) throws { try encoder.encode(unsigned: value, into: member(key)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try encoder.encode(value, into: member(key)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = encoder.existing(in: slot, name: key.stringValue, .object) ?? encoder.makeContainer(member(key), .object)
        return KeyedEncodingContainer(CanonicalKeyedContainer<NestedKey>(encoder: encoder, slot: nested))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        CanonicalUnkeyedContainer(encoder: encoder, slot: encoder.existing(in: slot, name: key.stringValue, .array) ?? encoder.makeContainer(member(key), .array))
    }

    mutating func superEncoder() -> any Encoder { SlotEncoder(encoder: encoder, slot: encoder.member(of: slot, name: "super")) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { SlotEncoder(encoder: encoder, slot: member(key)) }
}

/// An array's container: each value a new element.
struct CanonicalUnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: CanonicalEncoder
    let slot: Int32

    var codingPath: [any CodingKey] { encoder.path(slot) }
    var count: Int { Int(encoder.slots[Int(slot)].count) }

    private func element() -> Int32 { encoder.member(of: slot, name: nil) }

    mutating func encodeNil() throws { encoder.encodeNil(into: element()) }
    mutating func encode(_ value: Bool) throws { encoder.encode(value, into: element()) }
    mutating func encode(_ value: String) throws { encoder.encode(value, into: element()) }
    mutating func encode(_ value: Double) throws { try encoder.encode(value, into: element()) }
    mutating func encode(_ value: Float) throws { try encoder.encode(value, into: element()) }
    mutating func encode(_ value: Int) throws { encoder.encode(Int64(value), into: element()) }
    mutating func encode(_ value: Int8) throws { encoder.encode(Int64(value), into: element()) }
    mutating func encode(_ value: Int16) throws { encoder.encode(Int64(value), into: element()) }
    mutating func encode(_ value: Int32) throws { encoder.encode(Int64(value), into: element()) }
    mutating func encode(_ value: Int64) throws { encoder.encode(value, into: element()) }
    mutating func encode(_ value: Int128) throws { try encoder.encode(wide: value, into: element()) }
    mutating func encode(_ value: UInt) throws { try encoder.encode(unsigned: value, into: element()) }
    mutating func encode(_ value: UInt8) throws { encoder.encode(Int64(value), into: element()) }
    mutating func encode(_ value: UInt16) throws { encoder.encode(Int64(value), into: element()) }
    mutating func encode(_ value: UInt32) throws { encoder.encode(Int64(value), into: element()) }
    mutating func encode(_ value: UInt64) throws { try encoder.encode(unsigned: value, into: element()) }
    mutating func encode(_ value: UInt128) throws { try encoder.encode(unsigned: value, into: element()) }
    mutating func encode<T: Encodable>(_ value: T) throws { try encoder.encode(value, into: element()) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(CanonicalKeyedContainer<NestedKey>(encoder: encoder, slot: encoder.makeContainer(element(), .object)))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        CanonicalUnkeyedContainer(encoder: encoder, slot: encoder.makeContainer(element(), .array))
    }

    mutating func superEncoder() -> any Encoder { SlotEncoder(encoder: encoder, slot: element()) }
}

/// One value's container: each encode replaces what the slot held.
struct CanonicalSingleValueContainer: SingleValueEncodingContainer {
    let encoder: CanonicalEncoder
    let slot: Int32

    var codingPath: [any CodingKey] { encoder.path(slot) }

    mutating func encodeNil() throws { encoder.encodeNil(into: slot) }
    mutating func encode(_ value: Bool) throws { encoder.encode(value, into: slot) }
    mutating func encode(_ value: String) throws { encoder.encode(value, into: slot) }
    mutating func encode(_ value: Double) throws { try encoder.encode(value, into: slot) }
    mutating func encode(_ value: Float) throws { try encoder.encode(value, into: slot) }
    mutating func encode(_ value: Int) throws { encoder.encode(Int64(value), into: slot) }
    mutating func encode(_ value: Int8) throws { encoder.encode(Int64(value), into: slot) }
    mutating func encode(_ value: Int16) throws { encoder.encode(Int64(value), into: slot) }
    mutating func encode(_ value: Int32) throws { encoder.encode(Int64(value), into: slot) }
    mutating func encode(_ value: Int64) throws { encoder.encode(value, into: slot) }
    mutating func encode(_ value: Int128) throws { try encoder.encode(wide: value, into: slot) }
    mutating func encode(_ value: UInt) throws { try encoder.encode(unsigned: value, into: slot) }
    mutating func encode(_ value: UInt8) throws { encoder.encode(Int64(value), into: slot) }
    mutating func encode(_ value: UInt16) throws { encoder.encode(Int64(value), into: slot) }
    mutating func encode(_ value: UInt32) throws { encoder.encode(Int64(value), into: slot) }
    mutating func encode(_ value: UInt64) throws { try encoder.encode(unsigned: value, into: slot) }
    mutating func encode(_ value: UInt128) throws { try encoder.encode(unsigned: value, into: slot) }
    mutating func encode<T: Encodable>(_ value: T) throws { try encoder.encode(value, into: slot) }
}

/// The encoder of one slot (a `superEncoder`), for as long as it is kept.
final class SlotEncoder: Encoder {
    let encoder: CanonicalEncoder
    let slot: Int32

    init(encoder: CanonicalEncoder, slot: Int32) {
        self.encoder = encoder
        self.slot = slot
    }

    var codingPath: [any CodingKey] { encoder.path(slot) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(CanonicalKeyedContainer<Key>(encoder: encoder, slot: encoder.makeContainer(slot, .object)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        CanonicalUnkeyedContainer(encoder: encoder, slot: encoder.makeContainer(slot, .array))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { CanonicalSingleValueContainer(encoder: encoder, slot: slot) }
}
