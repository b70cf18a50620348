/* ops_spill.h - where a trace keeps its records between flush points: two
 * unlinked files beside the trace, one of 32-byte packed records and one of
 * whole records for those whose numbers do not fit the packed form (a group,
 * an operation of 1.4 s or more, ...). Writing costs the operations' path
 * about what the bytes cost to land in the page cache, so fewer is faster. */
#ifndef HC_CORE_OPS_SPILL_H
#define HC_CORE_OPS_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "core/op_rec.h"

typedef struct hc_spill {
    int          fd_small, fd_full; /* -1: not made yet */
    uint64_t     nsmall, nfull;     /* records in each */
    uint64_t     rd_small, rd_full; /* read back so far */
    void        *pack;              /* a half's packed records, then */
    hc_op_rec_t *full;              /* its whole ones */
    uint32_t     cap;               /* records a put may carry */
} hc_spill_t;

/* Room for puts of up to cap records; 0, or -1 when out of memory. */
int  hc_spill_init(hc_spill_t *s, uint32_t cap);
void hc_spill_fini(hc_spill_t *s);

/* Appends the records seq lo..hi (at most cap) of ring (index seq & mask);
 * the files are made in dir at the first put. 0, or -1 (errno set). */
int hc_spill_put(hc_spill_t *s, const char *dir, const hc_op_rec_t *ring, uint32_t mask,
                 uint64_t lo, uint64_t hi);

/* Reads the next records back, in order, numbering them from *seq: how many
 * it wrote to out (at most max; 0 when all are read), or -1 on a failed read. */
long hc_spill_get(hc_spill_t *s, hc_op_rec_t *out, size_t max, uint64_t *seq);

/* Empties both files. */
void hc_spill_reset(hc_spill_t *s);

#endif
