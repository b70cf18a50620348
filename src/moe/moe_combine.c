/* moe_combine.c - hcomm_moe_combine: the expert side sums weight x output
 * over each received row's local experts (float32, slot order), rounds the
 * partial sum to the dtype and sends one row per (token, rank) pair back
 * through hcomm_alltoallv in the dispatch's layout reversed; the owner adds
 * the partial sums in float32, in rank order, and rounds once. The dispatch's
 * wire buffers hold the partial sums: a row of them is shorter than a row. */
#include <string.h>

#include "base/cast.h"
#include "base/log.h"
#include "base/reduce.h"
#include "base/reduce_half.h"
#include "core/group.h"
#include "device/device.h"
#include "moe/moe.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* float16 rows through F16C, eight at a time: multiply, then add, as the
 * scalar loop does (no FMA), so both give the same bits. */
__attribute__((target("avx,f16c"))) static void axpy_f16c(float *acc, float w, const uint16_t *x,
                                                          size_t H)
{
    __m256 vw = _mm256_set1_ps(w);
    size_t h  = 0;

    for (; h + 8 <= H; h += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + h)));
        _mm256_storeu_ps(acc + h, _mm256_add_ps(_mm256_loadu_ps(acc + h), _mm256_mul_ps(vw, v)));
    }
    for (; h < H; h++)
        acc[h] += w * hc_half_to_float(x[h]);
}
#else
static void axpy_f16c(float *acc, float w, const uint16_t *x, size_t H)
{
    for (size_t h = 0; h < H; h++)
        acc[h] += w * hc_half_to_float(x[h]);
}
#endif

/* acc[h] += w * x[h], x a row of dtype; f16c: hc_reduce_f16c_usable(), asked
 * once per call rather than per row. */
static void axpy_row(float *acc, float w, const void *x, size_t H, hcomm_dtype_t dt, int f16c)
{
    if (dt == HCOMM_FLOAT16 && f16c) {
        axpy_f16c(acc, w, x, H);
    } else if (dt == HCOMM_FLOAT32) {
        const float *f = x;
        for (size_t h = 0; h < H; h++)
            acc[h] += w * f[h];
    } else if (dt == HCOMM_BFLOAT16) {
        const uint16_t *b = x;
        for (size_t h = 0; h < H; h++)
            acc[h] += w * hc_bits_f32((uint32_t)b[h] << 16);
    } else {
        const uint16_t *b = x;
        for (size_t h = 0; h < H; h++)
            acc[h] += w * hc_half_to_float(b[h]);
    }
}

/* Rounds a float32 row to dtype: the codecs' vectorised casts (nearest even,
 * NaN quieted, as hc_float_to_half / hc_float_to_bf16). */
static void store_row(void *dst, const float *src, size_t H, hcomm_dtype_t dt)
{
    if (dt == HCOMM_FLOAT32)
        memcpy(dst, src, H * sizeof(float));
    else
        hc_cast_encode(src, NULL, H, dt == HCOMM_FLOAT16, dst);
}

/* The partial sum of every received row, into rbuf. */
static void partial_sums(hcomm_moe_t m, const void *expert_out)
{
    const size_t *map = m->rowmap.p;
    const float  *wt  = m->weight.p;
    size_t        H = m->hidden, k = (size_t)m->topk;
    int           f16c = hc_reduce_f16c_usable();

    for (size_t i = 0; i < m->nrecv; i++) {
        memset(m->frow, 0, H * sizeof(float));
        for (size_t j = 0; j < k; j++) {
            size_t pos = map[i * k + j];
            if (pos != SIZE_MAX)
                axpy_row(m->frow, wt[pos], (const char *)expert_out + pos * m->tok_bytes, H,
                         m->dtype, f16c);
        }
        store_row((char *)m->rbuf.p + i * m->tok_bytes, m->frow, H, m->dtype);
    }
}

/* out[t] = sum over the rows that came back for t, in rank order. */
static hcomm_status_t accumulate(hcomm_moe_t m, void *out)
{
    const int32_t *tok = m->send_tok.p;
    size_t         H = m->hidden, T = m->ntokens;
    float         *acc = out;

    if (m->dtype != HCOMM_FLOAT32) {
        if (T > SIZE_MAX / H / sizeof(float) ||
            hc_moe_grow(&m->facc, T * H * sizeof(float), "combine sums") != 0)
            return HCOMM_ERR_NO_MEMORY;
        acc = m->facc.p;
    }
    if (T == 0)
        return HCOMM_SUCCESS; /* out may be NULL */
    memset(acc, 0, T * H * sizeof(float));
    int f16c = hc_reduce_f16c_usable();
    for (size_t s = 0; s < m->nsend; s++) /* rows from rank 0 first, then 1, ... */
        axpy_row(acc + (size_t)tok[s] * H, 1.0f, (const char *)m->sbuf.p + s * m->tok_bytes, H,
                 m->dtype, f16c);
    if (m->dtype != HCOMM_FLOAT32)
        for (size_t t = 0; t < T; t++)
            store_row((char *)out + t * m->tok_bytes, acc + t * H, H, m->dtype);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_moe_combine(hcomm_moe_t moe, const void *expert_out, void *out)
{
    const char    *name = "hcomm_moe_combine";
    hcomm_status_t st;
    uint64_t       b0 = 0, b1 = 0;

    if (moe == NULL) {
        hc_error(MOE, "%s: NULL handle", name);
        return HCOMM_ERR_INVALID_ARG;
    }
    if ((st = hc_mem_host_only(name, expert_out, 1)) != HCOMM_SUCCESS ||
        (st = hc_mem_host_only(name, out, 1)) != HCOMM_SUCCESS)
        return st;
    if (hc_group_active()) {
        hc_group_refuse(HCOMM_ERR_INVALID_USAGE, name);
        hc_error(MOE, "%s: not allowed inside a group", name);
        return HCOMM_ERR_INVALID_USAGE;
    }
    if (!moe->have_layout) {
        hc_error(MOE, "%s: no successful dispatch to combine", name);
        return HCOMM_ERR_INVALID_USAGE;
    }
    if ((moe->nrows != 0 && expert_out == NULL) || (moe->ntokens != 0 && out == NULL)) {
        hc_error(MOE, "%s: NULL %s", name, out == NULL ? "out" : "expert_out");
        return HCOMM_ERR_NULL_BUFFER;
    }
    st = hcomm_comm_bytes_sent(moe->comm, &b0);
    if (st != HCOMM_SUCCESS)
        return st;
    partial_sums(moe, expert_out);
    for (int p = 0; p < moe->nranks; p++) { /* the dispatch reversed */
        moe->bytes[0][p] = moe->rcount[p] * moe->tok_bytes;
        moe->bytes[1][p] = moe->rdispl[p] * moe->tok_bytes;
        moe->bytes[2][p] = moe->scount[p] * moe->tok_bytes;
        moe->bytes[3][p] = moe->sdispl[p] * moe->tok_bytes;
    }
    st = hcomm_alltoallv(moe->rbuf.p, moe->bytes[0], moe->bytes[1], moe->sbuf.p, moe->bytes[2],
                         moe->bytes[3], HCOMM_UINT8, moe->comm, NULL);
    if (st == HCOMM_SUCCESS)
        st = accumulate(moe, out);
    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_bytes_sent(moe->comm, &b1);
    if (st != HCOMM_SUCCESS)
        return st;
    moe->stats.combine_bytes = b1 - b0;
    return HCOMM_SUCCESS;
}
