#if canImport(FoundationEssentials)
import FoundationEssentials
#elseif canImport(Foundation)
import Foundation
#endif

// `verify` for the app projections (docs/format.md, "App projections"): the structure of the
// `app-projections` table, which needs none of the apps' code (the CLI checks it), and a
// rebuild of every projection the verifying handle registers, compared with what is stored.

extension LedgerMaintenance {
    /// At most this many structural problems are listed per projection (then how many more).
    static let appProjectionFindingLimit = 10

    /// Checks the `app-projections` table without the apps' code: every record decodes and
    /// names its key; every row decodes (`0x01` header, order length) and holds JSON; rows and
    /// order-index entries agree one to one (each row has exactly its entry `order ‖ key`, each
    /// entry names an existing row of that order); a record's row count is the rows stored; the
    /// document is JSON; nothing is applied past the head. A projection whose old rows are being
    /// cleared (`clearing`) has only its record checked. Returns the findings and the names of
    /// the projections they concern.
    func checkAppProjections(in tables: StoreTransaction, head: UInt64) throws -> (findings: [VerificationReport.Finding], damaged: Set<String>) {
        let store = tables.projections
        var problems: [String: [String]] = [:]
        var order: [String] = []
        func report(_ name: String, _ problem: String) {
            if problems[name] == nil { order.append(name) }
            problems[name, default: []].append(problem)
        }
        func text(_ bytes: some Collection<UInt8>) -> String {
            if let string = String(utf8: Array(bytes)), string.unicodeScalars.allSatisfy({ $0.value >= 0x20 }) {
                return string
            }
            return "0x" + bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        }

        // The records: `0x00 ‖ name ‖ 0x01 ‖ version`, or `0x00 ‖ name` for a legacy one (they sort first).
        var metas: [AppProjectionSpace: AppProjectionMeta] = [:]
        var recorded: Set<AppProjectionSpace> = []
        try store.scan(.apps, from: AppProjectionKeys.metaPrefix) { key, value in
            guard key.first == 0x00 else { return false }
            let body = key.dropFirst()
            let split = body.firstIndex(of: 0x01)
            let name = text(body[..<(split ?? body.endIndex)])
            let version = split.flatMap { Int(String(decoding: body[($0 + 1)...], as: UTF8.self)) }
            if split != nil, version == nil {
                report(name, "a record's key names no version (key \(text(key)))")
                return true
            }
            let space = AppProjectionSpace(name: name, version: version)
            recorded.insert(space)
            do {
                let meta = try AppProjectionMeta.decode(value, key: Array(key), path: path)
                if meta.name != name { report(name, "its record names '\(meta.name)'") }
                if let version, meta.version != version { report(name, "the record of version \(version) holds version \(meta.version)") }
                if meta.appliedThrough > head { report(name, "its record is applied through \(meta.appliedThrough), past the head \(head)") }
                if meta.builtFrom > meta.appliedThrough { report(name, "its record was built from \(meta.builtFrom), past what it applied (\(meta.appliedThrough))") }
                metas[space] = meta
            } catch {
                report(name, "its record does not decode: \(error)")
            }
            return true
        }

        // The state: `space ‖ "D" | "R" key | "O" order key`, by space.
        var rowCounts: [AppProjectionSpace: Int] = [:]
        var orphans: Set<AppProjectionSpace> = []
        try store.scan(.apps, from: [0x01]) { key, value in
            guard let (space, kind) = AppProjectionSpace.parse(stateKey: key), let tag = kind.first else {
                report(text(key), "an entry of the app-projections table belongs to no projection (key \(text(key)))")
                return true
            }
            let name = space.name
            guard recorded.contains(space) else {
                if orphans.insert(space).inserted { report(name, "the table holds its state but no record" + (space.version.map { " (version \($0))" } ?? "")) }
                return true
            }
            guard let meta = metas[space], meta.status != .clearing else { return true }
            let rest = Array(kind.dropFirst())
            switch tag {
            case UInt8(ascii: "D"):
                guard rest.isEmpty else {
                    report(name, "an entry of unknown kind (key \(text(key)))")
                    return true
                }
                if let reason = Self.notJSON(value[...]) { report(name, "its document is not JSON: \(reason)") }
            case UInt8(ascii: "R"):
                let rowKey = String(decoding: rest, as: UTF8.self)
                rowCounts[space, default: 0] += 1
                guard let row = AppProjectionRow.decode(value) else {
                    report(name, "row '\(rowKey)' is malformed (no 0x01 header, or an order length past its end)")
                    return true
                }
                if let reason = Self.notJSON(row.json) { report(name, "row '\(rowKey)' is not JSON: \(reason)") }
                let entry = try store.get(.apps, space.orderPrefix + row.order + rest)
                if entry == nil {
                    report(name, "row '\(rowKey)' has no order-index entry")
                } else if entry != rest {
                    report(name, "the order-index entry of row '\(rowKey)' names row '\(text(entry ?? []))'")
                }
            case UInt8(ascii: "O"):
                let rowKey = String(decoding: value, as: UTF8.self)
                guard let bytes = try store.get(.apps, space.row(rowKey)) else {
                    report(name, "the order index names row '\(rowKey)', which does not exist")
                    return true
                }
                // A malformed row is reported as such; an entry must be exactly `order ‖ key` of its row.
                if let row = AppProjectionRow.decode(bytes), row.order + value != rest {
                    report(name, "an order-index entry names row '\(rowKey)' at another order than the row's")
                }
            case UInt8(ascii: "U"):
                // A row's value before the pending shared events (AppProjectionFold).
                if meta.pending == nil { report(name, "it holds the undo entry of row '\(text(rest))' with no shared event pending") }
                if value != [0x00] {
                    guard let row = AppProjectionRow.decode(value) else {
                        report(name, "the undo entry of row '\(text(rest))' is malformed")
                        return true
                    }
                    if let reason = Self.notJSON(row.json) { report(name, "the undo entry of row '\(text(rest))' is not JSON: \(reason)") }
                }
            case UInt8(ascii: "u"):
                guard rest.isEmpty else {
                    report(name, "an entry of unknown kind (key \(text(key)))")
                    return true
                }
                if meta.pending == nil { report(name, "it holds an undo document with no shared event pending") }
                if let reason = Self.notJSON(value[...]) { report(name, "its undo document is not JSON: \(reason)") }
            default:
                report(name, "an entry of unknown kind (key \(text(key)))")
            }
            return true
        }
        for (space, meta) in metas where meta.status != .clearing && meta.pending != nil {
            if try store.get(.apps, space.undoDocument) == nil { report(space.name, "shared events are pending but it holds no undo document") }
        }
        for (space, meta) in metas.sorted(by: { $0.key.description < $1.key.description }) where meta.status != .clearing {
            let stored = rowCounts[space] ?? 0
            if meta.rows != stored { report(space.name, "its record counts \(meta.rows) rows, the table holds \(stored)") }
        }

        var findings: [VerificationReport.Finding] = []
        for name in order {
            let list = problems[name] ?? []
            findings += list.prefix(Self.appProjectionFindingLimit).map { .appProjection(name: name, problem: $0) }
            if list.count > Self.appProjectionFindingLimit {
                findings.append(.appProjection(name: name, problem: "and \(list.count - Self.appProjectionFindingLimit) more problems"))
            }
        }
        return (findings, Set(order))
    }

