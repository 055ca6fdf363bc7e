/* The ledger file of versions before sorted runs (ledger_legacy.c). */
#ifndef SK_STATE_LEDGER_LEGACY_H
#define SK_STATE_LEDGER_LEGACY_H

#include <stdint.h>
#include <stdio.h>

#include "state/ledger_run.h"

/* Opens the old ledger file at path and reads its header: *out (the
 * caller fcloses it) stands at its first record. SKIPPR_NOENT when there
 * is none, SKIPPR_CORRUPT (logged) when it is damaged. */
int sk_legacy_open(const char *path, FILE **out, uint64_t *next_slice,
                   uint64_t *count);

/* Streams its count records (u32 length, payload, u32 CRC32C; payload u16
 * id length, id, u16 version length, version, i64 size, i64 offset, u32
 * flags) from f into w. */
int sk_legacy_copy(FILE *f, const char *path, uint64_t count,
                   sk_run_writer *w);

#endif
