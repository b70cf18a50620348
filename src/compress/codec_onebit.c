/* codec_onebit.c - 1-bit codec: per block, the mean |v| as scale and one sign
 * bit per value, with error feedback.
 *
 * One pass over memory per block: the first loop computes v = in + residual
 * into residual (8 KiB, stays in L1) and sums |v|; the second reads it back for
 * the bits and the new residual. The sum uses 8 partial sums, value i in lane
 * i % 8, combined in one fixed order, so that the generic path and the AVX2
 * path (chosen at run time) give the same bits; the unit test compares them.
 *
 * A block whose sum of |v| overflows a float though every v is finite gets
 * its scale from a sum in double (scale_slow): finite values decode finite.
 * A residual that is not finite (v or the scale was inf or NaN) is stored as 0:
 * one overflowing step, which loss scaling skips, must not poison the residual
 * of every later step. */
#include "compress/codec.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/reduce.h"
#include "base/reduce_half.h"

#ifndef __clang__ /* the generic path is written to vectorise; -O2 alone does not */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#define HC_AVX2 __attribute__((target("avx2")))

/* Exported for the unit test, which compares the two paths. */
void hc_onebit_encode_generic(const float *in, float *residual, size_t n, uint8_t *out);
void hc_onebit_encode_avx2(const float *in, float *residual, size_t n, uint8_t *out);
void hc_onebit_decode_generic(const uint8_t *msg, size_t n, float *out, int add);
void hc_onebit_decode_avx2(const uint8_t *msg, size_t n, float *out, int add);
int  hc_onebit_avx2_usable(void);

size_t hc_onebit_bytes(size_t n)
{
    size_t full = n / HC_ONEBIT_BLOCK, rem = n % HC_ONEBIT_BLOCK;
    size_t bytes = full * (sizeof(float) + HC_ONEBIT_BLOCK / 8);

    if (rem)
        bytes += sizeof(float) + (rem + 7) / 8;
    return bytes;
}

/* The fixed combination order of the 8 lane sums; the AVX2 path stores its
 * accumulator to memory and calls this too. */
static inline float lanes_total(const float l[8])
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* The scale of a block whose float sum of |v| (s) is not finite: when every
 * v is finite, their mean fits a float though their sum may not (2048 x
 * 1e36), so the sum again in double; otherwise s. Rare, and both paths call
 * it, so their outputs stay the same bits. */
static float scale_slow(const float *v, size_t len, float s)
{
    double sum = 0.0;

    for (size_t i = 0; i < len; i++)
        sum += fabs((double)v[i]);
    return isfinite(sum) ? (float)(sum / (double)len) : s;
}

/* v for value i: in + residual into residual, or in alone. */
static inline float tail_v(const float *in, float *res, size_t i)
{
    float x = in[i];

    if (res) {
        x += res[i];
        res[i] = x;
    }
    return x;
}

/* The new residual of value v against scale s. */
static inline float residual_of(float v, float s)
{
    float d = v - hc_bits_f32(hc_f32_bits(s) ^ (uint32_t)(v < 0.0f) << 31);

    return fabsf(d) < INFINITY ? d : 0.0f;
}

/* Sign bits of the values [from, len) (from a multiple of 8), then (res not
 * NULL) the residual of each, in place: v is res. Two loops, each simple
 * enough to vectorise. */
static inline void bits_scalar(const float *v, float *res, size_t from, size_t len, float s,
                               uint8_t *bits)
{
    size_t g = from;

    for (; g + 8 <= len; g += 8) {
        unsigned byte = 0;

        for (size_t j = 0; j < 8; j++)
            byte |= (unsigned)(v[g + j] < 0.0f) << j;
        bits[g / 8] = (uint8_t)byte;
    }
    if (g < len) {
        unsigned byte = 0;

        for (size_t i = g; i < len; i++)
            byte |= (unsigned)(v[i] < 0.0f) << (i - g);
        bits[g / 8] = (uint8_t)byte;
    }
    if (res)
        for (size_t i = from; i < len; i++)
            res[i] = residual_of(res[i], s);
}

/* Sum of |v| into the 8 lanes over the full groups of 8; v into res. Written
 * as 8-wide steps so that compilers vectorise it without reordering a lane. */
static void lanes_generic(const float *in, float *res, size_t full, float lane[8])
{
    for (size_t g = 0; g < full; g += 8) {
        for (size_t j = 0; j < 8; j++) {
            float x = res ? in[g + j] + res[g + j] : in[g + j];

            if (res)
                res[g + j] = x;
            lane[j] += fabsf(x);
        }
    }
}

static void encode_block_generic(const float *in, float *res, size_t len, uint8_t *out)
{
    float        lane[8] = {0};
    const float *v       = res ? res : in;
    size_t       full    = len & ~(size_t)7;
    float        s;

    if (res)
        lanes_generic(in, res, full, lane);
    else
        lanes_generic(in, NULL, full, lane);
    for (size_t i = full; i < len; i++)
        lane[i % 8] += fabsf(tail_v(in, res, i));
    s = lanes_total(lane) / (float)len;
    if (!(s <= FLT_MAX))
        s = scale_slow(v, len, s);
    memcpy(out, &s, sizeof(s));
    if (res)
        bits_scalar(v, res, 0, len, s, out + sizeof(s));
    else
        bits_scalar(v, NULL, 0, len, s, out + sizeof(s));
}

