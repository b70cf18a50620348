/*
 * perf_compress.c - hcomm-perf all_reduce -C SPEC: the compressed allreduce
 * (hcomm_compress.h) timed like any collective, plus the bytes each rank sent
 * per operation and the ratio to a plain float32 allreduce of the same
 * tensor, both measured with hcomm_comm_bytes_sent. The check compares every
 * rank's result with the serial model of the same codec (src/compress/
 * compress_model.h): onebit and topk must match bit for bit; the casts, which
 * sum in half precision on the wire, within a few half-precision steps.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#include "perf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_model.h"

/* A value of rank r at element i: varied signs and magnitudes, exact in float. */
static float input_value(int r, size_t i)
{
    long v = (long)(((size_t)(r + 1) * 7919 + i * 104729) % 2001) - 1000;
    return (float)v / 64.0f;
}

hcomm_status_t perf_compress_prepare(perf_ctx_t *ctx, size_t count)
{
    hcomm_compress_destroy(ctx->cstate);
    ctx->cstate = NULL;
    return hcomm_compress_create(ctx->comm, &ctx->args->compress, count, HCOMM_FLOAT32,
                                 &ctx->cstate);
}

hcomm_status_t perf_compress_start(const perf_ctx_t *ctx, size_t count, int inplace)
{
    void *sb, *rb;

    perf_coll_buffers(ctx, count, inplace, &sb, &rb);
    return hcomm_allreduce_compressed(sb, rb, count, HCOMM_FLOAT32, ctx->cstate, ctx->comm, NULL);
}

/* The timed runs' input: the checked values, so that top-k meets gradients
 * with varied magnitudes (zeros send it down its all-equal fallback). */
void perf_compress_fill(const perf_ctx_t *ctx, size_t count, int inplace)
{
    void *sb, *rb;

    perf_coll_buffers(ctx, count, inplace, &sb, &rb);
    for (size_t i = 0; i < count; i++)
        ((float *)sb)[i] = input_value(ctx->rank, i);
}

/* Bytes this rank sends for one plain float32 allreduce of count elements. */
hcomm_status_t perf_compress_plain_bytes(perf_ctx_t *ctx, size_t count, uint64_t *bytes)
{
    uint64_t       b0, b1;
    hcomm_status_t st = hcomm_comm_bytes_sent(ctx->comm, &b0);

    if (st == HCOMM_SUCCESS)
        st = hcomm_allreduce(ctx->sbuf, ctx->rbuf, count, HCOMM_FLOAT32, HCOMM_SUM, ctx->comm,
                             NULL);
    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_bytes_sent(ctx->comm, &b1);
    if (st == HCOMM_SUCCESS)
        *bytes = b1 - b0;
    return st;
}

/* Wrong elements of this rank's result against the model; every element
 * (at least 1) if the model could not run, a figure the ranks' sum keeps. */
static uint64_t compare_model(const perf_ctx_t *ctx, size_t count, const float *got)
{
    hc_compress_model_t m;
    int                 n = ctx->nranks;
    float             **in = calloc((size_t)n, sizeof(float *)), *want = malloc(count * 4 + 4);
    int                 checked = 0;
    uint64_t            wrong   = count ? count : 1;
    int                 cast = ctx->args->compress.kind == HCOMM_COMPRESS_FP16 ||
               ctx->args->compress.kind == HCOMM_COMPRESS_BF16 ||
               ctx->args->compress.kind == HCOMM_COMPRESS_NONE;
    /* half precision sums: each of n - 1 additions may round by half a step */
    double tol = ctx->args->compress.kind == HCOMM_COMPRESS_BF16 ? 1.0 / 128 : 1.0 / 1024;

    if (in == NULL || want == NULL || hc_compress_model_init(&m, &ctx->args->compress, n, count))
        goto out;
    for (int r = 0; r < n && (in[r] = malloc(count * 4 + 4)) != NULL; r++)
        for (size_t i = 0; i < count; i++)
            in[r][i] = input_value(r, i);
    if (in[n - 1] != NULL && hc_compress_model_step(&m, (const float *const *)in, want) == 0) {
        wrong = 0, checked = 1;
        for (size_t i = 0; i < count; i++) {
            double err = fabs((double)got[i] - (double)want[i]);
            wrong += cast ? !(err <= tol * n * 16.0) /* inputs stay below 16 */
                          : memcmp(&got[i], &want[i], sizeof(float)) != 0;
        }
    }
    hc_compress_model_free(&m);
out:
    if (!checked)
        fprintf(stderr,
                PERF_TAG ": rank %d: out of memory for the compression model; its %zu "
                         "elements count as wrong\n",
                ctx->rank, count);
    for (int r = 0; in != NULL && r < n; r++)
        free(in[r]);
    free(in);
    free(want);
    return wrong;
}

/* One checked call from a fresh state; returns this rank's wrong elements. */
hcomm_status_t perf_compress_check(perf_ctx_t *ctx, size_t count, int inplace, uint64_t *wrong)
{
    void          *sb, *rb;
    hcomm_status_t st;

    perf_coll_buffers(ctx, count, inplace, &sb, &rb);
    memset(ctx->rbuf, 0, count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        ((float *)sb)[i] = input_value(ctx->rank, i);
    st = hcomm_compress_reset(ctx->cstate);
    if (st == HCOMM_SUCCESS)
        st = hcomm_allreduce_compressed(sb, rb, count, HCOMM_FLOAT32, ctx->cstate, ctx->comm,
                                        NULL);
    if (st == HCOMM_SUCCESS)
        *wrong = compare_model(ctx, count, rb);
    return st;
}
