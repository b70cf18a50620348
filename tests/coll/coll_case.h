/* coll_case.h - one coll_check case: buffers with guard bytes, the call
 * (blocking or nonblocking) and the verification against the reference. */
#ifndef HCT_COLL_CASE_H
#define HCT_COLL_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"

typedef enum {
    CT_ALLREDUCE,
    CT_BROADCAST,
    CT_REDUCE,
    CT_ALLGATHER,
    CT_REDUCE_SCATTER,
    CT_ALLTOALL,
    CT_SENDRECV, /* ring: send to both neighbours, receive from both, in one group */
    CT_BARRIER,
    CT_NCOLL
} ct_coll_t;

typedef struct {
    ct_coll_t     coll;
    hcomm_dtype_t dt;
    hcomm_op_t    op;    /* HCOMM_SUM where the collective does not reduce */
    size_t        count; /* elements per rank block, as passed to the call */
    int           inplace;
    int           root; /* -1 where the collective has no root */
    uint64_t      seed;
} ct_case_t;

/* A guarded buffer: GUARD bytes of a pattern on either side of the payload. */
typedef struct {
    unsigned char *base;
    size_t         bytes;
} ct_gbuf_t;

typedef struct {
    ct_case_t       c;
    int             rank, nranks;
    ct_gbuf_t       g[4];              /* allocations (unused ones have base NULL) */
    void           *send[2], *recv[2]; /* what is passed to the library */
    void           *send_copy[2];      /* out of place: the send buffers before the call */
    size_t          send_bytes[2];
    hcomm_request_t req;
    const char     *label; /* "" or a prefix such as "nonblocking " for reports */
} ct_run_t;

const char *ct_coll_name(ct_coll_t coll);
int         ct_coll_from_name(const char *name, ct_coll_t *coll);
int         ct_coll_reduces(ct_coll_t coll);
int         ct_coll_rooted(ct_coll_t coll);

/* Allocates and fills the buffers of case c on rank of nranks; 0 or -1. */
int ct_prepare(ct_run_t *run, const ct_case_t *c, int rank, int nranks);
/* Issues the case as a blocking call (send/recv inside a group). */
hcomm_status_t ct_issue(ct_run_t *run, hcomm_comm_t comm);
/* Issues the case as a nonblocking call into run->req (not CT_SENDRECV). */
hcomm_status_t ct_issue_nb(ct_run_t *run, hcomm_comm_t comm);
/* Checks guards, untouched send buffers and the result; prints one FAIL line
 * for the first problem and returns 1, else 0. */
int ct_verify(ct_run_t *run);
/* Prints one FAIL line for this case with a free-form reason. */
void ct_report(const ct_run_t *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ct_release(ct_run_t *run);

#endif
