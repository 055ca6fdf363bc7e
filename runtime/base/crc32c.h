/* CRC32C (Castagnoli), as used by the WAL and ledger frames and reported to
 * sinks. Hardware instruction on x86-64 with SSE4.2, table otherwise. */
#ifndef SK_CRC32C_H
#define SK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: start with crc = 0. */
uint32_t sk_crc32c(uint32_t crc, const void *p, size_t n);

/* The CRC of A followed by B, from crc1 = CRC(A), crc2 = CRC(B) and B's
 * length: so CRCs computed apart (on other threads) can be joined. */
uint32_t sk_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);
/* The same in two steps, so the dearer one (about log2(len2) products) can
 * run on another thread: xpow = sk_crc32c_xpow(len2), then one product. */
uint32_t sk_crc32c_xpow(uint64_t len2);
uint32_t sk_crc32c_combine_x(uint32_t crc1, uint32_t crc2, uint32_t xpow);

#endif
