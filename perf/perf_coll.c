/*
 * perf_coll.c - the benchmarked collectives: counts and bandwidth factors as
 * nccl-tests defines them, buffers for both placements, and the calls.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#include "perf.h"

#include <stdlib.h>

static const char *const coll_names[PERF_COLL_COUNT] = {
    [PERF_ALL_REDUCE]     = "all_reduce",
    [PERF_ALL_GATHER]     = "all_gather",
    [PERF_REDUCE_SCATTER] = "reduce_scatter",
    [PERF_BROADCAST]      = "broadcast",
    [PERF_REDUCE]         = "reduce",
    [PERF_ALLTOALL]       = "alltoall",
    [PERF_SENDRECV]       = "sendrecv",
    [PERF_ALLTOALLV]      = "alltoallv",
    [PERF_MOE_DISPATCH]   = "moe_dispatch",
    [PERF_MOE_COMBINE]    = "moe_combine",
};

const char *perf_coll_name(perf_coll_t coll)
{
    return coll < PERF_COLL_COUNT ? coll_names[coll] : "?";
}

int perf_coll_has_op(perf_coll_t coll)
{
    return coll == PERF_ALL_REDUCE || coll == PERF_REDUCE_SCATTER || coll == PERF_REDUCE;
}

int perf_coll_has_root(perf_coll_t coll)
{
    return coll == PERF_BROADCAST || coll == PERF_REDUCE;
}

/* hcomm defines no in-place send/recv: a rank's outgoing data could be
 * overwritten by its incoming data. */
int perf_coll_has_inplace(perf_coll_t coll)
{
    return coll != PERF_SENDRECV && coll != PERF_ALLTOALLV;
}

double perf_coll_bus_factor(perf_coll_t coll, int nranks)
{
    double n = (double)nranks;

    switch (coll) {
    case PERF_ALL_REDUCE:
        return 2.0 * (n - 1) / n;
    case PERF_ALL_GATHER:
    case PERF_REDUCE_SCATTER:
    case PERF_ALLTOALL:
    case PERF_ALLTOALLV:
        return (n - 1) / n;
    default:
        return 1.0;
    }
}

void perf_coll_elems(perf_coll_t coll, size_t param, int nranks, perf_counts_t *c)
{
    size_t n = (size_t)nranks;

    c->param      = param;
    c->send_elems = param;
    c->recv_elems = param;
    if (coll == PERF_ALL_GATHER || coll == PERF_ALLTOALL)
        c->recv_elems = param * n;
    if (coll == PERF_REDUCE_SCATTER || coll == PERF_ALLTOALL)
        c->send_elems = param * n;
}

void perf_coll_counts(perf_coll_t coll, size_t bytes, size_t wsize, int nranks, perf_counts_t *c)
{
    size_t count = bytes / wsize;

    /* Per-rank blocks: the size is rounded down to a multiple of nranks elements. */
    if (coll == PERF_ALL_GATHER || coll == PERF_REDUCE_SCATTER || coll == PERF_ALLTOALL)
        count /= (size_t)nranks;
    perf_coll_elems(coll, count, nranks, c);
}

