/* coll_check.h - shared state of the coll_check program. */
#ifndef HCT_COLL_CHECK_H
#define HCT_COLL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "coll_case.h"
#include "hcomm.h"

typedef struct {
    hcomm_comm_t comm;
    int          rank, nranks;
    int          quick, verbose, extras;
    double       late_peer; /* > 0: only ct_run_late_peer, with this delay (s) */
    size_t       max_count;
    uint64_t     seed;
    int          coll_filter;  /* -1: every collective */
    int          dtype_filter; /* -1: every dtype */
    unsigned     skip_mask;    /* collectives left out (bit per ct_coll_t) */
    long         passed, failed;
    int          broken; /* a call failed: stop issuing (the comm is unusable) */
} ct_ctx_t;

/* A case's seed from its parameters, so filtered runs reproduce full ones. */
uint64_t ct_case_seed(const ct_ctx_t *ctx, const ct_case_t *c);

/* Prepares, issues (blocking), verifies and counts one case. */
void ct_run_case(ct_ctx_t *ctx, ct_case_t *c);

/* Records a failed call: counts it, prints it, marks the communicator broken. */
void ct_call_failed(ct_ctx_t *ctx, const ct_run_t *run, const char *what, hcomm_status_t st);

/* Rank 0 isends to rank 1, then irecvs from it; rank 1 answers late: it
 * receives after ctx->late_peer s and sends after as long again. Run with
 * late_peer < HCOMM_TIMEOUT < 2 * late_peer: the irecv, running beside the
 * isend, must not time out for the time it waited behind it. */
void ct_run_late_peer(ct_ctx_t *ctx);

/* Nonblocking variants, groups, comm_split, barrier timing, API names. */
void ct_run_extras(ct_ctx_t *ctx);

/* Allreduce of random fractions: every rank's result has the same bits. */
void ct_run_identical(ct_ctx_t *ctx);

/* hcomm_comm_split: even/odd colors with reversed keys, and NOCOLOR. */
void ct_run_split(ct_ctx_t *ctx);

/* Ranks that disagree on a pair's count, one side 0: the receiver fails, and
 * no later call takes the stray message. */
void ct_run_disagree(ct_ctx_t *ctx);

/* Send and receive buffers that overlap without being in place: refused on
 * every rank; unused or touching buffers accepted. */
void ct_run_overlap(ct_ctx_t *ctx);

#endif
