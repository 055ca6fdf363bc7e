/* JSON's structural stage (jsonmask.c): 64 bytes at a time, the bit masks
 * of where strings, structural characters and line ends are, as the
 * first stage of simdjson and the 1BRC programs find them, so that a
 * framer or peeker looks only at the bytes that matter.
 *
 * Bit i of a mask is byte i of the block. A block's raw classes (quotes,
 * backslashes, ...) come from a kernel chosen once, at the first call,
 * for the CPU: AVX2 (two 32-byte compares a class), SSE2 (four 16-byte;
 * the x86-64 baseline), or a portable scalar loop, which the tests run as
 * well and compare with the others. What the raw classes mean across
 * blocks (escapes, strings) is worked out in 64-bit words, the same for
 * every kernel:
 *   escaped    a byte after an odd run of backslashes (the run may begin
 *              in an earlier block)
 *   quote      a '"' not escaped: where a string opens or closes
 *   in_string  the bytes of strings, the opening quote included and the
 *              closing one not (a prefix XOR of quote, carried on)
 *   structural { } [ ] : , outside strings; open: { [ of them; close: } ]
 *   newline    '\n' outside strings
 *   space      ' ' '\t' '\r' '\n' outside strings
 *   ctrl       bytes below 0x20 inside strings (invalid JSON)
 *   high       bytes of 0x80 and above (UTF-8 to check)
 *
 * Owns: nothing; a carry is the caller's, one per stream of blocks.
 * Thread: any (the kernel choice is made once, atomically).
 */
#ifndef SK_JSONMASK_H
#define SK_JSONMASK_H

#include <stddef.h>
#include <stdint.h>

#define SK_JMASK_BLOCK 64

typedef struct sk_jmask {
    uint64_t escaped, quote, in_string;
    uint64_t structural, open, close, newline, space, ctrl, high;
} sk_jmask;

/* What a block passes to the next: whether it ended inside a string
 * (all ones) and whether the next block's first byte is escaped (1). A
 * stream starts from {0, 0}. */
typedef struct sk_jmask_carry {
    uint64_t in_string;
    uint64_t escaped;
} sk_jmask_carry;

/* The masks of the 64 bytes at in, after the blocks c has seen. */
void sk_jmask_block(sk_jmask_carry *c, const uint8_t *in, sk_jmask *out);
/* The same for the last n < 64 bytes of a stream, padded with spaces
 * (bits from n up are clear in every mask but space). */
void sk_jmask_tail(sk_jmask_carry *c, const uint8_t *in, size_t n,
                   sk_jmask *out);

/* The kernel in use: "avx2", "sse2" or "scalar". */
const char *sk_jmask_kernel(void);
/* Use kernel name from now on, if this CPU has it: 0, else -1 (tests
 * and benches compare the kernels). */
int sk_jmask_use(const char *name);

#endif
