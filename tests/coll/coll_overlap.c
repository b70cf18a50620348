/* coll_overlap.c - coll_check of buffers that overlap without being in place
 * (NCCL's definition: an allgather's sendbuf is rank's block of its recvbuf,
 * a reduce_scatter's recvbuf rank's block of its sendbuf, otherwise the same
 * pointer). Every rank passes such buffers, so every rank must get
 * HCOMM_ERR_INVALID_ARG before anything moves (once they were accepted and
 * most elements came out wrong), and the communicator stays usable. Buffers
 * a rank does not use (a broadcast's sendbuf, a reduce's recvbuf off the
 * root) may overlap the other; blocks of one allocation that only touch are
 * disjoint. tests/fault/bad_overlap.c checks the log lines on one rank. */
#include <stdio.h>
#include <stdlib.h>

#include "coll_check.h"

#define OV_N 64 /* elements per block */

static void ov_expect(ct_ctx_t *ctx, const char *what, hcomm_status_t got, hcomm_status_t want)
{
    if (got == want) {
        ctx->passed++;
        return;
    }
    printf("FAIL rank %d: overlap: %s returned %s, expected %s\n", ctx->rank, what,
           hcomm_status_name(got), hcomm_status_name(want));
    ctx->failed++;
    if (want == HCOMM_SUCCESS) /* the peers went ahead without this rank */
        ctx->broken = 1;
}

static void ov_data(ct_ctx_t *ctx, const char *what, int ok)
{
    if (ok) {
        ctx->passed++;
    } else {
        printf("FAIL rank %d: overlap: %s: wrong result\n", ctx->rank, what);
        ctx->failed++;
    }
}

