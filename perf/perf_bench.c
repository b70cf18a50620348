/*
 * perf_bench.c - the timing loop and the nccl-tests style report.
 *
 * Per size and placement: warmup, a barrier, -n timed iterations back to back,
 * time = elapsed / (iters * agg) combined over the ranks per -a; then, with
 * -c 1, one checked run whose wrong elements are summed over the ranks.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#include "perf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Nonblocking operations in flight at once with -z 0. */
#define PERF_WINDOW 8

typedef struct {
    double   time_us;
    uint64_t wrong;
    uint64_t sent; /* -C: bytes this rank sent per call */
} perf_result_t;

static const char *const type_names[HCOMM_DTYPE_COUNT] = {
    [HCOMM_INT8] = "int8",      [HCOMM_UINT8] = "uint8",       [HCOMM_INT32] = "int32",
    [HCOMM_UINT32] = "uint32",  [HCOMM_INT64] = "int64",       [HCOMM_UINT64] = "uint64",
    [HCOMM_FLOAT16] = "half",   [HCOMM_BFLOAT16] = "bfloat16", [HCOMM_FLOAT32] = "float",
    [HCOMM_FLOAT64] = "double",
};

static const char *const op_names[HCOMM_OP_COUNT + 1] = {
    [HCOMM_SUM] = "sum", [HCOMM_PROD] = "prod", [HCOMM_MIN] = "min",
    [HCOMM_MAX] = "max", [HCOMM_AVG] = "avg",   [PERF_OP_NONE] = "none",
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int perf_fail(perf_ctx_t *ctx, const char *what, hcomm_status_t st)
{
    fprintf(stderr, PERF_TAG ": rank %d: %s failed: %s\n", ctx->rank, what, hcomm_status_str(st));
    if (ctx->comm != NULL) {
        hcomm_comm_abort(ctx->comm); /* peers see an error instead of waiting */
        ctx->comm = NULL;
    }
    return 1;
}

/* One timed iteration with blocking calls: agg operations in one group. */
static hcomm_status_t run_blocking(const perf_ctx_t *ctx, size_t param, int inplace)
{
    hcomm_status_t st, st2;

    if (ctx->args->agg == 1)
        return perf_coll_start(ctx, param, inplace, NULL);
    st = hcomm_group_start();
    if (st != HCOMM_SUCCESS)
        return st;
    for (int m = 0; m < ctx->args->agg && st == HCOMM_SUCCESS; m++)
        st = perf_coll_start(ctx, param, inplace, NULL);
    st2 = hcomm_group_end();
    return st != HCOMM_SUCCESS ? st : st2;
}

static hcomm_status_t run_iters(const perf_ctx_t *ctx, size_t param, int inplace, int iters)
{
    hcomm_request_t reqs[PERF_WINDOW] = {NULL};
    int             head = 0, inflight = 0;
    hcomm_status_t  st = HCOMM_SUCCESS;
    /* Groups take no nonblocking calls, and sendrecv needs a group. */
    int nonblocking =
        !ctx->args->blocking && ctx->args->agg == 1 && ctx->args->coll != PERF_SENDRECV;

    for (int it = 0; it < iters && st == HCOMM_SUCCESS; it++) {
        if (!nonblocking) {
            st = run_blocking(ctx, param, inplace);
            continue;
        }
        if (inflight == PERF_WINDOW) {
            st   = hcomm_wait(&reqs[head]);
            head = (head + 1) % PERF_WINDOW;
            inflight--;
            if (st != HCOMM_SUCCESS)
                break;
        }
        st = perf_coll_start(ctx, param, inplace, &reqs[(head + inflight) % PERF_WINDOW]);
        if (st == HCOMM_SUCCESS)
            inflight++;
    }
    /* On an error the communicator is aborted next, which fails what is left. */
    while (inflight > 0 && st == HCOMM_SUCCESS) {
        st   = hcomm_wait(&reqs[head]);
        head = (head + 1) % PERF_WINDOW;
        inflight--;
    }
    return st;
}

static int time_one(perf_ctx_t *ctx, const perf_counts_t *c, int inplace, perf_result_t *res)
{
    const perf_args_t *a    = ctx->args;
    size_t             ws   = hcomm_dtype_size(ctx->dtype);
    size_t             used = (c->send_elems > c->recv_elems ? c->send_elems : c->recv_elems) * ws;
    static const hcomm_op_t combine[] = {HCOMM_SUM, HCOMM_SUM, HCOMM_MIN, HCOMM_MAX};
    hcomm_status_t          st;
    double                  t0, sec;
    uint64_t                b0 = 0, b1 = 0;

    /* Zeros are harmless input for every op (no overflow, no subnormals);
     * compression gets values like gradients, whose cost it depends on. */
    memset(ctx->sbuf, 0, used);
    memset(ctx->rbuf, 0, used);
    if (a->compressed)
        perf_compress_fill(ctx, c->param, inplace);
    st = run_iters(ctx, c->param, inplace, a->warmup);
    if (st != HCOMM_SUCCESS)
        return perf_fail(ctx, "warmup", st);
    st = hcomm_barrier(ctx->comm, NULL);
    if (st != HCOMM_SUCCESS)
        return perf_fail(ctx, "hcomm_barrier", st);
    hcomm_comm_bytes_sent(ctx->comm, &b0);
    t0  = now_s();
    st  = run_iters(ctx, c->param, inplace, a->iters);
    sec = (now_s() - t0) / ((double)a->iters * (double)a->agg);
    if (st != HCOMM_SUCCESS)
        return perf_fail(ctx, perf_coll_name(a->coll), st);
    hcomm_comm_bytes_sent(ctx->comm, &b1);
    res->sent = (b1 - b0) / ((uint64_t)a->iters * (uint64_t)a->agg);
    if (a->average != 0) {
        st = hcomm_allreduce(&sec, &sec, 1, HCOMM_FLOAT64, combine[a->average], ctx->comm, NULL);
        if (st != HCOMM_SUCCESS)
            return perf_fail(ctx, "hcomm_allreduce of the times", st);
        if (a->average == 1)
            sec /= ctx->nranks;
    }
    res->time_us = sec * 1e6;
    return 0;
}

static int check_one(perf_ctx_t *ctx, const perf_counts_t *c, int inplace, uint64_t *wrong)
{
    hcomm_status_t st;
    uint64_t       w;

    if (ctx->args->compressed) {
        st = perf_compress_check(ctx, c->param, inplace, &w);
        if (st != HCOMM_SUCCESS)
            return perf_fail(ctx, "the checked compressed allreduce", st);
    } else {
        perf_check_fill(ctx, c->param, inplace);
        st = perf_coll_start(ctx, c->param, inplace, NULL);
        if (st != HCOMM_SUCCESS)
            return perf_fail(ctx, perf_coll_name(ctx->args->coll), st);
        w = perf_check_count(ctx, c->param, inplace);
    }
    st = hcomm_allreduce(&w, &w, 1, HCOMM_UINT64, HCOMM_SUM, ctx->comm, NULL);
    if (st != HCOMM_SUCCESS)
        return perf_fail(ctx, "hcomm_allreduce of the error counts", st);
    *wrong = w;
    return 0;
}

static void print_result(perf_ctx_t *ctx, size_t bytes, const perf_result_t *r)
{
    double algbw, busbw;
    char   tstr[32], wstr[32];

    if (r == NULL) {
        printf("  %7s  %7s  %7s  %5s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    algbw = r->time_us > 0 ? (double)bytes / 1e3 / r->time_us : 0;
    busbw = algbw * perf_coll_bus_factor(ctx->args->coll, ctx->nranks);
    ctx->bw_sum += busbw;
    ctx->bw_count++;
    snprintf(tstr, sizeof(tstr),
             r->time_us >= 10000.0 ? "%7.0f"
             : r->time_us >= 100.0 ? "%7.1f"
                                   : "%7.2f",
             r->time_us);
    if (ctx->args->check)
        snprintf(wstr, sizeof(wstr), "%llu", (unsigned long long)r->wrong);
    else
        snprintf(wstr, sizeof(wstr), "N/A");
    /* four decimals (nccl-tests prints two) so small sizes still compare */
    printf("  %7s  %7.4f  %7.4f  %5s", tstr, algbw, busbw, wstr);
}

/* One row: out of place, then in place. Returns 0, or 1 after a failed call. */
static int bench_size(perf_ctx_t *ctx, const perf_counts_t *c)
{
    const perf_args_t *a     = ctx->args;
    size_t             ws    = hcomm_dtype_size(ctx->dtype);
    size_t             bytes = (c->send_elems > c->recv_elems ? c->send_elems : c->recv_elems) * ws;
    perf_result_t      res[2] = {{0, 0, 0}, {0, 0, 0}};
    int                nplace = perf_coll_has_inplace(a->coll) ? 2 : 1;
    uint64_t           plain  = 0;
    hcomm_status_t     st;

    if (a->coll == PERF_ALLTOALLV && perf_coll_a2av_prepare(ctx, c->param) != 0)
        return perf_fail(ctx, "the alltoallv counts", HCOMM_ERR_NO_MEMORY);
    if (a->compressed) {
        st = perf_compress_prepare(ctx, c->param);
        if (st == HCOMM_SUCCESS)
            st = perf_compress_plain_bytes(ctx, c->param, &plain);
        if (st != HCOMM_SUCCESS)
            return perf_fail(ctx, "preparing the compressed allreduce", st);
    }
    for (int ip = 0; ip < nplace; ip++) {
        if (time_one(ctx, c, ip, &res[ip]) != 0)
            return 1;
        if (a->check && check_one(ctx, c, ip, &res[ip].wrong) != 0)
            return 1;
        ctx->wrong_total += res[ip].wrong;
    }
    if (ctx->rank != 0)
        return 0;
    char cname[32];
    printf("%12zu  %12zu  %8s  %6s  %6d", bytes, c->param, type_names[ctx->dtype],
           a->compressed ? hcomm_compress_name(&a->compress, cname, sizeof(cname))
                         : op_names[ctx->op],
           perf_coll_has_root(a->coll) ? a->root : -1);
    print_result(ctx, bytes, &res[0]);
    print_result(ctx, bytes, nplace == 2 ? &res[1] : NULL);
    if (a->compressed) /* rank 0's bytes: every rank sends alike */
        printf("  %10llu  %7.2f", (unsigned long long)res[0].sent,
               res[0].sent ? (double)plain / (double)res[0].sent : 0.0);
    printf("\n");
    fflush(stdout);
    return 0;
}

static size_t next_size(const perf_args_t *a, size_t size)
{
    if (a->stepfactor > 1) {
        if (size == 0)
            return 1;
        return size > SIZE_MAX / a->stepfactor ? SIZE_MAX : size * a->stepfactor;
    }
    return size > SIZE_MAX - a->stepbytes ? SIZE_MAX : size + a->stepbytes;
}

static int bench_sweep(perf_ctx_t *ctx)
{
    const perf_args_t *a  = ctx->args;
    size_t             ws = hcomm_dtype_size(ctx->dtype);
    perf_counts_t      c;

    for (size_t size = a->minbytes; size <= a->maxbytes; size = next_size(a, size)) {
        perf_coll_counts(a->coll, size, ws, ctx->nranks, &c);
        if (c.param > 0 && bench_size(ctx, &c) != 0)
            return 1;
        if (size == SIZE_MAX)
            break;
    }
    return 0;
}

/* What the header shows of each rank; exchanged with an allgather. */
typedef struct {
    char    host[64];
    int32_t pid;
    char    pad[60];
} perf_rank_info_t;

static void print_header(const perf_ctx_t *ctx, const perf_rank_info_t *info)
{
    const perf_args_t *a = ctx->args;

    printf("# hcomm-perf %s, hcomm %s\n", perf_coll_name(a->coll), hcomm_version_str());
    printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
           "agg iters: %d validation: %d blocking: %d average: %d\n",
           ctx->nranks, a->minbytes, a->maxbytes, a->stepfactor > 1 ? a->stepfactor : a->stepbytes,
           a->stepfactor > 1 ? "factor" : "bytes", a->warmup, a->iters, a->agg, a->check,
           a->blocking, a->average);
    printf("#\n# Using ranks\n");
    for (int r = 0; r < ctx->nranks; r++)
        printf("#  Rank %2d Pid %6d on %10s\n", r, (int)info[r].pid, info[r].host);
    printf("#\n");
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n",
           "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %7s  %7s %6s  %7s  %7s  %7s %6s%s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong", a->compressed ? "        sent    ratio" : "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %7s  %7s  %5s  %7s  %7s  %7s  %5s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           a->compressed ? "         (B)" : "");
    if (a->coll == PERF_ALLTOALLV)
        printf("# alltoallv: size = bytes each rank sends (and receives), in random uneven "
               "blocks from --seed %llu\n",
               (unsigned long long)a->seed);
    if (a->compressed)
        printf("# -C %s: redop shows the codec (the call averages); sent: bytes rank 0 sent "
               "per call; ratio: a plain float allreduce's bytes / sent\n",
               hcomm_compress_name(&a->compress, (char[32]){0}, 32));
    fflush(stdout);
}

static int exchange_info(perf_ctx_t *ctx)
{
    perf_rank_info_t me, *all = calloc((size_t)ctx->nranks, sizeof(*all));
    hcomm_status_t   st;

    if (all == NULL) {
        fprintf(stderr, PERF_TAG ": rank %d: out of memory\n", ctx->rank);
        return perf_fail(ctx, "calloc", HCOMM_ERR_NO_MEMORY);
    }
    memset(&me, 0, sizeof(me));
    if (gethostname(me.host, sizeof(me.host) - 1) != 0)
        snprintf(me.host, sizeof(me.host), "?");
    me.pid = (int32_t)getpid();
    st     = hcomm_allgather(&me, all, sizeof(me), HCOMM_UINT8, ctx->comm, NULL);
    if (st != HCOMM_SUCCESS) {
        free(all);
        return perf_fail(ctx, "hcomm_allgather of the rank list", st);
    }
    if (ctx->rank == 0)
        print_header(ctx, all);
    free(all);
    return 0;
}

static int alloc_buffers(perf_ctx_t *ctx)
{
    size_t max   = ctx->args->maxbytes;
    size_t bytes = max == 0 ? PERF_ALIGN : (max + PERF_ALIGN - 1) / PERF_ALIGN * PERF_ALIGN;

    if (max > SIZE_MAX - PERF_ALIGN || posix_memalign(&ctx->sbuf, PERF_ALIGN, bytes) != 0) {
        ctx->sbuf = NULL;
        return perf_fail(ctx, "allocating the buffers", HCOMM_ERR_NO_MEMORY);
    }
    if (posix_memalign(&ctx->rbuf, PERF_ALIGN, bytes) != 0) {
        free(ctx->sbuf);
        ctx->sbuf = ctx->rbuf = NULL;
        return perf_fail(ctx, "allocating the buffers", HCOMM_ERR_NO_MEMORY);
    }
    ctx->bufbytes = bytes;
    /* Touch every page now, not inside the first timed iterations. */
    perf_check_fill_zero(ctx);
    return 0;
}

static int run_cycles(perf_ctx_t *ctx)
{
    const perf_args_t *a = ctx->args;

    for (int cyc = 0; a->cycles == 0 || cyc < a->cycles; cyc++) {
        for (int d = 0; d < a->ndtypes; d++) {
            for (int o = 0; o < a->nops; o++) {
                ctx->dtype = a->dtypes[d];
                ctx->op    = a->ops[o];
                if (bench_sweep(ctx) != 0)
                    return 1;
            }
        }
    }
    return 0;
}

int perf_bench_run(perf_ctx_t *ctx)
{
    const perf_args_t *a = ctx->args;
    int                rc;

    if (perf_coll_has_root(a->coll) && a->root >= ctx->nranks) {
        if (ctx->rank == 0)
            fprintf(stderr, PERF_TAG ": root %d is not a rank (%d ranks)\n", a->root, ctx->nranks);
        /* Nobody exits (and gets the others killed) before rank 0 has said why. */
        hcomm_barrier(ctx->comm, NULL);
        return 2;
    }
    if (a->coll == PERF_MOE_DISPATCH || a->coll == PERF_MOE_COMBINE)
        return perf_moe_run(ctx);
    if (alloc_buffers(ctx) != 0)
        return 1;
    rc = exchange_info(ctx);
    if (rc == 0)
        rc = run_cycles(ctx);
    if (rc == 0 && ctx->rank == 0) {
        printf("# Out of bounds values : %llu %s\n", (unsigned long long)ctx->wrong_total,
               ctx->wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n",
               ctx->bw_count ? ctx->bw_sum / ctx->bw_count : 0.0);
        fflush(stdout);
    }
    hcomm_compress_destroy(ctx->cstate);
    ctx->cstate = NULL;
    free(ctx->sbuf);
    free(ctx->rbuf);
    free(ctx->a2av);
    ctx->sbuf = ctx->rbuf = NULL;
    ctx->a2av             = NULL;
    if (rc == 0 && ctx->wrong_total != 0) {
        hcomm_barrier(ctx->comm, NULL); /* rank 0 has printed before anyone fails */
        rc = 1;
    }
    return rc;
}
