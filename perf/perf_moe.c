/*
 * perf_moe.c - hcomm-perf moe_dispatch / moe_combine (include/hcomm_moe.h).
 *
 * Every rank routes --tokens tokens to --topk distinct experts drawn from
 * --seed among --experts, which are spread evenly over the ranks (the
 * handle's contiguous placement). dispatch: -n timed dispatches; combine: one
 * dispatch, then -n timed combines of identity experts. Reported as DeepEP
 * reports its normal kernels: GB/s = bytes of token rows a rank received
 * (dispatch) or sent back (combine), one per (token, rank) pair, / the rank's
 * time, averaged over the ranks; plus the dedup share and the bytes all
 * ranks handed to transports per call, measured, and without dedup. With -c 1
 * one more dispatch and combine, through stand-in experts, are checked
 * against a serial reference built from every rank's routing.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#include "perf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcomm_moe.h"

typedef struct {
    perf_ctx_t        *ctx;
    const perf_args_t *a;
    hcomm_dtype_t      dt;
    size_t             T, H, es;
    int                k, E;
    hcomm_moe_t        moe;
    void              *x, *out, *y;
    int32_t           *ids;
    float             *w;
    hcomm_moe_recv_t   rv;
} moe_bench_t;

/* Summed over the ranks for the report. */
enum { S_TE, S_TR, S_RECV, S_WIRE, S_WIRE_ND, S_COUNT };

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Rank q's token t: k distinct experts and their weights; the same on every rank. */
static void route(const moe_bench_t *b, int q, size_t t, int32_t *ids, float *w)
{
    for (int j = 0; j < b->k; j++) {
        uint64_t h = mix(mix(b->a->seed ^ mix((uint64_t)q)) ^ (t * HCOMM_MOE_MAX_TOPK + (size_t)j));
        int32_t  e = (int32_t)(h % (uint64_t)b->E);
        for (int i = 0; i < j; i++)
            if (ids[i] == e) { /* taken: the next one, from the start again */
                e = (e + 1) % b->E;
                i = -1;
            }
        ids[j] = e;
        w[j]   = (float)(1 + (h >> 40) % 997) / 1000.0f; /* not dyadic: sums round */
    }
}

/* Multiples of 1/8 in -4 .. 4: exact in every token type. */
static double token_val(int q, size_t t, size_t h)
{
    return (double)((int)(((size_t)q * 131 + t * 31 + h * 7) % 65) - 32) / 8.0;
}

/* The stand-in expert e: x * (1 + e % 4) / 2, exact in every token type. */
static double expert_scale(int e)
{
    return (double)(1 + e % 4) / 2.0;
}

static int expert_rank(const moe_bench_t *b, int e)
{
    return (int)((int64_t)e * b->ctx->nranks / b->E);
}

static float round_dt(hcomm_dtype_t dt, float v)
{
    float f[1];

    perf_check_store_float(f, dt, 0, v);
    return (float)perf_check_load_float(f, dt, 0);
}

static int setup(moe_bench_t *b)
{
    hcomm_moe_config_t cfg = {b->E, NULL, b->k, b->H, b->dt};
    hcomm_status_t     st  = hcomm_moe_create(b->ctx->comm, &cfg, &b->moe);

    if (st != HCOMM_SUCCESS)
        return perf_fail(b->ctx, "hcomm_moe_create", st);
    b->x   = malloc(b->T * b->H * b->es);
    b->out = malloc(b->T * b->H * b->es);
    b->ids = malloc(b->T * (size_t)b->k * sizeof(int32_t));
    b->w   = malloc(b->T * (size_t)b->k * sizeof(float));
    if (b->x == NULL || b->out == NULL || b->ids == NULL || b->w == NULL)
        return perf_fail(b->ctx, "allocating the tokens", HCOMM_ERR_NO_MEMORY);
    for (size_t t = 0; t < b->T; t++) {
        route(b, b->ctx->rank, t, b->ids + t * (size_t)b->k, b->w + t * (size_t)b->k);
        for (size_t h = 0; h < b->H; h++)
            perf_check_store_float(b->x, b->dt, t * b->H + h, token_val(b->ctx->rank, t, h));
    }
    return 0;
}

static hcomm_status_t run_op(moe_bench_t *b, int combine, int iters)
{
    hcomm_status_t st = HCOMM_SUCCESS;

    for (int i = 0; i < iters && st == HCOMM_SUCCESS; i++)
        st = combine ? hcomm_moe_combine(b->moe, b->rv.tokens, b->out)
                     : hcomm_moe_dispatch(b->moe, b->x, b->T, b->ids, b->w, &b->rv);
    return st;
}

