/*
 * perf_check.c - data for the checked runs and the serial reference.
 *
 * Every input is a small integer chosen per op so that each result is exact in
 * every dtype, whatever the reduction order: sums stay small integers, products
 * are powers of two, and avg inputs are balanced around a per-index base so the
 * sum is nranks * base and avg = base exactly. Integer references wrap like the
 * library (unsigned arithmetic); avg divides the sum, truncating for integers.
 * 0 never occurs as an input or a result, so the receive buffer is cleared to 0
 * to catch elements that were never written.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#include "perf.h"

#include <string.h>

static uint16_t f32_to_f16(float f)
{
    uint32_t x, sign, exp, man, h, rem;
    int      e;

    memcpy(&x, &f, sizeof(x));
    sign = (x >> 16) & 0x8000u;
    exp  = (x >> 23) & 0xffu;
    man  = x & 0x7fffffu;
    if (exp == 0xffu)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half (or zero): round man24 * 2^(e - 14) */
        uint32_t shift, mid;

        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        shift = (uint32_t)(14 - e);
        mid   = 1u << (shift - 1);
        h     = man >> shift;
        rem   = man & ((1u << shift) - 1);
        if (rem > mid || (rem == mid && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    h   = sign | ((uint32_t)e << 10) | (man >> 13);
    rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent rounds up to the next binade or inf */
    return (uint16_t)h;
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, x;
    float    f;

    if (exp == 0) {
        f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    if (exp == 0x1f)
        x = sign | 0x7f800000u | (man << 13);
    else
        x = sign | ((exp + 112) << 23) | (man << 13);
    memcpy(&f, &x, sizeof(f));
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;

    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float    f;

    memcpy(&f, &x, sizeof(f));
    return f;
}

static int is_float(hcomm_dtype_t dt)
{
    return dt == HCOMM_FLOAT16 || dt == HCOMM_BFLOAT16 || dt == HCOMM_FLOAT32 ||
           dt == HCOMM_FLOAT64;
}

static int is_signed_int(hcomm_dtype_t dt)
{
    return dt == HCOMM_INT8 || dt == HCOMM_INT32 || dt == HCOMM_INT64;
}

/* An integer wrapped to the dtype's width, sign- or zero-extended. */
static int64_t wrap_int(hcomm_dtype_t dt, uint64_t v)
{
    switch (dt) {
    case HCOMM_INT8:
        return (int8_t)v;
    case HCOMM_UINT8:
        return (uint8_t)v;
    case HCOMM_INT32:
        return (int32_t)v;
    case HCOMM_UINT32:
        return (uint32_t)v;
    default:
        return (int64_t)v;
    }
}

/* A double rounded to the dtype, as the library stores it. */
static double round_float(hcomm_dtype_t dt, double v)
{
    switch (dt) {
    case HCOMM_FLOAT16:
        return f16_to_f32(f32_to_f16((float)v));
    case HCOMM_BFLOAT16:
        return bf16_to_f32(f32_to_bf16((float)v));
    case HCOMM_FLOAT32:
        return (float)v;
    default:
        return v;
    }
}

static void store(void *buf, hcomm_dtype_t dt, size_t i, int64_t v)
{
    switch (dt) {
    case HCOMM_INT8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case HCOMM_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case HCOMM_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case HCOMM_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)v;
        break;
    case HCOMM_INT64:
        ((int64_t *)buf)[i] = v;
        break;
    case HCOMM_UINT64:
        ((uint64_t *)buf)[i] = (uint64_t)v;
        break;
    case HCOMM_FLOAT16:
        ((uint16_t *)buf)[i] = f32_to_f16((float)v);
        break;
    case HCOMM_BFLOAT16:
        ((uint16_t *)buf)[i] = f32_to_bf16((float)v);
        break;
    case HCOMM_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    default:
        ((double *)buf)[i] = (double)v;
        break;
    }
}

static int64_t load_int(const void *buf, hcomm_dtype_t dt, size_t i)
{
    switch (dt) {
    case HCOMM_INT8:
        return ((const int8_t *)buf)[i];
    case HCOMM_UINT8:
        return ((const uint8_t *)buf)[i];
    case HCOMM_INT32:
        return ((const int32_t *)buf)[i];
    case HCOMM_UINT32:
        return ((const uint32_t *)buf)[i];
    default:
        return ((const int64_t *)buf)[i];
    }
}

static double load_float(const void *buf, hcomm_dtype_t dt, size_t i)
{
    switch (dt) {
    case HCOMM_FLOAT16:
        return f16_to_f32(((const uint16_t *)buf)[i]);
    case HCOMM_BFLOAT16:
        return bf16_to_f32(((const uint16_t *)buf)[i]);
    case HCOMM_FLOAT32:
        return ((const float *)buf)[i];
    default:
        return ((const double *)buf)[i];
    }
}

/* Input element g of rank r's send buffer, in 1 .. 101. */
static int64_t val(int op, int r, int nranks, size_t g)
{
    size_t ur = (size_t)r;

    switch (op) {
    case HCOMM_SUM:
        return 1 + (int64_t)((ur * (1 + g % 3) + g) % 4);
    case HCOMM_PROD:
        return (ur + g) % 3 == 0 ? 2 : 1;
    case HCOMM_MIN:
    case HCOMM_MAX:
        return 1 + (int64_t)((ur * 37 + g * 11) % 100);
    case HCOMM_AVG: /* base 2 or 3, +1/-1 by rank pairs: the deviations cancel */
        if (nranks % 2 == 1 && r == nranks - 1)
            return 2 + (int64_t)(g % 2);
        return 2 + (int64_t)(g % 2) + (r % 2 ? -1 : 1);
    default:
        return 1 + (int64_t)((ur * 13 + g) % 101);
    }
}

typedef struct {
    int64_t i; /* integer dtypes: wrapped */
    double  f; /* float dtypes: rounded to the dtype */
} perf_ref_t;

static void reduce_ref(const perf_ctx_t *ctx, size_t g, perf_ref_t *ref)
{
    uint64_t ia = 0;
    double   fa = 0;
    int      op = ctx->op;

    for (int q = 0; q < ctx->nranks; q++) {
        int64_t v = val(op, q, ctx->nranks, g);

        if (q == 0) {
            ia = (uint64_t)v;
            fa = (double)v;
        } else if (op == HCOMM_SUM || op == HCOMM_AVG) {
            ia += (uint64_t)v;
            fa += (double)v;
        } else if (op == HCOMM_PROD) {
            ia *= (uint64_t)v;
            fa *= (double)v;
        } else if ((op == HCOMM_MIN) == (v < (int64_t)ia)) {
            ia = (uint64_t)v; /* inputs are small and positive: compare as int64 */
            fa = (double)v;
        }
    }
    ref->i = wrap_int(ctx->dtype, ia);
    if (op == HCOMM_AVG) {
        if (is_signed_int(ctx->dtype))
            ref->i = ref->i / ctx->nranks;
        else
            ref->i = (int64_t)((uint64_t)ref->i / (uint64_t)ctx->nranks);
        fa /= ctx->nranks;
    }
    ref->f = round_float(ctx->dtype, fa);
}

/* Expected value of element g of this rank's receive buffer. */
static void expected(const perf_ctx_t *ctx, size_t param, size_t g, perf_ref_t *ref)
{
    int     n = ctx->nranks, r = ctx->rank;
    size_t  q = param ? g / param : 0, j = param ? g % param : 0;
    int64_t v;

    switch (ctx->args->coll) {
    case PERF_ALL_REDUCE:
    case PERF_REDUCE:
        reduce_ref(ctx, g, ref);
        return;
    case PERF_REDUCE_SCATTER:
        reduce_ref(ctx, (size_t)r * param + g, ref);
        return;
    case PERF_BROADCAST:
        v = val(ctx->op, ctx->args->root, n, g);
        break;
    case PERF_ALL_GATHER:
        v = val(ctx->op, (int)q, n, j);
        break;
    case PERF_ALLTOALL:
        v = val(ctx->op, (int)q, n, (size_t)r * param + j);
        break;
    case PERF_ALLTOALLV: { /* the block of the sender p that holds element g */
        const size_t *rc = ctx->a2av + 2 * n, *rd = ctx->a2av + 3 * n;
        int           p = 0;
        while (p < n - 1 && (g < rd[p] || g >= rd[p] + rc[p]))
            p++;
        v = val(ctx->op, p, n, perf_coll_a2av_src_off(ctx, p) + g - rd[p]);
        break;
    }
    default:
        v = val(ctx->op, (r - 1 + n) % n, n, g);
        break;
    }
    ref->i = wrap_int(ctx->dtype, (uint64_t)v);
    ref->f = round_float(ctx->dtype, (double)v);
}

void perf_check_fill_zero(const perf_ctx_t *ctx)
{
    memset(ctx->sbuf, 0, ctx->bufbytes);
    memset(ctx->rbuf, 0, ctx->bufbytes);
}

void perf_check_fill(const perf_ctx_t *ctx, size_t param, int inplace)
{
    perf_counts_t c;
    size_t        ws = hcomm_dtype_size(ctx->dtype);
    void         *sb, *rb;

    perf_coll_elems(ctx->args->coll, param, ctx->nranks, &c);
    perf_coll_buffers(ctx, param, inplace, &sb, &rb);
    /* Clear the whole receive side first: in place, the input is written into it. */
    memset(ctx->rbuf, 0, (c.send_elems > c.recv_elems ? c.send_elems : c.recv_elems) * ws);
    for (size_t g = 0; g < c.send_elems; g++)
        store(sb, ctx->dtype, g, val(ctx->op, ctx->rank, ctx->nranks, g));
}

uint64_t perf_check_count(const perf_ctx_t *ctx, size_t param, int inplace)
{
    perf_counts_t c;
    uint64_t      wrong = 0;
    perf_ref_t    ref;
    void         *sb, *rb;

    if (ctx->args->coll == PERF_REDUCE && ctx->rank != ctx->args->root)
        return 0; /* only the root's result is defined */
    perf_coll_elems(ctx->args->coll, param, ctx->nranks, &c);
    perf_coll_buffers(ctx, param, inplace, &sb, &rb);
    for (size_t g = 0; g < c.recv_elems; g++) {
        expected(ctx, param, g, &ref);
        if (is_float(ctx->dtype))
            wrong += load_float(rb, ctx->dtype, g) != ref.f;
        else
            wrong += load_int(rb, ctx->dtype, g) != ref.i;
    }
    return wrong;
}

double perf_check_load_float(const void *buf, hcomm_dtype_t dt, size_t i)
{
    return load_float(buf, dt, i);
}

void perf_check_store_float(void *buf, hcomm_dtype_t dt, size_t i, double v)
{
    if (dt == HCOMM_FLOAT16)
        ((uint16_t *)buf)[i] = f32_to_f16((float)v);
    else if (dt == HCOMM_BFLOAT16)
        ((uint16_t *)buf)[i] = f32_to_bf16((float)v);
    else if (dt == HCOMM_FLOAT32)
        ((float *)buf)[i] = (float)v;
    else
        ((double *)buf)[i] = v;
}
