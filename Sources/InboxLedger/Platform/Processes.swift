#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether a process exists (it may belong to another user): the liveness test behind stale
/// reader slots (statistics, verification) and the compaction lease.
func processIsAlive(_ pid: Int32) -> Bool {
    if pid == getpid() { return true }
    return kill(pid, 0) == 0 || errno == EPERM
}