static uint64_t next_rand(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
    x          = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x          = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void shuffle(int *perm, int n, uint64_t *rng)
{
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(next_rand(rng) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/*
 * alltoallv counts of a size, the same on every rank: param elements cut into
 * nranks random parts (about one in four empty), and rank r sends rank p part
 * (pa[p] - pb[r]) mod n for two random permutations pa, pb: a Latin square, so
 * every rank sends param elements and receives param elements, from blocks of
 * uneven sizes. ctx->a2av: sendcounts, sdispls, recvcounts, rdispls, and the
 * offset in each sender's buffer of the block it sends here.
 */
int perf_coll_a2av_prepare(perf_ctx_t *ctx, size_t param)
{
    int       n = ctx->nranks, r = ctx->rank;
    uint64_t  rng = ctx->args->seed * 0x2545f4914f6cdd1dull + param, wsum = 0;
    size_t   *v = ctx->a2av, left = param;
    uint64_t *w    = malloc((size_t)n * sizeof(*w));
    int      *perm = malloc(2 * (size_t)n * sizeof(*perm));

    if (v == NULL)
        v = ctx->a2av = malloc(6 * (size_t)n * sizeof(*v));
    if (v == NULL || w == NULL || perm == NULL) {
        free(w);
        free(perm);
        return -1;
    }
    size_t *part = v + 5 * n;
    for (int i = 0; i < n; i++) {
        uint64_t x = next_rand(&rng);
        w[i]       = x % 4 == 0 && i != 0 ? 0 : 1 + (x >> 8) % 1000;
        wsum += w[i];
    }
    for (int i = n - 1; i >= 0; i--) { /* the rounding remainder goes to part 0 */
        part[i] = i == 0 ? left : (size_t)((double)param * (double)w[i] / (double)wsum);
        left -= part[i];
    }
    shuffle(perm, n, &rng);
    shuffle(perm + n, n, &rng);
#define PERF_A2AV_CNT(from, to) part[(perm[to] - perm[n + (from)] + n) % n]
    size_t so = 0, ro = 0;
    for (int p = 0; p < n; p++) {
        v[p]         = PERF_A2AV_CNT(r, p);
        v[n + p]     = so;
        v[2 * n + p] = PERF_A2AV_CNT(p, r);
        v[3 * n + p] = ro;
        so += v[p];
        ro += v[2 * n + p];
        v[4 * n + p] = 0; /* p's buffer: the blocks it sends ranks below r come first */
        for (int q = 0; q < r; q++)
            v[4 * n + p] += PERF_A2AV_CNT(p, q);
    }
#undef PERF_A2AV_CNT
    free(w);
    free(perm);
    return 0;
}

size_t perf_coll_a2av_src_off(const perf_ctx_t *ctx, int p)
{
    return ctx->a2av[4 * (size_t)ctx->nranks + (size_t)p];
}

void perf_coll_buffers(const perf_ctx_t *ctx, size_t param, int inplace, void **sb, void **rb)
{
    size_t block = param * hcomm_dtype_size(ctx->dtype) * (size_t)ctx->rank;
    char  *base  = ctx->rbuf;

    if (!inplace) {
        *sb = ctx->sbuf;
        *rb = ctx->rbuf;
        return;
    }
    /* In place as include/hcomm.h defines it, within the receive buffer. */
    *sb = base;
    *rb = base;
    if (ctx->args->coll == PERF_ALL_GATHER)
        *sb = base + block;
    else if (ctx->args->coll == PERF_REDUCE_SCATTER)
        *rb = base + block;
}

static hcomm_status_t sendrecv(const perf_ctx_t *ctx, const void *sb, void *rb, size_t param)
{
    int            next = (ctx->rank + 1) % ctx->nranks;
    int            prev = (ctx->rank - 1 + ctx->nranks) % ctx->nranks;
    hcomm_status_t st   = hcomm_group_start(), st2;

    if (st != HCOMM_SUCCESS)
        return st;
    st = hcomm_send(sb, param, ctx->dtype, next, ctx->comm, NULL);
    if (st == HCOMM_SUCCESS)
        st = hcomm_recv(rb, param, ctx->dtype, prev, ctx->comm, NULL);
    st2 = hcomm_group_end();
    return st != HCOMM_SUCCESS ? st : st2;
}

static hcomm_status_t start_blocking(const perf_ctx_t *ctx, const void *sb, void *rb, size_t p)
{
    hcomm_comm_t  comm = ctx->comm;
    hcomm_dtype_t dt   = ctx->dtype;
    hcomm_op_t    op   = (hcomm_op_t)ctx->op;
    int           root = ctx->args->root;

    switch (ctx->args->coll) {
    case PERF_ALL_REDUCE:
        return hcomm_allreduce(sb, rb, p, dt, op, comm, NULL);
    case PERF_ALL_GATHER:
        return hcomm_allgather(sb, rb, p, dt, comm, NULL);
    case PERF_REDUCE_SCATTER:
        return hcomm_reduce_scatter(sb, rb, p, dt, op, comm, NULL);
    case PERF_BROADCAST:
        return hcomm_broadcast(sb, rb, p, dt, root, comm, NULL);
    case PERF_REDUCE:
        return hcomm_reduce(sb, rb, p, dt, op, root, comm, NULL);
    case PERF_ALLTOALL:
        return hcomm_alltoall(sb, rb, p, dt, comm, NULL);
    case PERF_SENDRECV:
        return sendrecv(ctx, sb, rb, p);
    case PERF_ALLTOALLV: {
        const size_t *v = ctx->a2av, n = (size_t)ctx->nranks;
        return hcomm_alltoallv(sb, v, v + n, rb, v + 2 * n, v + 3 * n, dt, comm, NULL);
    }
    default:
        return HCOMM_ERR_INVALID_ARG;
    }
}

static hcomm_status_t start_nonblocking(const perf_ctx_t *ctx, const void *sb, void *rb, size_t p,
                                        hcomm_request_t *req)
{
    hcomm_comm_t  comm = ctx->comm;
    hcomm_dtype_t dt   = ctx->dtype;
    hcomm_op_t    op   = (hcomm_op_t)ctx->op;
    int           root = ctx->args->root;

    switch (ctx->args->coll) {
    case PERF_ALL_REDUCE:
        return hcomm_iallreduce(sb, rb, p, dt, op, comm, req);
    case PERF_ALL_GATHER:
        return hcomm_iallgather(sb, rb, p, dt, comm, req);
    case PERF_REDUCE_SCATTER:
        return hcomm_ireduce_scatter(sb, rb, p, dt, op, comm, req);
    case PERF_BROADCAST:
        return hcomm_ibroadcast(sb, rb, p, dt, root, comm, req);
    case PERF_REDUCE:
        return hcomm_ireduce(sb, rb, p, dt, op, root, comm, req);
    case PERF_ALLTOALL:
        return hcomm_ialltoall(sb, rb, p, dt, comm, req);
    default:
        return HCOMM_ERR_INVALID_ARG;
    }
}

hcomm_status_t perf_coll_start(const perf_ctx_t *ctx, size_t param, int inplace,
                               hcomm_request_t *req)
{
    void *sb, *rb;

    if (ctx->args->compressed)
        return perf_compress_start(ctx, param, inplace);
    perf_coll_buffers(ctx, param, inplace, &sb, &rb);
    if (req == NULL || ctx->args->coll == PERF_SENDRECV || ctx->args->coll == PERF_ALLTOALLV)
        return start_blocking(ctx, sb, rb, param);
    return start_nonblocking(ctx, sb, rb, param, req);
}
