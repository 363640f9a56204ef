import Foundation

/// Reads standard input as lines of bytes (without the newline), in 64 KiB chunks, so invalid
/// UTF-8 can be reported instead of silently repaired, and a line cannot grow without bound.
struct LineReader {
    /// Longest line accepted, in bytes.
    static let maxLineBytes = 64 << 20

    enum Failure: Error, Equatable {
        case lineTooLong
        case readFailed(Int32)
    }

    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes from `start` up to here hold no newline (so each byte is scanned once).
    private var scanned = 0
    private var finished = false

    /// The next line, or nil at the end of input. A last line without a newline counts.
    mutating func next() throws(Failure) -> [UInt8]? {
        while true {
            if let newline = buffer[max(start, scanned)...].firstIndex(of: 0x0A) {
                let line = Array(buffer[start..<newline])
                start = newline + 1
                scanned = start
                if start > 1 << 20 {
                    buffer.removeFirst(start)
                    start = 0
                    scanned = 0
                }
                return line
            }
            scanned = buffer.count
            if finished {
                guard start < buffer.count else { return nil }
                let line = Array(buffer[start...])
                start = buffer.count
                return line
            }
            guard buffer.count - start <= Self.maxLineBytes else { throw .lineTooLong }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .readFailed(errno)
            }
            if n == 0 { finished = true } else { buffer.append(contentsOf: chunk[0..<n]) }
        }
    }
}
