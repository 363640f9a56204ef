/// A JSON document parsed once into a flat list of nodes ("tape"), for ``LedgerJSONDecoder``:
/// each value is a node, a container's members follow it (an object's as key, value, key,
/// value…), and every node knows where the node after its whole value starts, so a decoder
/// skips a member without reading it. Strings and numbers are not converted here: a node keeps
/// where its bytes lie, and the decoder converts them to the type a `Decodable` asks for — an
/// integer straight from its digits, a string without escapes straight from its UTF-8.
///
/// The syntax is the strict tokenizer's (``JSONParser/Cursor``: RFC 8259, no trailing commas,
/// escapes and UTF-8 checked in escaped strings), but not its rules about values: numbers are
/// kept as written (whatever the type asking for them can hold is decided then, as
/// `JSONDecoder` does), an object may repeat a key (the first one is read, as `JSONDecoder`
/// does), and nesting may go 512 deep (`JSONDecoder`'s limit), so whatever a `JSONEncoder`
/// wrote (rows stored by earlier versions) reads.
struct JSONTape {
    enum Kind: UInt8 {
        case null, `false`, `true`, number, string, array, object

        /// How `JSONDecoder` names it in a type mismatch ("found a string instead").
        var found: String {
            switch self {
            case .null: "null"
            case .false, .true: "bool"
            case .number: "number"
            case .string: "a string"
            case .array: "an array"
            case .object: "a dictionary"
            }
        }
    }

    struct Node {
        var kind: Kind
        /// A string: it had escapes, and its text is `strings[length]`. A number: it is written
        /// as an integer (no fraction, no exponent).
        var flag = false
        /// Where its bytes start: a string's after its opening quote, a number's first byte.
        var start: Int32
        /// A plain string's or a number's byte count; an escaped string's index in `strings`;
        /// a container's member count.
        var length: Int32 = 0
        /// The node after this value (and everything in it).
        var next: Int32
    }

    static let maxDepth = 512

    // A view of memory the decoder that parsed it owns (`JSONTapeDecoder` frees it): reading a
    // node or a byte then costs no reference counting.
    /// A copy of the document.
    let bytes: UnsafeBufferPointer<UInt8>
    let nodes: UnsafeBufferPointer<Node>
    /// The text of the strings that had escapes, decoded as they were parsed.
    let strings: UnsafeBufferPointer<String>
    /// A node that is `null`, after the document's own: what a `superDecoder` for a missing
    /// key reads (as `JSONDecoder` does).
    var nullNode: Int { nodes.count - 1 }

