/*
 * base/crc32c.h — CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78),
 * the checksum of profd's WAL records and file footers (as Prometheus TSDB uses).
 * Written here because Debian 12 ships no C library for it (only python3-crc32c).
 * Uses SSE4.2's crc32 instruction when the CPU has it, else slicing-by-8 tables.
 */
#ifndef PD_BASE_CRC32C_H
#define PD_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Returns the CRC-32C of data[0..len) continuing from `crc` (0 to start).
 * pd_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t pd_crc32c(uint32_t crc, const void *data, size_t len);

/* The same without the hardware path (SSE4.2's crc32 instruction on x86-64,
 * which pd_crc32c uses when the CPU has it): for tests comparing the two. */
uint32_t pd__crc32c_portable(uint32_t crc, const void *data, size_t len);

#endif