/* Every rank's buffers one element off in place: refused everywhere. */
static void ov_refused(ct_ctx_t *ctx, float *b)
{
    size_t          r = (size_t)ctx->rank, nr = (size_t)ctx->nranks;
    size_t         *v   = malloc(5 * nr * sizeof(*v)); /* counts, displacements; received */
    hcomm_comm_t    c   = ctx->comm;
    hcomm_request_t req = NULL;

    ov_expect(ctx, "allreduce(b, b + 1)",
              hcomm_allreduce(b, b + 1, OV_N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
              HCOMM_ERR_INVALID_ARG);
    ov_expect(ctx, "allgather(recv + rank x n + 1, recv)",
              hcomm_allgather(b + r * OV_N + 1, b, OV_N, HCOMM_FLOAT32, c, NULL),
              HCOMM_ERR_INVALID_ARG);
    ov_expect(ctx, "reduce_scatter(send, send + rank x n + 1)",
              hcomm_reduce_scatter(b, b + r * OV_N + 1, OV_N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
              HCOMM_ERR_INVALID_ARG);
    ov_expect(ctx, "alltoall(b, b + 1)", hcomm_alltoall(b, b + 1, OV_N, HCOMM_FLOAT32, c, NULL),
              HCOMM_ERR_INVALID_ARG);
    ov_expect(ctx, "iallgather(recv + rank x n + 1, recv)",
              hcomm_iallgather(b + r * OV_N + 1, b, OV_N, HCOMM_FLOAT32, c, &req),
              HCOMM_ERR_INVALID_ARG);
    ov_data(ctx, "the refused iallgather set *req", req == NULL);
    if (req != NULL) /* it was accepted: let it finish before the buffer goes */
        hcomm_wait(&req);
    if (v == NULL) {
        ov_data(ctx, "out of memory in the test", 0);
        return;
    }
    for (size_t p = 0; p < nr; p++)
        v[p] = v[2 * nr + p] = OV_N, v[nr + p] = v[3 * nr + p] = p * OV_N;
    ov_expect(ctx, "alltoallv(b, b + 1)",
              hcomm_alltoallv(b, v, v + nr, b + 1, v + 2 * nr, v + 3 * nr, HCOMM_FLOAT32, c, NULL),
              HCOMM_ERR_INVALID_ARG);
    ov_expect(ctx, "alltoallv_dynamic(b, b + 1)",
              hcomm_alltoallv_dynamic(b, v, v + nr, b + 1, (nr + 1) * OV_N, v + 4 * nr,
                                      HCOMM_FLOAT32, c, NULL),
              HCOMM_ERR_INVALID_ARG);
    /* receive blocks of two peers sharing an element, in descending order (the
     * sorted check) and in rank order (the one-pass check) */
    for (size_t p = 0; p < nr; p++)
        v[3 * nr + p] = (nr - 1 - p) * OV_N;
    if (nr > 1) {
        v[3 * nr + nr - 2] -= 1;
        ov_expect(ctx, "alltoallv, two receive blocks share an element (descending)",
                  hcomm_alltoallv(b, v, v + nr, b + (nr + 1) * OV_N, v + 2 * nr, v + 3 * nr,
                                  HCOMM_FLOAT32, c, NULL),
                  HCOMM_ERR_INVALID_ARG);
        for (size_t p = 0; p < nr; p++)
            v[3 * nr + p] = p * OV_N - (p == nr - 1);
        ov_expect(ctx, "alltoallv, two receive blocks share an element (rank order)",
                  hcomm_alltoallv(b, v, v + nr, b + (nr + 1) * OV_N, v + 2 * nr, v + 3 * nr,
                                  HCOMM_FLOAT32, c, NULL),
                  HCOMM_ERR_INVALID_ARG);
    }
    free(v);
}

/* A broadcast's sendbuf is read on the root only, a reduce's recvbuf written
 * on the root only: elsewhere they may overlap the other buffer. */
static void ov_unused_buffers(ct_ctx_t *ctx, float *b)
{
    float       *out = b + 2 * OV_N;
    hcomm_comm_t c   = ctx->comm;
    int          ok = 1, root = ctx->nranks - 1;

    for (int i = 0; i < OV_N; i++)
        b[i] = ctx->rank == 0 ? (float)(i + 7) : -1.0f, out[i] = -2.0f;
    if (ctx->rank == 0) /* the root: disjoint */
        ov_expect(ctx, "broadcast on the root",
                  hcomm_broadcast(b, out, OV_N, HCOMM_FLOAT32, 0, c, NULL), HCOMM_SUCCESS);
    else
        ov_expect(ctx, "broadcast(out + 1, out) off the root",
                  hcomm_broadcast(out + 1, out, OV_N, HCOMM_FLOAT32, 0, c, NULL), HCOMM_SUCCESS);
    for (int i = 0; i < OV_N; i++)
        ok &= out[i] == (float)(i + 7);
    ov_data(ctx, "broadcast with an unused overlapping sendbuf", ok);
    if (ctx->broken)
        return;
    for (int i = 0; i < OV_N; i++)
        b[i] = (float)(i + ctx->rank), out[i] = -2.0f;
    float *recv = ctx->rank == root ? out : b + 1;
    ov_expect(ctx, "reduce with an unused overlapping recvbuf off the root",
              hcomm_reduce(b, recv, OV_N, HCOMM_FLOAT32, HCOMM_SUM, root, c, NULL), HCOMM_SUCCESS);
    float base = (float)(ctx->nranks * (ctx->nranks - 1) / 2);
    ok         = 1;
    for (int i = 0; ctx->rank == root && i < OV_N; i++)
        ok &= out[i] == (float)ctx->nranks * (float)i + base;
    ov_data(ctx, "reduce with an unused overlapping recvbuf off the root", ok);
}

/* Blocks of one allocation that only touch: valid, and the results right. */
static void ov_touching(ct_ctx_t *ctx, float *b)
{
    size_t       nr = (size_t)ctx->nranks, r = (size_t)ctx->rank;
    size_t      *v    = malloc(3 * nr * sizeof(*v));
    hcomm_comm_t c    = ctx->comm;
    float        sum0 = (float)(ctx->nranks * (ctx->nranks - 1) / 2);
    int          ok   = 1;

    for (int i = 0; i < OV_N; i++)
        b[i] = (float)(i + ctx->rank);
    ov_expect(ctx, "allreduce(b, b + n)",
              hcomm_allreduce(b, b + OV_N, OV_N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    for (int i = 0; i < OV_N; i++)
        ok &= b[OV_N + i] == (float)ctx->nranks * (float)i + sum0;
    ov_data(ctx, "allreduce(b, b + n)", ok);
    if (v == NULL || ctx->broken) {
        if (v == NULL)
            ov_data(ctx, "out of memory in the test", 0);
        free(v);
        return;
    }
    /* alltoallv: blocks sent from b[0, nr n), received into b[nr n, 2 nr n),
     * the receive blocks touching in descending order */
    for (size_t p = 0; p < nr; p++) {
        v[p] = OV_N, v[nr + p] = p * OV_N, v[2 * nr + p] = (nr - 1 - p) * OV_N;
        for (int i = 0; i < OV_N; i++)
            b[p * OV_N + (size_t)i] = (float)(r * 10000 + p * 100 + (size_t)i);
    }
    ov_expect(ctx, "alltoallv(b, b + nranks x n)",
              hcomm_alltoallv(b, v, v + nr, b + nr * OV_N, v, v + 2 * nr, HCOMM_FLOAT32, c, NULL),
              HCOMM_SUCCESS);
    ok = 1;
    for (size_t q = 0; q < nr; q++)
        for (int i = 0; i < OV_N; i++)
            ok &=
                b[(nr + nr - 1 - q) * OV_N + (size_t)i] == (float)(q * 10000 + r * 100 + (size_t)i);
    ov_data(ctx, "alltoallv(b, b + nranks x n)", ok);
    free(v);
}

void ct_run_overlap(ct_ctx_t *ctx)
{
    size_t n = 2 * ((size_t)ctx->nranks + 2) * OV_N;
    float *b = calloc(n, sizeof(*b));

    if (b == NULL) {
        ov_data(ctx, "out of memory in the test", 0);
        return;
    }
    ov_refused(ctx, b);
    if (!ctx->broken)
        ov_unused_buffers(ctx, b);
    if (!ctx->broken)
        ov_touching(ctx, b);
    free(b);
}