    /// Parses `input`, which must hold exactly one JSON value (whitespace aside), into memory
    /// of its own that ``deallocate()`` frees.
    static func parse(_ input: ArraySlice<UInt8>) throws(JSONParser.Failure) -> JSONTape {
        guard input.count < Int(Int32.max) else { throw JSONParser.Failure("the document is larger than 2 GiB") }
        let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: input.count)
        _ = copy.initialize(from: input)
        let bytes = UnsafeBufferPointer(copy)
        var nodes = NodeBuffer(capacity: input.count / 4 + 4)
        var strings: [String] = []
        var cursor = JSONParser.Cursor(bytes: bytes)
        do throws(JSONParser.Failure) {
            try build(&cursor, into: &nodes, strings: &strings)
        } catch {
            copy.deallocate()
            nodes.deallocate()
            throw error.at(min(cursor.index, bytes.count))
        }
        nodes.append(Node(kind: .null, start: 0, next: Int32(nodes.count + 1)))
        var stored = UnsafeBufferPointer<String>(start: nil, count: 0)
        if !strings.isEmpty {
            let buffer = UnsafeMutableBufferPointer<String>.allocate(capacity: strings.count)
            _ = buffer.initialize(from: strings)
            stored = UnsafeBufferPointer(buffer)
        }
        return JSONTape(bytes: bytes, nodes: UnsafeBufferPointer(start: nodes.base, count: nodes.count), strings: stored)
    }

    /// Frees the tape's memory (its owner's deinit).
    func deallocate() {
        bytes.deallocate()
        nodes.deallocate()
        if !strings.isEmpty {
            let mutable = UnsafeMutableBufferPointer(mutating: strings)
            mutable.deinitialize()
            mutable.deallocate()
        }
    }

    /// The nodes as they are parsed: appended, grown by doubling.
    struct NodeBuffer {
        private(set) var base: UnsafeMutablePointer<Node>
        private(set) var count = 0
        private var capacity: Int

        init(capacity: Int) {
            self.capacity = capacity
            base = .allocate(capacity: capacity)
        }

        mutating func append(_ node: Node) {
            if count == capacity {
                let grown = UnsafeMutablePointer<Node>.allocate(capacity: capacity * 2)
                grown.moveInitialize(from: base, count: count)
                base.deallocate()
                base = grown
                capacity *= 2
            }
            (base + count).initialize(to: node)
            count += 1
        }

        subscript(index: Int) -> Node {
            get {
                precondition(index >= 0 && index < count)
                return base[index]
            }
            nonmutating set {
                precondition(index >= 0 && index < count)
                base[index] = newValue
            }
        }

        func deallocate() { base.deallocate() }
    }

    /// The parse, without recursion: a container still open has in `next` its parent's index (-1
    /// for none) until it closes, when it gets its real value.
    private static func build(_ cursor: inout JSONParser.Cursor, into nodes: inout NodeBuffer, strings: inout [String]) throws(JSONParser.Failure) {
        let bytes = cursor.bytes
        var innermost = -1
        var depth = 0

        func appendString(_ cursor: inout JSONParser.Cursor, _ nodes: inout NodeBuffer, _ strings: inout [String]) throws(JSONParser.Failure) {
            let start = Int32(cursor.index + 1)
            let me = Int32(nodes.count)
            if let plain = cursor.plainString() {
                nodes.append(Node(kind: .string, start: start, length: Int32(plain.count), next: me + 1))
            } else {
                strings.append(try cursor.string())
                nodes.append(Node(kind: .string, flag: true, start: start, length: Int32(strings.count - 1), next: me + 1))
            }
        }

        /// At an object member: its key, the colon, the whitespace before the value.
        func key(_ cursor: inout JSONParser.Cursor, _ nodes: inout NodeBuffer, _ strings: inout [String]) throws(JSONParser.Failure) {
            guard cursor.index < bytes.count, bytes[cursor.index] == UInt8(ascii: "\"") else { throw JSONParser.Failure() }
            try appendString(&cursor, &nodes, &strings)
            cursor.skipWhitespace()
            guard cursor.index < bytes.count, bytes[cursor.index] == UInt8(ascii: ":") else { throw JSONParser.Failure() }
            cursor.index += 1
            cursor.skipWhitespace()
        }

        cursor.skipWhitespace()
        document: while true {
            // A value starts here.
            guard cursor.index < bytes.count else { throw JSONParser.Failure() }
            let me = nodes.count
            let first = bytes[cursor.index]
            switch first {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                guard depth <= maxDepth else { throw JSONParser.Failure("nesting deeper than \(maxDepth)") }
                let isObject = first == UInt8(ascii: "{")
                nodes.append(Node(kind: isObject ? .object : .array, start: Int32(cursor.index), next: Int32(innermost)))
                cursor.index += 1
                cursor.skipWhitespace()
                if cursor.index < bytes.count, bytes[cursor.index] == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    cursor.index += 1
                    nodes[me].next = Int32(nodes.count)
                    depth -= 1
                } else {
                    innermost = me
                    if isObject { try key(&cursor, &nodes, &strings) }
                    continue document
                }
            case UInt8(ascii: "\""):
                try appendString(&cursor, &nodes, &strings)
            case UInt8(ascii: "t"):
                try cursor.expect("true")
                nodes.append(Node(kind: .true, start: Int32(cursor.index - 4), next: Int32(me + 1)))
            case UInt8(ascii: "f"):
                try cursor.expect("false")
                nodes.append(Node(kind: .false, start: Int32(cursor.index - 5), next: Int32(me + 1)))
            case UInt8(ascii: "n"):
                try cursor.expect("null")
                nodes.append(Node(kind: .null, start: Int32(cursor.index - 4), next: Int32(me + 1)))
            default:
                let start = cursor.index
                let isInteger = try cursor.numberSyntax()
                nodes.append(Node(kind: .number, flag: isInteger, start: Int32(start), length: Int32(cursor.index - start), next: Int32(me + 1)))
            }
            // A value ended: the next member of the innermost container, or its end (and so on up).
            while innermost >= 0 {
                nodes[innermost].length += 1
                cursor.skipWhitespace()
                guard cursor.index < bytes.count else { throw JSONParser.Failure() }
                let c = bytes[cursor.index]
                let isObject = nodes[innermost].kind == .object
                if c == UInt8(ascii: ",") {
                    cursor.index += 1
                    cursor.skipWhitespace()
                    if isObject { try key(&cursor, &nodes, &strings) }
                    continue document
                }
                guard c == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { throw JSONParser.Failure() }
                cursor.index += 1
                let parent = Int(nodes[innermost].next)
                nodes[innermost].next = Int32(nodes.count)
                innermost = parent
                depth -= 1
            }
            break document
        }
        cursor.skipWhitespace()
        guard cursor.index == bytes.count else { throw JSONParser.Failure() }
    }
}

// MARK: - Values

extension JSONTape {
    /// Why a node is not the value asked for; the decoder adds the type and the path
    /// (``JSONTapeDecoder/error(_:_:_:_:)``).
    enum Problem: Error {
        /// Another kind of value ("found a string instead").
        case mismatch(Kind)
        /// `null` where a value was needed.
        case null
        /// A number the type cannot hold (its text).
        case notRepresentable(String)
        /// Malformed content (a string that is not UTF-8).
        case corrupted(String)
    }

    func kind(_ node: Int) -> Kind { nodes[node].kind }

