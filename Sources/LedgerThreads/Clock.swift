#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The package's one monotonic clock (`CLOCK_MONOTONIC`): the same for every process of the
/// machine, so times taken in two processes compare. Nanoseconds.
package func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// ``monotonicNanoseconds()`` in whole milliseconds (deadlines of waits).
package func monotonicMilliseconds() -> Int { Int(monotonicNanoseconds() / 1_000_000) }

/// ``monotonicNanoseconds()`` in seconds.
package func monotonicSeconds() -> Double { Double(monotonicNanoseconds()) / 1e9 }
