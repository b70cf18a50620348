/* coll_split.c - coll_check of hcomm_comm_split and hcomm_comm_shrink: ranks,
 * sizes and order of the new communicators (key reverses the order), NOCOLOR,
 * excluded ranks that never call, bad lists, a rendezvous that cannot start,
 * and collectives on them. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "coll_check.h"

static char split_sentinel;

static void split_fail(ct_ctx_t *ctx, const char *what, int detail, hcomm_status_t st)
{
    printf("FAIL rank %d: comm_split: %s (%d; status %s)\n", ctx->rank, what, detail,
           hcomm_status_name(st));
    ctx->failed++;
}

/* Allgather of the old ranks must list members in new-rank order; an allreduce
 * of old rank + 1 must sum over the members. */
static int check_traffic(ct_ctx_t *ctx, hcomm_comm_t nc, const int *members, int nm)
{
    int32_t        mine = ctx->rank, *all = calloc((size_t)nm, sizeof(*all));
    int64_t        sum = ctx->rank + 1, expect = 0;
    hcomm_status_t st;

    if (all == NULL)
        return -1;
    st = hcomm_allgather(&mine, all, 1, HCOMM_INT32, nc, NULL);
    if (st != HCOMM_SUCCESS) {
        split_fail(ctx, "allgather on the new comm failed", 0, st);
        free(all);
        return -1;
    }
    for (int p = 0; p < nm; p++) {
        expect += members[p] + 1;
        if (all[p] != members[p]) {
            split_fail(ctx, "new rank p holds the wrong old rank; p =", p, st);
            free(all);
            return 1;
        }
    }
    free(all);
    st = hcomm_allreduce(&sum, &sum, 1, HCOMM_INT64, HCOMM_SUM, nc, NULL);
    if (st != HCOMM_SUCCESS) {
        split_fail(ctx, "allreduce on the new comm failed", 0, st);
        return -1;
    }
    if (sum != expect) {
        split_fail(ctx, "allreduce on the new comm: wrong sum", (int)sum, st);
        return 1;
    }
    return 0;
}

/* members: the old ranks of the new comm in their expected new-rank order. */
static void check_newcomm(ct_ctx_t *ctx, hcomm_comm_t nc, const int *members, int nm)
{
    int            nr = -1, ns = -1, want = -1, rc;
    hcomm_status_t st;

    for (int p = 0; p < nm; p++)
        if (members[p] == ctx->rank)
            want = p;
    st = hcomm_comm_rank(nc, &nr);
    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_size(nc, &ns);
    if (st != HCOMM_SUCCESS || nr != want || ns != nm) {
        split_fail(ctx, "wrong rank or size in the new comm; rank", nr, st);
        rc = 1;
    } else {
        rc = check_traffic(ctx, nc, members, nm);
    }
    if (rc < 0) {
        ctx->broken = 1;
        hcomm_comm_abort(nc);
        return;
    }
    if (rc == 0)
        ctx->passed++;
    st = hcomm_comm_destroy(nc);
    if (st != HCOMM_SUCCESS)
        split_fail(ctx, "destroy of the new comm failed", 0, st);
}

/* color = rank % 2, key = nranks - rank: each color in reverse rank order. */
static void split_parity(ct_ctx_t *ctx, int *members)
{
    hcomm_comm_t   nc = (hcomm_comm_t)(void *)&split_sentinel;
    int            n = ctx->nranks, nm = 0;
    hcomm_status_t st = hcomm_comm_split(ctx->comm, ctx->rank % 2, n - ctx->rank, &nc);

    if (st != HCOMM_SUCCESS || nc == NULL || nc == (hcomm_comm_t)(void *)&split_sentinel) {
        split_fail(ctx, "parity split failed or gave no comm", 0, st);
        ctx->broken = st != HCOMM_SUCCESS;
        return;
    }
    for (int r = n - 1; r >= 0; r--)
        if (r % 2 == ctx->rank % 2)
            members[nm++] = r;
    check_newcomm(ctx, nc, members, nm);
}

/* The last rank passes NOCOLOR; the others one color with equal keys (rank order). */
static void split_nocolor(ct_ctx_t *ctx, int *members)
{
    hcomm_comm_t   nc = (hcomm_comm_t)(void *)&split_sentinel;
    int            n = ctx->nranks, last = ctx->rank == n - 1;
    hcomm_status_t st = hcomm_comm_split(ctx->comm, last ? HCOMM_SPLIT_NOCOLOR : 7, 0, &nc);

    if (st != HCOMM_SUCCESS) {
        split_fail(ctx, "NOCOLOR split failed", 0, st);
        ctx->broken = 1;
        return;
    }
    if (last) {
        if (nc != NULL)
            split_fail(ctx, "NOCOLOR did not set *newcomm to NULL", 0, st);
        else
            ctx->passed++;
        return;
    }
    if (nc == NULL || nc == (hcomm_comm_t)(void *)&split_sentinel) {
        split_fail(ctx, "split gave no comm to a colored rank", 0, st);
        return;
    }
    for (int r = 0; r < n - 1; r++)
        members[r] = r;
    check_newcomm(ctx, nc, members, n - 1);
}

/* On a copy of comm, rank 0 broadcasts and destroys its copy at once; the others
 * call the broadcast only 100 ms later: data sent before a peer left must still
 * arrive (destroy is not collective). */
