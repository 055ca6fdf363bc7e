/* CRC32C (Castagnoli), as used by the WAL and ledger frames and reported to
 * sinks. Hardware instruction on x86-64 with SSE4.2, table otherwise. */
#ifndef SK_CRC32C_H
#define SK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: start with crc = 0. */
uint32_t sk_crc32c(uint32_t crc, const void *p, size_t n);

#endif
