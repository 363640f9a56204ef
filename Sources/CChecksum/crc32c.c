#include "ledger_crc32c.h"
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>

int ledger_crc32c_hardware_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return (ecx & bit_SSE4_2) != 0;
}

__attribute__((target("sse4.2")))
uint32_t ledger_crc32c_hardware(uint32_t checksum, const uint8_t *data, size_t length) {
    uint64_t crc = ~checksum;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, data, 8);  // unaligned-safe
        crc = _mm_crc32_u64(crc, word);
        data += 8;
        length -= 8;
    }
    uint32_t crc32 = (uint32_t)crc;
    while (length > 0) {
        crc32 = _mm_crc32_u8(crc32, *data++);
        length--;
    }
    return ~crc32;
}

#elif defined(__aarch64__)
#include <arm_acle.h>
#if defined(__linux__)
#include <sys/auxv.h>
#include <asm/hwcap.h>
#endif

int ledger_crc32c_hardware_available(void) {
#if defined(__APPLE__)
    return 1;  // every Apple arm64 CPU implements the CRC extension (ARMv8.1 and later)
#elif defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#else
    return 0;
#endif
}

__attribute__((target("crc")))
uint32_t ledger_crc32c_hardware(uint32_t checksum, const uint8_t *data, size_t length) {
    uint32_t crc = ~checksum;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, data, 8);
        crc = __crc32cd(crc, word);
        data += 8;
        length -= 8;
    }
    while (length > 0) {
        crc = __crc32cb(crc, *data++);
        length--;
    }
    return ~crc;
}

#else
int ledger_crc32c_hardware_available(void) { return 0; }
uint32_t ledger_crc32c_hardware(uint32_t checksum, const uint8_t *data, size_t length) {
    (void)data; (void)length;
    return checksum;  // never called: no instruction on this architecture
}
#endif
