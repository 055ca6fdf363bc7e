/* Hashes (hash.c). */
#ifndef SK_HASH_H
#define SK_HASH_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit FNV-1a: stable across runs and machines (used in object names:
 * never change it). */
uint64_t sk_hash64(const void *p, size_t n);
/* A fast 64-bit hash for in-memory tables, eight bytes per step. Not stable
 * across versions: never persist it. */
uint64_t sk_hash_fast(const void *p, size_t n);

#endif
