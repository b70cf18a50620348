/* slice.h - cutting count elements into nparts near-equal parts, as every
 * rank computes the same cut: the ring's blocks, a compressed allreduce's
 * chunks. Part i has count / nparts + (i < count % nparts) elements. */
#ifndef HC_BASE_SLICE_H
#define HC_BASE_SLICE_H

#include <stddef.h>

/* Where part i starts, in elements. */
static inline size_t hc_part_off(size_t count, int nparts, int i)
{
    size_t q = count / (size_t)nparts, r = count % (size_t)nparts;
    return q * (size_t)i + ((size_t)i < r ? (size_t)i : r);
}

/* Elements of part i. */
static inline size_t hc_part_len(size_t count, int nparts, int i)
{
    return count / (size_t)nparts + ((size_t)i < count % (size_t)nparts);
}

#endif
