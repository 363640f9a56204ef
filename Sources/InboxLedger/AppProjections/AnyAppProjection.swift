#if canImport(FoundationEssentials)
import FoundationEssentials
#elseif canImport(Foundation)
import Foundation
#endif

/// A registered projection without its generic types: what the engine needs.
struct AnyAppProjection: Sendable {
    let name: String
    let version: Int
    let eventTypes: Set<String>
    /// Applies `events` (those of ``eventTypes``) to the state `reader` reads, in memory, as
    /// `context` says they are seen; throws ``LedgerError/projectionRejected(name:sequence:type:reason:)``
    /// and changes nothing when an apply throws or the state cannot be stored (no JSON form,
    /// a row or document past its limit).
    let stage: @Sendable (_ events: [Event], _ reader: AppProjectionReader, _ context: ProjectionApplyContext) throws(LedgerError) -> AppProjectionChanges
    /// The type it was made from (two registrations of one name must be one type).
    let type: ObjectIdentifier
    /// Its type's full name, for errors (built only then: `String(reflecting:)` costs a cold
    /// launch about half a millisecond a type).
    let typeName: @Sendable () -> String
    /// Where its version is stored (``AppProjectionKeys``), its keys built once.
    let space: AppProjectionSpace

    init<P: LedgerProjection>(_ projection: P.Type) {
        name = P.name
        version = P.version
        eventTypes = P.eventTypes
        typeName = { String(reflecting: P.self) }
        type = ObjectIdentifier(P.self)
        space = AppProjectionSpace(P.self)
        stage = { (events: [Event], reader: AppProjectionReader, context: ProjectionApplyContext) throws(LedgerError) -> AppProjectionChanges in
            var update = try ProjectionUpdate<P>(stored: reader, context: context)
            let before = update.document
            var last: Event?
            for event in events where P.eventTypes.contains(event.baseType) {
                last = event
                do { try P.apply(event, to: &update) } catch {
                    // An event that does not decode says which field, once (not its sequence and type again).
                    let reason = if case LedgerError.eventDecoding(_, _, let field, let why) = error { "\(field): \(why)" } else { "\(error)" }
                    throw .projectionRejected(name: P.name, sequence: event.sequence, type: event.type, reason: reason)
                }
            }
            func refuse(_ reason: String) -> LedgerError { .projectionRejected(name: P.name, sequence: last?.sequence, type: last?.type, reason: reason) }
            var changes = AppProjectionChanges()
            // The keys sorted as a [String], not the (key, row) pairs: a sort over a type that
            // depends on P runs unspecialized (value-witness copies per comparison), ~44,000
            // instructions an event in a batch of 1,000 (ledger-bench W9-B).
            var keys = Array(update.changed.keys)
            keys.sort()
            for key in keys {
                guard let row = update.changed[key] ?? nil else { changes.rows.append((key, nil)); continue }
                let order = P.order(of: row, key: key)?.bytes ?? []
                guard order.count <= AppProjectionKeys.maxOrderBytes else {
                    throw refuse("the order of row '\(key)' encodes to \(order.count) bytes, more than \(AppProjectionKeys.maxOrderBytes)")
                }
                let json = try AppProjectionJSON.encode(row, projection: P.name, sequence: last?.sequence, type: last?.type)
                guard json.count <= AppProjectionKeys.maxRowBytes else {
                    throw refuse("row '\(key)' encodes to \(json.count) bytes of JSON, more than \(AppProjectionKeys.maxRowBytes)")
                }
                let value = AppProjectionRow.encode(order: order, json: json)
                // The next read of these bytes needs no decoding; a large batch's rows would
                // only push the cache's earlier entries out (it holds 1,024).
                if keys.count <= AppProjectionCache.rowsKeptPerApply { reader.cache?.store(at: reader.space.row(key), value, row) }
                changes.rows.append((key, (value, order)))
            }
            let unstored = try !reader.hasDocument()
            if last != nil, update.document != before || unstored {
                let document = try AppProjectionJSON.encode(update.document, projection: P.name, sequence: last?.sequence, type: last?.type)
                guard document.count <= AppProjectionKeys.maxDocumentBytes else {
                    throw refuse("the document encodes to \(document.count) bytes of JSON, more than \(AppProjectionKeys.maxDocumentBytes)")
                }
                reader.cache?.store(at: reader.space.document, document, update.document)
                changes.document = document
            }
            return changes
        }
    }
}