/* One row of the rank's layout against the sender's regenerated routing. */
static uint64_t check_row(const moe_bench_t *b, int e, size_t i)
{
    int32_t  ids[HCOMM_MOE_MAX_TOPK];
    float    w[HCOMM_MOE_MAX_TOPK];
    int      q = b->rv.src_rank[i], j = b->rv.topk_slot[i];
    size_t   t     = (size_t)b->rv.src_index[i];
    uint64_t wrong = 0;

    if (q < 0 || q >= b->ctx->nranks || j < 0 || j >= b->k)
        return b->H;
    route(b, q, t, ids, w);
    if (ids[j] != e || memcmp(&w[j], &b->rv.weight[i], sizeof(float)) != 0)
        return b->H;
    for (size_t h = 0; h < b->H; h++)
        wrong += perf_check_load_float(b->rv.tokens, b->dt, i * b->H + h) != token_val(q, t, h);
    return wrong;
}

/* The layout: per expert the rows of every (rank, token, slot) routed there,
 * in that order, each holding its token. Counts rows wrong x hidden. */
static uint64_t check_dispatch(const moe_bench_t *b)
{
    int32_t  ids[HCOMM_MOE_MAX_TOPK];
    float    w[HCOMM_MOE_MAX_TOPK];
    int      first = -1, L = 0; /* this rank's experts, from the placement itself */
    uint64_t wrong = 0;

    for (int e = 0; e < b->E; e++)
        if (expert_rank(b, e) == b->ctx->rank) {
            first = first < 0 ? e : first;
            L++;
        }
    if (b->rv.num_local_experts != L)
        return b->H + (uint64_t)L;
    size_t *want = calloc((size_t)L + 1, sizeof(size_t));
    if (want == NULL)
        return 1;
    for (int q = 0; q < b->ctx->nranks; q++)
        for (size_t t = 0; t < b->T; t++) {
            route(b, q, t, ids, w);
            for (int j = 0; j < b->k; j++)
                if (ids[j] >= 0 && expert_rank(b, ids[j]) == b->ctx->rank)
                    want[ids[j] - first]++;
        }
    for (int l = 0; l < L; l++) {
        size_t o = b->rv.expert_offset[l], c = b->rv.expert_count[l];
        if (c != want[l] || b->rv.local_expert_ids[l] != first + l) {
            wrong += (c > want[l] ? c - want[l] : want[l] - c) * b->H + 1;
            continue;
        }
        for (size_t i = o; i < o + c; i++) {
            wrong += check_row(b, b->rv.local_expert_ids[l], i);
            if (i > o && (b->rv.src_rank[i] < b->rv.src_rank[i - 1] ||
                          (b->rv.src_rank[i] == b->rv.src_rank[i - 1] &&
                           b->rv.src_index[i] <= b->rv.src_index[i - 1])))
                wrong += b->H; /* out of order or twice */
        }
    }
    free(want);
    return wrong;
}

/* out[t] by the header's order: per rank a float32 partial sum, rounded; those
 * summed in float32 in rank order; rounded. */
static uint64_t check_combine(const moe_bench_t *b)
{
    const int32_t *ids;
    const float   *w;
    uint64_t       wrong = 0;

    for (size_t t = 0; t < b->T; t++) {
        ids = b->ids + t * (size_t)b->k;
        w   = b->w + t * (size_t)b->k;
        for (size_t h = 0; h < b->H; h++) {
            float x = (float)token_val(b->ctx->rank, t, h), acc = 0;
            for (int p = 0; p < b->ctx->nranks; p++) {
                float part = 0;
                int   any  = 0;
                for (int j = 0; j < b->k; j++)
                    if (expert_rank(b, ids[j]) == p) {
                        part += w[j] * round_dt(b->dt, (float)(x * expert_scale(ids[j])));
                        any = 1;
                    }
                if (any)
                    acc += round_dt(b->dt, part);
            }
            wrong += perf_check_load_float(b->out, b->dt, t * b->H + h) != round_dt(b->dt, acc);
        }
    }
    return wrong;
}