    /// The bytes of a plain string or a number.
    func bytes(of node: Node) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: bytes[Int(node.start)..<Int(node.start + node.length)])
    }

    /// `true` or `false` (`null` is a mismatch, as in `JSONDecoder`).
    func bool(_ index: Int) throws(Problem) -> Bool {
        switch nodes[index].kind {
        case .true: return true
        case .false: return false
        case let other: throw .mismatch(other)
        }
    }

    func string(_ index: Int) throws(Problem) -> String {
        let node = nodes[index]
        guard node.kind == .string else { throw node.kind == .null ? .null : .mismatch(node.kind) }
        if node.flag { return strings[Int(node.length)] }
        guard let string = String(utf8: bytes(of: node)) else { throw .corrupted("The given data was not valid JSON: a string is not valid UTF-8.") }
        return string
    }

    /// Whether the string at `index` is all ASCII.
    func isASCII(_ index: Int) -> Bool {
        let node = nodes[index]
        if node.flag { return !strings[Int(node.length)].utf8.contains(where: { $0 >= 0x80 }) }
        return !bytes(of: node).contains(where: { $0 >= 0x80 })
    }

    /// Whether the string at `index` is `name` (compared as UTF-8 bytes, where they lie).
    func string(_ index: Int, equals name: UnsafeBufferPointer<UInt8>) -> Bool {
        let node = nodes[index]
        if node.flag { return strings[Int(node.length)].utf8.elementsEqual(name) }
        guard Int(node.length) == name.count else { return false }
        var i = Int(node.start)
        for byte in name {
            guard bytes[i] == byte else { return false }
            i += 1
        }
        return true
    }

    /// The text of a number node.
    func text(_ node: Node) -> String { String(decoding: bytes(of: node), as: UTF8.self) }

    /// An integer of type `T`, as `JSONDecoder` converts one: from its digits when it is written
    /// as an integer in range; otherwise through a double when that is an integer of `T`
    /// (`1.0`, `1e2`; not `1.5`, not `300` for an `Int8`), exact below 2^53; beyond, from the
    /// decimal digits — their integer part, at most 64 bits of magnitude, as `JSONDecoder`'s
    /// conversion from `Decimal` reads them.
    func integer<T: FixedWidthInteger>(_ index: Int, as _: T.Type) throws(Problem) -> T {
        let node = nodes[index]
        guard node.kind == .number else { throw node.kind == .null ? .null : .mismatch(node.kind) }
        if node.flag, let value: T = Self.integer(bytes(of: node)) { return value }
        let text = text(node)
        if let double = Double(text) {
            guard let value = T(exactly: double) else { throw .notRepresentable(text) }
            if double.magnitude < 9_007_199_254_740_992 { return value }
        }
        let exact = ExactDecimal(text)
        var magnitude: UInt64 = 0
        let whole = exact.exponent >= 0 ? exact.digits[...] : exact.digits.dropLast(min(-exact.exponent, exact.digits.count))
        for digit in whole + repeatElement(UInt8(ascii: "0"), count: min(max(exact.exponent, 0), 64)) {
            let (shifted, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (next, o2) = shifted.addingReportingOverflow(UInt64(digit &- UInt8(ascii: "0")))
            guard !o1, !o2 else { throw .notRepresentable(text) }
            magnitude = next
        }
        guard let value = T(exactly: magnitude), !exact.negative || T.isSigned else { throw .notRepresentable(text) }
        return exact.negative ? 0 - value : value
    }

    /// `-?[0-9]+` as a `T`, nil when it does not fit.
    static func integer<T: FixedWidthInteger>(_ digits: UnsafeBufferPointer<UInt8>) -> T? {
        var i = 0
        let negative = digits[0] == UInt8(ascii: "-")
        if negative { i = 1 }
        var value: T = 0
        while i < digits.count {
            let (shifted, o1) = value.multipliedReportingOverflow(by: 10)
            let d = T(truncatingIfNeeded: digits[i] &- UInt8(ascii: "0"))
            let (next, o2) = negative ? shifted.subtractingReportingOverflow(d) : shifted.addingReportingOverflow(d)
            if o1 || o2 { return nil }
            value = next
            i += 1
        }
        return value
    }

    /// A `Double` or `Float`, correctly rounded from the text as `JSONDecoder` reads it: refused
    /// when it overflows to infinity or rounds a non-zero number to zero.
    func floatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(_ index: Int, as _: T.Type) throws(Problem) -> T {
        let node = nodes[index]
        guard node.kind == .number else { throw node.kind == .null ? .null : .mismatch(node.kind) }
        // An integer of at most 15 digits is exact in a double, and rounds once to a float.
        if node.flag, node.length <= 15, let value: Int64 = Self.integer(bytes(of: node)) {
            if value == 0, node.length > 1 { return -0.0 }  // "-0"
            return T(value)
        }
        let text = text(node)
        guard let value = T(text), value.isFinite else { throw .notRepresentable(text) }
        if value == 0 {
            for byte in text.utf8 {
                if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") { break }
                if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(byte) { throw .notRepresentable(text) }
            }
        }
        return value
    }
}
