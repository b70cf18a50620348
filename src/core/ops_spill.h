/* ops_spill.h - where a trace keeps its records between flush points:
 * records coded against the one before (a run of like blocking calls costs 5
 * bytes each), and whole records for those the code does not carry (one
 * stamped by the coarse clock, one that never started). Both stay in memory
 * (32 MiB of coded ones by default) and go to two unlinked files beside the
 * trace past that: a put costs the operation's path its coding, and now and
 * then a page fault, where a file system's buffered write cost more. */
#ifndef HC_CORE_OPS_SPILL_H
#define HC_CORE_OPS_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "core/op_rec.h"

/* The coded record before, which the next one is coded against. */
typedef struct hc_spill_prev {
    uint64_t start, count, bytes, sent;
    int32_t  peer, status;
    uint32_t nsteps;
    uint8_t  coll, dtype, algo, clock;
} hc_spill_prev_t;

/* What a record does, as it lies in hc_op_rec_t from count to clock. */
typedef struct {
    uint8_t bytes[42];
} hc_spill_what_t;

typedef struct hc_spill {
    int             fd_small, fd_full;  /* -1: not made yet */
    uint64_t        nsmall, nfull;      /* records in each */
    uint64_t        rd_small, rd_full;  /* read back so far */
    uint64_t        wr_bytes;           /* the coded file's length */
    uint64_t        rd_bytes;           /* read so far of the file, then of code */
    hc_spill_prev_t put_prev, get_prev; /* the coder's and the reader's */
    hc_spill_what_t what;               /* the coder's: what the one before does */
    int             what_ok;            /* ... once there is one */
    uint8_t        *code;               /* coded records not written yet */
    size_t          fill;               /* ... how many bytes of them */
    hc_op_rec_t    *full;               /* whole ones not written yet */
    uint32_t        nfull_buf;          /* ... how many */
    uint8_t        *rbuf;               /* a get's coded records from the file */
    uint32_t        cap;                /* records a get may return */
    size_t          mem;                /* code's room */
} hc_spill_t;

/* Room for gets of up to cap records, and for mem_bytes of coded ones before
 * they go to the file (0: 32 MiB); 0, or -1 when out of memory. */
int  hc_spill_init(hc_spill_t *s, uint32_t cap, size_t mem_bytes);
void hc_spill_fini(hc_spill_t *s);

/* Appends record r, the next in number (the files are made in dir at the
 * first put); or a gap: no record for the next number. 0, or -1 (errno set). */
int hc_spill_put(hc_spill_t *s, const char *dir, const hc_op_rec_t *r);
int hc_spill_gap(hc_spill_t *s, const char *dir);

/* Reads the next records back, in order, numbering them from *seq: how many
 * it wrote to out (at most max; 0 when all are read), or -1 on a failed or
 * short read. What comes back is the record as put but for op and cseq (the
 * trace shows neither) where it was coded; a gap comes back as a record of
 * its number alone in state HC_OP_QUEUED. */
long hc_spill_get(hc_spill_t *s, hc_op_rec_t *out, size_t max, uint64_t *seq);

/* Empties both files. */
void hc_spill_reset(hc_spill_t *s);

#endif
