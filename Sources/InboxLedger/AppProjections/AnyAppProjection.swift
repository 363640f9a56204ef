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
    /// Applies `events` (those of ``eventTypes``, and the settlements of its pending shared
    /// events) to the state `reader` reads, in memory, as `context` says they are seen
    /// (``AppProjectionFold``); throws ``LedgerError/projectionRejected(name:sequence:type:reason:)``
    /// and changes nothing when an apply throws or the state cannot be stored (no JSON form,
    /// a row or document past its limit).
    let stage: @Sendable (_ events: [Event], _ reader: AppProjectionReader, _ context: ProjectionApplyContext,
                          _ input: AppProjectionFold.Input) throws(LedgerError) -> AppProjectionChanges
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
        stage = { (events: [Event], reader: AppProjectionReader, context: ProjectionApplyContext, input: AppProjectionFold.Input) throws(LedgerError) -> AppProjectionChanges in
            try AppProjectionFold.stage(P.self, events, reader, context, input)
        }
    }
}
