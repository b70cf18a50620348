/* sched.h - a schedule: what one rank does for one collective, as data.
 *
 * Steps work on logical peers (ranks of the communicator) and on slices of
 * numbered buffers (HC_BUF_SEND, HC_BUF_RECV, HC_BUF_TMP for a single op; group
 * operations renumber them). The executor (core/exec.c) posts a step once its
 * dependencies are done, and keeps the order of sends to one peer, and of
 * receives from one peer, as they appear in the step list: the builders make
 * every rank's sends to p match p's receives, in order and length. */
#ifndef HC_ALGO_SCHED_H
#define HC_ALGO_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"

typedef enum {
    HC_STEP_SEND = 0,    /* send len bytes of src to peer */
    HC_STEP_RECV,        /* receive len bytes from peer into dst */
    HC_STEP_RECV_REDUCE, /* dst = src OP (len bytes received from peer) */
    HC_STEP_COPY,        /* dst = src (skipped when they are the same memory) */
    HC_STEP_REDUCE,      /* dst = src OP src2, local */
    HC_STEP_DIV,         /* dst /= nranks (avg); runs after every other step */
    HC_STEP_KIND_COUNT
} hc_step_kind_t;

enum { HC_BUF_SEND = 0, HC_BUF_RECV = 1, HC_BUF_TMP = 2, HC_BUF_PER_OP = 3 };

#define HC_STEP_NODEP (-1)

typedef struct hc_slice {
    uint32_t buf; /* buffer index */
    size_t   off; /* byte offset */
} hc_slice_t;

typedef struct hc_step {
    uint8_t    kind;   /* hc_step_kind_t */
    uint8_t    dtype;  /* hcomm_dtype_t, for reducing steps */
    uint8_t    op;     /* hcomm_op_t, for reducing steps (AVG reduces as SUM) */
    int32_t    peer;   /* rank for SEND/RECV/RECV_REDUCE; divisor for DIV */
    size_t     len;    /* bytes */
    hc_slice_t src, src2, dst;
    int32_t    dep[2]; /* indices of earlier steps that must be done first, or HC_STEP_NODEP */
    uint32_t   pseq;   /* filled by hc_sched_finalize: index among this peer's sends (or recvs) */
} hc_step_t;

typedef struct hc_sched {
    hc_step_t *steps;
    uint32_t   nsteps, cap;
    uint32_t   nbufs;     /* buffers referenced: HC_BUF_PER_OP per merged op */
    uint32_t   ndiv;      /* DIV steps, counted by hc_sched_finalize */
    size_t     tmp_bytes; /* scratch the executor provides as HC_BUF_TMP */
    int        nranks, rank;
    int32_t   *peers;     /* filled by hc_sched_finalize: the ranks messages go to or come from */
    uint32_t   npeers;
    /* what it does, for the operation records (core/ops.h): set by
     * hc_algo_build from the call; a fused group's by the group */
    uint8_t  algo;  /* the hc_algo_t that built it; 0: none (a fused group) */
    uint8_t  coll;  /* hc_coll_t */
    uint8_t  dtype; /* hcomm_dtype_t */
    uint8_t  op;    /* hcomm_op_t */
    int32_t  peer;  /* send, recv: the peer; broadcast, reduce: the root; else -1 */
    uint64_t count; /* elements as the call gave them */
    uint64_t bytes; /* count x the datatype's size */
} hc_sched_t;

hc_sched_t *hc_sched_create(int nranks, int rank);
void        hc_sched_destroy(hc_sched_t *s);

/* Appends a step; returns its index, or -1 when out of memory (the schedule
 * then remembers the failure and hc_sched_finalize returns HCOMM_ERR_NO_MEMORY). */
int hc_sched_add(hc_sched_t *s, const hc_step_t *step);

/* Helpers that fill a step and append it. */
int hc_sched_send(hc_sched_t *s, int peer, hc_slice_t src, size_t len, int dep0, int dep1);
int hc_sched_recv(hc_sched_t *s, int peer, hc_slice_t dst, size_t len, int dep0, int dep1);
int hc_sched_recv_reduce(hc_sched_t *s, int peer, hc_slice_t dst, hc_slice_t src, size_t len,
                         hcomm_dtype_t dt, hcomm_op_t op, int dep0, int dep1);
int hc_sched_copy(hc_sched_t *s, hc_slice_t dst, hc_slice_t src, size_t len, int dep0,
                  int dep1);
int hc_sched_reduce(hc_sched_t *s, hc_slice_t dst, hc_slice_t src, hc_slice_t src2, size_t len,
                    hcomm_dtype_t dt, hcomm_op_t op, int dep0, int dep1);
int hc_sched_div(hc_sched_t *s, hc_slice_t dst, size_t len, hcomm_dtype_t dt, int divisor);

/* Computes pseq for every step and the list of peers; checks deps point backwards. */
hcomm_status_t hc_sched_finalize(hc_sched_t *s);

/* Appends src's steps to dst with src's buffers renumbered after dst's, and
 * dependencies shifted. Used to fuse a group into one operation. */
hcomm_status_t hc_sched_append(hc_sched_t *dst, const hc_sched_t *src);

static inline hc_slice_t hc_slice(uint32_t buf, size_t off)
{
    hc_slice_t sl = {buf, off};
    return sl;
}

#endif
