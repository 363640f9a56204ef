// CRC-32C (Castagnoli) with the CPU's instruction: SSE 4.2 on x86-64, the ARMv8 CRC extension on
// arm64. The Swift side (CRC32C) keeps its table-driven version as the fallback and the reference.
#pragma once
#include <stddef.h>
#include <stdint.h>

/// 1 if this CPU has a CRC-32C instruction this target can use, else 0.
int ledger_crc32c_hardware_available(void);

/// Continues `checksum` (the result of a previous call, 0 to start) over `length` bytes at
/// `data`, with pre- and post-inversion like the software version. Only call it when
/// ledger_crc32c_hardware_available() returned 1.
uint32_t ledger_crc32c_hardware(uint32_t checksum, const uint8_t *data, size_t length);