static HC_AVX2 void encode_block_avx2(const float *in, float *res, size_t len, uint8_t *out)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 sgn  = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    const __m256 inf  = _mm256_set1_ps(INFINITY);
    const float *v    = res ? res : in;
    size_t       full = len & ~(size_t)7, i;
    __m256       acc = _mm256_setzero_ps(), vs, zero = _mm256_setzero_ps();
    float        lane[8], s;
    uint8_t     *bits = out + sizeof(s);

    for (i = 0; i < full; i += 8) {
        __m256 x = _mm256_loadu_ps(in + i);

        if (res) {
            x = _mm256_add_ps(x, _mm256_loadu_ps(res + i));
            _mm256_storeu_ps(res + i, x);
        }
        acc = _mm256_add_ps(acc, _mm256_and_ps(x, absm));
    }
    _mm256_storeu_ps(lane, acc);
    for (; i < len; i++)
        lane[i % 8] += fabsf(tail_v(in, res, i));
    s = lanes_total(lane) / (float)len;
    if (!(s <= FLT_MAX))
        s = scale_slow(v, len, s);
    memcpy(out, &s, sizeof(s));
    vs = _mm256_set1_ps(s);
    for (i = 0; i < full; i += 8) {
        __m256 x   = _mm256_loadu_ps(v + i);
        __m256 neg = _mm256_cmp_ps(x, zero, _CMP_LT_OQ);

        bits[i / 8] = (uint8_t)_mm256_movemask_ps(neg);
        if (res) {
            __m256 r = _mm256_sub_ps(x, _mm256_xor_ps(vs, _mm256_and_ps(neg, sgn)));

            r = _mm256_and_ps(r, _mm256_cmp_ps(_mm256_and_ps(r, absm), inf, _CMP_LT_OQ));
            _mm256_storeu_ps(res + i, r);
        }
    }
    bits_scalar(v, res, full, len, s, bits);
}

typedef void (*encode_block_fn)(const float *, float *, size_t, uint8_t *);

static void encode_with(encode_block_fn fn, const float *in, float *res, size_t n, uint8_t *out)
{
    for (size_t b = 0; b < n; b += HC_ONEBIT_BLOCK) {
        size_t len = n - b < HC_ONEBIT_BLOCK ? n - b : HC_ONEBIT_BLOCK;

        fn(in + b, res ? res + b : NULL, len, out);
        out += sizeof(float) + (len + 7) / 8;
    }
}

int hc_onebit_avx2_usable(void)
{
    return hc_cpu_has_avx2(); /* cached: this runs per message */
}

void hc_onebit_encode_generic(const float *in, float *residual, size_t n, uint8_t *out)
{
    encode_with(encode_block_generic, in, residual, n, out);
}

void hc_onebit_encode_avx2(const float *in, float *residual, size_t n, uint8_t *out)
{
    encode_with(encode_block_avx2, in, residual, n, out);
}

void hc_onebit_encode(const float *in, float *residual, size_t n, uint8_t *out)
{
    encode_with(hc_onebit_avx2_usable() ? encode_block_avx2 : encode_block_generic, in, residual, n,
                out);
}

/* Decoded values [from, len) of one block. */
static inline void decode_scalar(const uint8_t *bits, size_t from, size_t len, float s, float *out,
                                 int add)
{
    uint32_t sb = hc_f32_bits(s);
    size_t   g  = from;

    for (; g + 8 <= len; g += 8) {
        for (size_t j = 0; j < 8; j++) {
            float d = hc_bits_f32(sb ^ (uint32_t)((bits[g / 8] >> j) & 1) << 31);

            out[g + j] = add ? out[g + j] + d : d;
        }
    }
    for (size_t i = g; i < len; i++) {
        float d = hc_bits_f32(sb ^ (uint32_t)((bits[i / 8] >> (i % 8)) & 1) << 31);

        out[i] = add ? out[i] + d : d;
    }
}

static void decode_block_generic(const uint8_t *msg, size_t len, float *out, int add)
{
    float s;

    memcpy(&s, msg, sizeof(s));
    decode_scalar(msg + sizeof(s), 0, len, s, out, add);
}

static HC_AVX2 void decode_block_avx2(const uint8_t *msg, size_t len, float *out, int add)
{
    const __m256i  lanebit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256   sgn     = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    const uint8_t *bits    = msg + sizeof(float);
    size_t         full    = len & ~(size_t)7, i;
    float          s;
    __m256         vs;

    memcpy(&s, msg, sizeof(s));
    vs = _mm256_set1_ps(s);
    for (i = 0; i < full; i += 8) {
        __m256i m = _mm256_and_si256(_mm256_set1_epi32(bits[i / 8]), lanebit);
        __m256  d = _mm256_xor_ps(
             vs, _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(m, lanebit)), sgn));

        if (add)
            d = _mm256_add_ps(_mm256_loadu_ps(out + i), d);
        _mm256_storeu_ps(out + i, d);
    }
    decode_scalar(bits, full, len, s, out, add);
}

typedef void (*decode_block_fn)(const uint8_t *, size_t, float *, int);

static void decode_with(decode_block_fn fn, const uint8_t *msg, size_t n, float *out, int add)
{
    for (size_t b = 0; b < n; b += HC_ONEBIT_BLOCK) {
        size_t len = n - b < HC_ONEBIT_BLOCK ? n - b : HC_ONEBIT_BLOCK;

        fn(msg, len, out + b, add);
        msg += sizeof(float) + (len + 7) / 8;
    }
}

void hc_onebit_decode_generic(const uint8_t *msg, size_t n, float *out, int add)
{
    decode_with(decode_block_generic, msg, n, out, add);
}

void hc_onebit_decode_avx2(const uint8_t *msg, size_t n, float *out, int add)
{
    decode_with(decode_block_avx2, msg, n, out, add);
}

void hc_onebit_decode(const uint8_t *msg, size_t n, float *out, int add)
{
    decode_with(hc_onebit_avx2_usable() ? decode_block_avx2 : decode_block_generic, msg, n, out,
                add);
}
