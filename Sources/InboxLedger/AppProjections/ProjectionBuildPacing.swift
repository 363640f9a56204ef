/// How a projection build (or drop) shares the writer lock: in short transactions with a
/// pause between them.
enum ProjectionBuildPacing {
    /// How many events (or deleted entries) one build transaction handles: short enough that
    /// other writers wait milliseconds, not the write timeout.
    static let chunk = 500
    /// Pause between two build (or drop) transactions, in microseconds. The writer lock is not
    /// fair (a waiting writer polls it, every 2 ms at most): without a pause, a build committing
    /// chunk after chunk kept other processes' writers out for the whole build. With it, a
    /// waiting writer gets in at about every second chunk, for ~5% of the build's time.
    static let pauseMicros: UInt32 = 1_000
}