/* A dispatch, stand-in experts, a combine; wrong elements of this rank. */
static int check_run(moe_bench_t *b, uint64_t *wrong)
{
    hcomm_status_t st = run_op(b, 0, 1);

    if (st != HCOMM_SUCCESS)
        return perf_fail(b->ctx, "the checked hcomm_moe_dispatch", st);
    *wrong = check_dispatch(b);
    free(b->y);
    b->y = malloc(b->rv.num_rows * b->H * b->es + 1);
    if (b->y == NULL)
        return perf_fail(b->ctx, "allocating the expert outputs", HCOMM_ERR_NO_MEMORY);
    for (int l = 0; l < b->rv.num_local_experts; l++) {
        double s = expert_scale(b->rv.local_expert_ids[l]);
        size_t o = b->rv.expert_offset[l] * b->H, c = b->rv.expert_count[l] * b->H;
        for (size_t i = o; i < o + c; i++)
            perf_check_store_float(b->y, b->dt, i,
                                   perf_check_load_float(b->rv.tokens, b->dt, i) * s);
    }
    st = hcomm_moe_combine(b->moe, b->y, b->out);
    if (st != HCOMM_SUCCESS)
        return perf_fail(b->ctx, "the checked hcomm_moe_combine", st);
    *wrong += check_combine(b);
    return 0;
}

/* Times -n calls of the benchmarked op; *sec: this rank's time per call. */
static int time_op(moe_bench_t *b, int combine, double *sec)
{
    hcomm_status_t st = run_op(b, 0, 1); /* combine needs a layout; dispatch warms */
    double         t0;

    if (st == HCOMM_SUCCESS)
        st = run_op(b, combine, b->a->warmup);
    if (st == HCOMM_SUCCESS)
        st = hcomm_barrier(b->ctx->comm, NULL);
    if (st != HCOMM_SUCCESS)
        return perf_fail(b->ctx, combine ? "hcomm_moe_combine warmup" : "hcomm_moe_dispatch warmup",
                         st);
    t0 = now_s();
    st = run_op(b, combine, b->a->iters);
    if (st != HCOMM_SUCCESS)
        return perf_fail(b->ctx, combine ? "hcomm_moe_combine" : "hcomm_moe_dispatch", st);
    *sec = (now_s() - t0) / b->a->iters;
    return 0;
}

static void print_header(const perf_ctx_t *ctx)
{
    const perf_args_t *a = ctx->args;

    printf("# hcomm-perf %s, hcomm %s\n", perf_coll_name(a->coll), hcomm_version_str());
    printf("# nRanks %d tokens %zu hidden %zu topk %d experts %d (contiguous, even over the "
           "ranks) seed %llu warmup iters: %d iters: %d validation: %d average: %d\n",
           ctx->nranks, a->moe_tokens, a->moe_hidden, a->moe_topk, a->moe_experts,
           (unsigned long long)a->seed, a->warmup, a->iters, a->check, a->average);
    printf("# GB/s: token bytes a rank %s, one copy per (token, rank) pair, / time, averaged "
           "over the ranks (DeepEP)\n",
           a->coll == PERF_MOE_DISPATCH ? "received" : "sent back");
    printf("# dedup: 1 - (token, rank) / (token, expert) pairs; wire: bytes all ranks handed to "
           "transports per call (measured), and with one copy per (token, expert) pair; saved: "
           "1 - wire / no-dedup\n#\n");
    printf("# %8s  %7s  %4s  %7s  %8s  %9s  %8s  %9s  %5s  %12s  %12s  %5s  %6s\n", "tokens",
           "hidden", "topk", "experts", "type", "time", "GB/s", "recv", "dedup", "wire", "no-dedup",
           "saved", "#wrong");
    printf("# %8s  %7s  %4s  %7s  %8s  %9s  %8s  %9s  %5s  %12s  %12s  %5s  %6s\n", "(per rank)",
           "", "", "", "", "(us)", "", "(per rank)", "", "(B)", "(B)", "", "");
    fflush(stdout);
}

