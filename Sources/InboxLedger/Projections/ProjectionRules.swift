/// The version of the projection rules this library applies (``Projector``): what each event
/// does to the widget list, the badge, the pending actions. Raise it with any change to what
/// the rules write for the same events; a ledger whose projections were built by an older
/// version is rebuilt when it is opened (docs/operations.md, "Upgrades").
enum ProjectionRules {
    /// 2: pushes (`push.received`) and local removals (`message.removed`), kept until a
    /// listing settles them (the `local` table); the server's badge.
    static let version: UInt32 = 2

    /// Whether projections (and so snapshots) built by rules `stored` are exactly what these
    /// rules build from the same events, so that a trimmed log upgrades from its newest snapshot
    /// without a decision: true when every version since `stored` only added built-in event
    /// types. Events of those names stored before the upgrade were custom events to the older
    /// rules, and stay custom (``BuiltInBoundaries``, recorded by the upgrade's transaction).
    /// Version 2 only added `push.received` and `message.removed`.
    static func snapshotsCarryOver(from stored: UInt32) -> Bool { stored >= 1 }
}