static void split_early_destroy(ct_ctx_t *ctx)
{
    hcomm_comm_t   nc   = NULL;
    int64_t        v[3] = {ctx->rank == 0 ? 0x1234567 : -1, ctx->rank == 0 ? -7 : -1, 42};
    hcomm_status_t st   = hcomm_comm_split(ctx->comm, 0, 0, &nc), st2;

    if (st != HCOMM_SUCCESS || nc == NULL) {
        split_fail(ctx, "copy (one color) failed", 0, st);
        ctx->broken = 1;
        return;
    }
    if (ctx->rank != 0) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    st  = hcomm_broadcast(v, v, 3, HCOMM_INT64, 0, nc, NULL);
    st2 = hcomm_comm_destroy(nc);
    if (st != HCOMM_SUCCESS || st2 != HCOMM_SUCCESS)
        split_fail(ctx, "broadcast from a root that destroyed its comm at once failed", 0,
                   st ? st : st2);
    else if (v[0] != 0x1234567 || v[1] != -7 || v[2] != 42)
        split_fail(ctx, "broadcast from a root that left: wrong data; v[0] =", (int)v[0], st);
    else
        ctx->passed++;
    /* keep the next test from overlapping a slow rank's destroy */
    if (hcomm_barrier(ctx->comm, NULL) != HCOMM_SUCCESS)
        ctx->broken = 1;
}

/* Rank 0, the first of the one color, cannot start the new rendezvous (no
 * file descriptor left): it fails with its own error, and the others with
 * HCOMM_ERR_REMOTE naming it (they were refused its all-zero id as if it were
 * the user's: HCOMM_ERR_INVALID_ARG, "not made by hcomm_get_unique_id"). */
static void split_root_fails(ct_ctx_t *ctx)
{
    hcomm_comm_t   nc = NULL;
    struct rlimit  was, low;
    int            fill[256], nfill = 0;
    hcomm_status_t st;

    if (ctx->rank == 0) {
        if (getrlimit(RLIMIT_NOFILE, &was) != 0) {
            ctx->broken = 1;
            return;
        }
        low = was;
        if (low.rlim_cur > 256)
            low.rlim_cur = 256;
        (void)setrlimit(RLIMIT_NOFILE, &low);
        while (nfill < 256 && (fill[nfill] = open("/dev/null", O_RDONLY)) >= 0)
            nfill++;
    }
    st = hcomm_comm_split(ctx->comm, 0, 0, &nc);
    if (ctx->rank == 0) {
        while (nfill > 0)
            close(fill[--nfill]);
        (void)setrlimit(RLIMIT_NOFILE, &was);
    }
    if (st == HCOMM_SUCCESS) {
        split_fail(ctx, "split succeeded with no rendezvous", 0, st);
        hcomm_comm_destroy(nc);
    } else if (ctx->rank != 0 && st != HCOMM_ERR_REMOTE)
        split_fail(ctx, "a failed rendezvous of rank 0: not HCOMM_ERR_REMOTE", 0, st);
    else
        ctx->passed++;
    if (hcomm_barrier(ctx->comm, NULL) != HCOMM_SUCCESS)
        ctx->broken = 1;
}

/* The odd ranks are excluded and never call; the even ones keep their order.
 * Bad lists, and a list naming the caller, fail locally on every rank. */
static void shrink_odd(ct_ctx_t *ctx, int *members)
{
    int            n = ctx->nranks, nex = 0, nm = 0, twice[2] = {0, 0}, range = n;
    int            self = ctx->rank;
    hcomm_comm_t   nc   = NULL;
    hcomm_status_t st;

    if (hcomm_comm_shrink(ctx->comm, &range, 1, &nc) != HCOMM_ERR_INVALID_ARG ||
        hcomm_comm_shrink(ctx->comm, twice, 2, &nc) != HCOMM_ERR_INVALID_ARG ||
        hcomm_comm_shrink(ctx->comm, NULL, -1, &nc) != HCOMM_ERR_INVALID_ARG ||
        hcomm_comm_shrink(ctx->comm, &self, 1, &nc) != HCOMM_ERR_INVALID_USAGE || nc != NULL) {
        split_fail(ctx, "shrink accepted a bad exclusion list", 0, HCOMM_SUCCESS);
        return;
    }
    int *ex = calloc((size_t)n, sizeof(*ex));
    if (ex == NULL) {
        ctx->broken = 1;
        return;
    }
    for (int r = 0; r < n; r++) {
        if (r % 2)
            ex[nex++] = r;
        else
            members[nm++] = r;
    }
    if (ctx->rank % 2 == 0) { /* the odd ones do not call */
        st = hcomm_comm_shrink(ctx->comm, ex, nex, &nc);
        if (st != HCOMM_SUCCESS || nc == NULL) {
            split_fail(ctx, "shrink failed", 0, st);
            ctx->broken = 1;
        } else {
            check_newcomm(ctx, nc, members, nm);
        }
    }
    free(ex);
    /* the excluded ranks are here at once: keep them out of the next test */
    if (hcomm_barrier(ctx->comm, NULL) != HCOMM_SUCCESS)
        ctx->broken = 1;
}

void ct_run_split(ct_ctx_t *ctx)
{
    int      *members = calloc((size_t)ctx->nranks, sizeof(*members));
    ct_case_t after   = {CT_ALLREDUCE, HCOMM_INT32, HCOMM_SUM, 1023, 0, -1, 0};

    if (members == NULL) {
        split_fail(ctx, "out of memory in the test", 0, HCOMM_ERR_NO_MEMORY);
        ctx->broken = 1;
        return;
    }
    if (!ctx->broken)
        split_parity(ctx, members);
    if (!ctx->broken)
        split_nocolor(ctx, members);
    if (!ctx->broken && ctx->nranks > 1)
        split_early_destroy(ctx);
    if (!ctx->broken)
        shrink_odd(ctx, members);
    if (!ctx->broken && ctx->nranks > 1)
        split_root_fails(ctx);
    free(members);
    /* the parent communicator still works */
    after.count = 1021;
    ct_run_case(ctx, &after);
}
