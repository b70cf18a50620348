/* coll_disagree.c - coll_check of ranks that disagree on a pair's count: an
 * alltoallv whose rank 0 sends rank 1 an element that rank 1 does not expect,
 * or twice the chunk that rank 1 expects (or one element less), and a send of
 * one element matched by a receive of none.
 * Rank 1 must fail (HCOMM_ERR_PROTOCOL); no later call may take the stray
 * message as its own (a zero-count side used to send or post nothing, and the
 * next operation's result was off with a success status). Each case runs on a
 * copy of the communicator, which every rank then aborts. */
#include <stdio.h>
#include <stdlib.h>

#include "coll_check.h"

static void dis_fail(ct_ctx_t *ctx, const char *what, hcomm_status_t st)
{
    printf("FAIL rank %d: counts disagree: %s (status %s)\n", ctx->rank, what,
           hcomm_status_name(st));
    ctx->failed++;
}

/* After the disagreement: rank 1 failed with PROTOCOL, and an allreduce on
 * the copy fails or, where it succeeds, sums right. */
static void dis_judge(ct_ctx_t *ctx, hcomm_comm_t nc, const char *what, hcomm_status_t st)
{
    int32_t one = 1, sum = 0;
    if (ctx->rank == 1 && st != HCOMM_ERR_PROTOCOL) {
        dis_fail(ctx, what, st);
        return;
    }
    hcomm_status_t s2 = hcomm_allreduce(&one, &sum, 1, HCOMM_INT32, HCOMM_SUM, nc, NULL);
    if (s2 == HCOMM_SUCCESS && sum != ctx->nranks)
        dis_fail(ctx, "an allreduce after it summed wrong, with success", s2);
    else
        ctx->passed++;
}

static hcomm_comm_t dis_copy(ct_ctx_t *ctx)
{
    hcomm_comm_t   nc = NULL;
    hcomm_status_t st = hcomm_comm_split(ctx->comm, 0, 0, &nc);
    if (st != HCOMM_SUCCESS || nc == NULL) {
        dis_fail(ctx, "copying the communicator failed", st);
        ctx->broken = 1;
        return NULL;
    }
    return nc;
}

static void dis_end(ct_ctx_t *ctx, hcomm_comm_t nc)
{
    hcomm_comm_abort(nc);
    hcomm_status_t st = hcomm_barrier(ctx->comm, NULL);
    if (st != HCOMM_SUCCESS) {
        dis_fail(ctx, "a barrier on the parent after aborting the copy failed", st);
        ctx->broken = 1;
    }
}

/* Every pair exchanges one element but 0 -> 1: rank 0 sends `sends`, rank 1
 * expects `expects`. */
static void dis_alltoallv(ct_ctx_t *ctx, size_t sends, size_t expects, const char *what)
{
    size_t       n = (size_t)ctx->nranks, *v = calloc(4 * n, sizeof(*v)), so = 0, ro = 0;
    int32_t     *sb = NULL, *rb = NULL;
    hcomm_comm_t nc;

    if (v == NULL) {
        dis_fail(ctx, "out of memory in the test", HCOMM_ERR_NO_MEMORY);
        return;
    }
    for (size_t p = 0; p < n; p++) {
        v[p]         = ctx->rank == 0 && p == 1 ? sends : 1;
        v[2 * n + p] = ctx->rank == 1 && p == 0 ? expects : 1;
        v[n + p] = so, v[3 * n + p] = ro;
        so += v[p], ro += v[2 * n + p];
    }
    sb = calloc(so, sizeof(*sb)), rb = calloc(ro ? ro : 1, sizeof(*rb));
    if (sb == NULL || rb == NULL)
        dis_fail(ctx, "out of memory in the test", HCOMM_ERR_NO_MEMORY);
    else if ((nc = dis_copy(ctx)) != NULL) {
        hcomm_status_t st =
            hcomm_alltoallv(sb, v, v + n, rb, v + 2 * n, v + 3 * n, HCOMM_INT32, nc, NULL);
        dis_judge(ctx, nc, what, st);
        dis_end(ctx, nc);
    }
    free(v), free(sb), free(rb);
}

/* The pipelining chunk in int32 elements, as HCOMM_CHUNK_BYTES sets it (0:
 * none, any count is one message: 1024 then). */
static size_t dis_chunk_elems(void)
{
    const char *e = getenv("HCOMM_CHUNK_BYTES");
    char       *end;
    size_t      b = 256 << 10;
    if (e != NULL && *e != '\0') {
        b = strtoull(e, &end, 10);
        b <<= *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : 0;
    }
    return b >= 4 ? b / 4 : 1024;
}

/* Rank 0 sends one element to rank 1, which receives none. */
static void dis_p2p(ct_ctx_t *ctx)
{
    int32_t        x = 7;
    hcomm_comm_t   nc;
    hcomm_status_t st = HCOMM_SUCCESS;

    if ((nc = dis_copy(ctx)) == NULL)
        return;
    if (ctx->rank == 0)
        st = hcomm_send(&x, 1, HCOMM_INT32, 1, nc, NULL);
    else if (ctx->rank == 1)
        st = hcomm_recv(&x, 0, HCOMM_INT32, 0, nc, NULL);
    dis_judge(ctx, nc, "a receive of 0 elements matched with a send of 1", st);
    dis_end(ctx, nc);
}

void ct_run_disagree(ct_ctx_t *ctx)
{
    if (ctx->nranks < 2)
        return;
    size_t c = dis_chunk_elems();
    if (!ctx->broken)
        dis_alltoallv(ctx, 1, 0, "alltoallv: rank 1 expecting 0 from rank 0, which sends 1");
    /* near-equal chunks of both counts lined up: the receive matched a prefix */
    if (!ctx->broken)
        dis_alltoallv(ctx, 2 * c, c, "alltoallv: rank 0 sends 2 chunks, rank 1 expects 1");
    if (!ctx->broken)
        dis_alltoallv(ctx, c, c + 1, "alltoallv: rank 0 sends 1 chunk, rank 1 expects 1 more");
    if (!ctx->broken)
        dis_p2p(ctx);
}
