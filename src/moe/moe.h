/* moe.h - the MoE dispatch/combine handle (include/hcomm_moe.h), shared by
 * moe.c (handle, buffers), moe_dispatch.c and moe_combine.c.
 *
 * A dispatched copy of a token (one per (token, rank) pair) travels as one
 * row: int32 token index, k int32 local expert indices (-1: the slot's expert
 * is elsewhere or absent), k float32 weights, then the token's hidden x dtype
 * bytes. Rows are read and written with memcpy: they need not be aligned. */
#ifndef HC_MOE_MOE_H
#define HC_MOE_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm_moe.h"

/* A buffer that only grows; its contents are not kept across a growth. */
typedef struct {
    void  *p;
    size_t cap;
} hc_moe_buf_t;

struct hcomm_moe {
    hcomm_comm_t  comm;
    int           rank, nranks, nexperts, topk, nlocal;
    hcomm_dtype_t dtype;
    size_t        hidden, esize;
    size_t        tok_bytes, hdr_bytes, row_bytes;
    int32_t      *expert_rank;  /* [E] */
    int32_t      *expert_local; /* [E]: index among its rank's experts */
    int32_t      *local_ids;    /* [L] */
    /* per peer, in rows: sent to p at sdispl[p], received from p at rdispl[p] */
    size_t   *scount, *sdispl, *rcount, *rdispl;
    size_t   *bytes[4]; /* byte counts/displacements for one alltoallv */
    uint64_t *cnt_out, *cnt_in;     /* [2n]: rows, then (row, expert) pairs, per peer */
    size_t   *mark, *row_of;        /* [n]: packing scratch */
    size_t   *lcount, *loff, *lcur; /* [L] */
    /* the last dispatch */
    int               have_layout;
    size_t            ntokens, nsend, nrecv, nrows;
    hc_moe_buf_t      sbuf, rbuf; /* wire rows; combine reuses them */
    hc_moe_buf_t      send_tok;   /* int32 [nsend]: token of each sent row */
    hc_moe_buf_t      rowmap;     /* size_t [nrecv x k]: expert row of (row, slot) */
    hc_moe_buf_t      tokens, src_rank, src_index, slot, weight; /* [nrows] */
    hc_moe_buf_t      facc; /* float [ntokens x hidden]: combine of half types */
    float            *frow; /* [hidden] */
    hcomm_moe_stats_t stats;
};

/* Makes b hold at least bytes; 0, or -1 (logged) when out of memory. */
int hc_moe_grow(hc_moe_buf_t *b, size_t bytes, const char *what);

/* Offsets of a row's fields. */
static inline size_t hc_moe_local_off(int j)
{
    return 4 + 4 * (size_t)j;
}

static inline size_t hc_moe_weight_off(const struct hcomm_moe *m, int j)
{
    return 4 + 4 * (size_t)m->topk + 4 * (size_t)j;
}

#endif