    /// The reason `bytes` are not one JSON value, nil when they are.
    static func notJSON(_ bytes: ArraySlice<UInt8>) -> String? {
        do {
            _ = try LedgerJSONDecoder.decode(JSONValue.self, from: bytes)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// Whether a stored row or document holds what a rebuild wrote: the same bytes, or — JSON
    /// an earlier version wrote with `JSONEncoder` (sorted keys, its own number forms) — the same
    /// canonical JSON (a row's header and order bytes equal). Stored JSON the canonical form
    /// refuses (an integer beyond 64 bits, which both write as digits) is compared as it lies.
    static func sameState(rebuilt: [UInt8], stored: [UInt8], row: Bool) -> Bool {
        if rebuilt == stored { return true }
        var rebuiltJSON = rebuilt[...], storedJSON = stored[...]
        if row {
            guard let r = AppProjectionRow.decode(rebuilt), let s = AppProjectionRow.decode(stored), r.order == s.order else { return false }
            rebuiltJSON = r.json
            storedJSON = s.json
        }
        // Refused by the canonical parser: the bytes, compared above, were all there was to compare.
        guard let canonical = try? EventJSON.canonicalize(Array(storedJSON)) else { return false }
        return canonical.elementsEqual(rebuiltJSON)
    }

    /// Rebuilds every projection this handle registers whose stored version is the registered
    /// one (`ready` or `building`; not one in `damaged`) and compares it with what is stored,
    /// through the stored record's `appliedThrough`: from the log after the record's `builtFrom`
    /// when those events are retained, else from the newest snapshot holding this build of the
    /// projection and the log after what that snapshot had applied. Each projection is staged
    /// and written exactly as the engine does (``AnyAppProjection/stage``,
    /// ``AppProjectionTable/write(_:name:into:rows:)``) into a ``MemoryStore``. One that cannot
    /// be rebuilt (the events it needs trimmed, no snapshot late enough) is a warning.
    func rebuildAppProjections(in tables: StoreTransaction, skipping damaged: Set<String>) throws
        -> (findings: [VerificationReport.Finding], warnings: [VerificationReport.Warning]) {
        let registry = log.projections
        guard !registry.projections.isEmpty else { return ([], []) }
        let first = try tables.firstSequence()
        var snapshots: [UInt64: MemoryStore] = [:]
        var findings: [VerificationReport.Finding] = []
        var warnings: [VerificationReport.Warning] = []
        for projection in registry.projections where !damaged.contains(projection.name) {
            let name = projection.name
            guard let meta = try AppProjectionTable.meta(name, version: projection.version, in: tables.projections, path: path),
                  meta.status == .ready || meta.status == .building
            else { continue }
            let space = AppProjectionSpace(meta)
            do {
                // Where the rebuild starts: nothing (after `builtFrom`), or a snapshot's state.
                // It runs exactly as a build does (``AnyAppProjection/applyStored``: events
                // `apply` refuses are skipped) into a ``MemoryStore``.
                let rebuilt = MemoryStore()
                var rebuild = meta
                rebuild.rows = 0
                rebuild.appliedThrough = meta.builtFrom
                rebuild.pending = nil
                if meta.builtFrom + 1 < first {
                    guard let start = try snapshotHolding(meta, after: first, in: tables, cache: &snapshots) else {
                        // Not damage: a compaction may keep an older snapshot that covers the
                        // built-in projections while the events this one needs are gone.
                        warnings.append(.appProjectionNotRebuilt(name: name, reason: "the log starts at \(first), after what it was built from (\(meta.builtFrom)), and no snapshot holds version \(meta.version) of it applied through \(first - 1) or later"))
                        continue
                    }
                    for (key, value) in start.store.sorted(.apps) where key.starts(with: space.prefix) { try rebuilt.put(.apps, key, value) }
                    rebuild.rows = start.meta.rows
                    rebuild.appliedThrough = start.meta.appliedThrough
                    rebuild.pending = start.meta.pending
                }
                while rebuild.appliedThrough < meta.appliedThrough {
                    let events = try registry.upcast(tables.events.events(after: rebuild.appliedThrough, limit: 1000).filter { $0.sequence <= meta.appliedThrough })
                    guard !events.isEmpty else { break }
                    try projection.applyStored(events, to: &rebuild, in: rebuilt, log: AppProjectionLog(tables: tables, registry: registry), cache: nil)
                }
                if let problem = try appProjectionDifference(space, rebuilt: rebuilt, stored: tables.projections) {
                    findings.append(.appProjection(name: name, problem: problem))
                }
            } catch let error as LedgerError {
                findings.append(.appProjection(name: name, problem: "cannot be rebuilt to compare: \(error)"))
            }
        }
        return (findings, warnings)
    }

    /// The newest snapshot holding the same build of `meta`'s projection (its version, its
    /// `builtFrom`, `ready` or `building`) applied through `first - 1` or later and at most
    /// through `meta.appliedThrough`: its state loaded, and its record.
    private func snapshotHolding(_ meta: AppProjectionMeta, after first: UInt64, in tables: StoreTransaction,
                                 cache: inout [UInt64: MemoryStore]) throws -> (store: MemoryStore, meta: AppProjectionMeta)? {
        for snapshot in try tables.snapshots.headers().reversed() {
            let store: MemoryStore
            if let loaded = cache[snapshot.sequence] {
                store = loaded
            } else {
                store = MemoryStore()
                try tables.snapshots.load(snapshot.sequence, into: store, apps: true)
                cache[snapshot.sequence] = store
            }
            guard let held = try AppProjectionTable.meta(meta.name, version: meta.version, in: store, path: path),
                  held.builtFrom == meta.builtFrom, held.status == .ready || held.status == .building,
                  held.appliedThrough + 1 >= first, held.appliedThrough <= meta.appliedThrough
            else { continue }
            return (store, held)
        }
        return nil
    }

    /// The first difference between the state in `space` rebuilt and stored: rows (by key),
    /// then the document, then the order index; nil when they are equal.
    private func appProjectionDifference(_ space: AppProjectionSpace, rebuilt: MemoryStore, stored: TransactionStore) throws -> String? {
        func entries(_ prefix: [UInt8], in store: some ProjectionStore) throws -> [(key: [UInt8], value: [UInt8])] {
            var found: [(key: [UInt8], value: [UInt8])] = []
            try store.scan(.apps, from: prefix) { key, value in
                guard key.starts(with: prefix) else { return false }
                found.append((Array(key.dropFirst(prefix.count)), value))
                return true
            }
            return found
        }
        func shown(_ bytes: [UInt8]) -> String {
            let json = AppProjectionRow.decode(bytes).map { Array($0.json) } ?? bytes
            let text = String(decoding: json, as: UTF8.self)
            return text.count <= 120 ? text : String(text.prefix(119)) + "…"
        }
        // Rows.
        let rowPrefix = space.rowPrefix
        let expected = try entries(rowPrefix, in: rebuilt), actual = try entries(rowPrefix, in: stored)
        var i = 0, j = 0
        while i < expected.count || j < actual.count {
            if i < expected.count, j < actual.count, expected[i].key == actual[j].key {
                let key = String(decoding: expected[i].key, as: UTF8.self)
                if !Self.sameState(rebuilt: expected[i].value, stored: actual[j].value, row: true) {
                    return "row '\(key)' differs from a rebuild (stored \(shown(actual[j].value)), rebuilt \(shown(expected[i].value)))"
                }
                i += 1
                j += 1
            } else if j >= actual.count || (i < expected.count && expected[i].key.lexicographicallyPrecedes(actual[j].key)) {
                return "row '\(String(decoding: expected[i].key, as: UTF8.self))' is missing (a rebuild has \(shown(expected[i].value)))"
            } else {
                return "row '\(String(decoding: actual[j].key, as: UTF8.self))' is stored but a rebuild has no such row"
            }
        }
        // The document.
        let document = space.document
        let rebuiltDocument = try rebuilt.get(.apps, document), storedDocument = try stored.get(.apps, document)
        let sameDocument = switch (rebuiltDocument, storedDocument) {
        case (nil, nil): true
        case (let r?, let s?): Self.sameState(rebuilt: r, stored: s, row: false)
        default: false
        }
        if !sameDocument {
            return "the document differs from a rebuild (stored \(storedDocument.map(shown) ?? "none"), rebuilt \(rebuiltDocument.map(shown) ?? "none"))"
        }
        // The order index.
        let orderPrefix = space.orderPrefix
        let expectedIndex = try entries(orderPrefix, in: rebuilt), actualIndex = try entries(orderPrefix, in: stored)
        for (e, a) in zip(expectedIndex, actualIndex) where e.key != a.key || e.value != a.value {
            return "the order index differs from a rebuild at row '\(String(decoding: a.value, as: UTF8.self))'"
        }
        if expectedIndex.count != actualIndex.count {
            return "the order index holds \(actualIndex.count) entries, a rebuild \(expectedIndex.count)"
        }
        return nil
    }
}
