/* extent.h - byte ranges of the caller's buffers, for the argument checks of
 * the calls that take a send and a receive buffer: those must be the same
 * (in place, as each call defines it) or share no byte. */
#ifndef HC_BASE_EXTENT_H
#define HC_BASE_EXTENT_H

#include <stddef.h>
#include <stdint.h>

/* Whether [a, a + alen) and [b, b + blen) share a byte; an empty range shares
 * none (count 0, where the buffers may be NULL). Free of overflow. */
static inline int hc_extents_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

    if (alen == 0 || blen == 0)
        return 0;
    return x <= y ? y - x < alen : x - y < blen;
}

#endif
