/* hash.h - FNV-1a, 64 bits: identities and keys, never security. */
#ifndef HC_BASE_HASH_H
#define HC_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HC_HASH_FNV_SEED 0xcbf29ce484222325ull

/* h folded with len bytes of p. */
static inline uint64_t hc_hash_bytes(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* h folded with the bytes of the string s, without its terminator. */
static inline uint64_t hc_hash_str(uint64_t h, const char *s)
{
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

#endif
