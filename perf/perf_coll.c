/*
 * perf_coll.c - the benchmarked collectives: counts and bandwidth factors as
 * nccl-tests defines them, buffers for both placements, and the calls.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#include "perf.h"

static const char *const coll_names[PERF_COLL_COUNT] = {
    [PERF_ALL_REDUCE]     = "all_reduce",
    [PERF_ALL_GATHER]     = "all_gather",
    [PERF_REDUCE_SCATTER] = "reduce_scatter",
    [PERF_BROADCAST]      = "broadcast",
    [PERF_REDUCE]         = "reduce",
    [PERF_ALLTOALL]       = "alltoall",
    [PERF_SENDRECV]       = "sendrecv",
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
    return coll != PERF_SENDRECV;
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
    if (req == NULL || ctx->args->coll == PERF_SENDRECV)
        return start_blocking(ctx, sb, rb, param);
    return start_nonblocking(ctx, sb, rb, param, req);
}