/* Sums the counters over the ranks, combines the times, prints rank 0's row. */
static int report(moe_bench_t *b, int combine, double sec, uint64_t wrong)
{
    static const hcomm_op_t how[] = {HCOMM_SUM, HCOMM_SUM, HCOMM_MIN, HCOMM_MAX};
    hcomm_moe_stats_t       s;
    perf_ctx_t             *ctx = b->ctx;
    uint64_t                v[S_COUNT + 1];
    double                  t[2];
    hcomm_status_t          st = hcomm_moe_get_stats(b->moe, &s);

    v[S_TE]      = s.token_expert_pairs;
    v[S_TR]      = s.token_rank_pairs;
    v[S_RECV]    = s.recv_token_rank_pairs;
    v[S_WIRE]    = combine ? s.combine_bytes : s.dispatch_bytes;
    v[S_WIRE_ND] = combine ? s.combine_bytes_nodedup : s.dispatch_bytes_nodedup;
    v[S_COUNT]   = wrong;
    t[0]         = (double)s.recv_token_rank_pairs * (double)(b->H * b->es) / sec / 1e9;
    t[1]         = sec;
    if (st == HCOMM_SUCCESS)
        st = hcomm_allreduce(v, v, S_COUNT + 1, HCOMM_UINT64, HCOMM_SUM, ctx->comm, NULL);
    if (st == HCOMM_SUCCESS)
        st = hcomm_allreduce(t, t, 1, HCOMM_FLOAT64, HCOMM_SUM, ctx->comm, NULL);
    if (st == HCOMM_SUCCESS && b->a->average != 0)
        st = hcomm_allreduce(t + 1, t + 1, 1, HCOMM_FLOAT64, how[b->a->average], ctx->comm, NULL);
    if (st != HCOMM_SUCCESS)
        return perf_fail(ctx, "summing the counters", st);
    ctx->wrong_total += v[S_COUNT];
    if (ctx->rank != 0)
        return 0;
    double n = ctx->nranks, us = (b->a->average == 1 ? t[1] / n : t[1]) * 1e6;
    char   wstr[24] = "N/A";
    if (b->a->check)
        snprintf(wstr, sizeof(wstr), "%llu", (unsigned long long)v[S_COUNT]);
    ctx->bw_sum += t[0] / n;
    ctx->bw_count++;
    printf("  %8zu  %7zu  %4d  %7d  %8s  %9.1f  %8.3f  %9.0f  %5.3f  %12llu  %12llu  %5.3f  %6s\n",
           b->T, b->H, b->k, b->E, hcomm_dtype_name(b->dt), us, t[0] / n, (double)v[S_RECV] / n,
           v[S_TE] ? 1.0 - (double)v[S_TR] / (double)v[S_TE] : 0.0, (unsigned long long)v[S_WIRE],
           (unsigned long long)v[S_WIRE_ND],
           v[S_WIRE_ND] ? 1.0 - (double)v[S_WIRE] / (double)v[S_WIRE_ND] : 0.0, wstr);
    fflush(stdout);
    return 0;
}

static int bench_dtype(perf_ctx_t *ctx, hcomm_dtype_t dt)
{
    const perf_args_t *a       = ctx->args;
    moe_bench_t        b       = {.ctx = ctx,
                                  .a   = a,
                                  .dt  = dt,
                                  .T   = a->moe_tokens,
                                  .H   = a->moe_hidden,
                                  .es  = hcomm_dtype_size(dt),
                                  .k   = a->moe_topk,
                                  .E   = a->moe_experts};
    int                combine = a->coll == PERF_MOE_COMBINE, rc;
    double             sec     = 0;
    uint64_t           wrong   = 0;

    rc = setup(&b);
    if (rc == 0)
        rc = time_op(&b, combine, &sec);
    if (rc == 0 && a->check)
        rc = check_run(&b, &wrong);
    if (rc == 0)
        rc = report(&b, combine, sec, wrong);
    hcomm_moe_destroy(b.moe);
    free(b.x);
    free(b.out);
    free(b.y);
    free(b.ids);
    free(b.w);
    return rc;
}

int perf_moe_run(perf_ctx_t *ctx)
{
    const perf_args_t *a  = ctx->args;
    int                rc = 0;

    if (ctx->rank == 0)
        print_header(ctx);
    for (int cyc = 0; rc == 0 && (a->cycles == 0 || cyc < a->cycles); cyc++)
        for (int d = 0; rc == 0 && d < a->ndtypes; d++)
            rc = bench_dtype(ctx, a->dtypes[d]);
    if (rc == 0 && ctx->rank == 0) {
        printf("# Out of bounds values : %llu %s\n", (unsigned long long)ctx->wrong_total,
               ctx->wrong_total ? "FAILED" : "OK");
        printf("# Avg GB/s             : %g \n#\n",
               ctx->bw_count ? ctx->bw_sum / ctx->bw_count : 0);
        fflush(stdout);
    }
    if (rc == 0 && ctx->wrong_total != 0) {
        hcomm_barrier(ctx->comm, NULL); /* rank 0 has printed before anyone fails */
        rc = 1;
    }
    return rc;
}
