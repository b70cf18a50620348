/* cast.c - float16 / bfloat16 casts of float32 arrays, with error feedback.
 *
 * The generic path calls the scalar conversions of reduce.h. The
 * AVX2 path (F16C for float16) gives the same bits: F16C rounds to nearest
 * even and quiets a NaN keeping its top payload bits as hc_float_to_half does,
 * and the bfloat16 path is the same integer formula 8 lanes at a time. The unit
 * test compares hc_cast_encode / hc_cast_decode with the scalar conversions.
 *
 * A residual that is not finite (v was inf or NaN, or overflowed the format) is
 * stored as 0, as in the onebit codec. */
#include "base/cast.h"

#include <immintrin.h>
#include <math.h>

#include "base/reduce.h"
#include "base/reduce_half.h"

#define HC_AVX2_F16C __attribute__((target("avx2,f16c")))

/* The cached checks of reduce_half.c: cpuid is slow (a VM exit under
 * a hypervisor) and these run per message. */
static int avx2_usable(int half)
{
    return hc_cpu_has_avx2() && (!half || hc_reduce_f16c_usable());
}

static inline float residual_of(float v, float d)
{
    float r = v - d;

    return fabsf(r) < INFINITY ? r : 0.0f;
}

static void encode_generic(const float *in, float *res, size_t from, size_t n, int half,
                           uint16_t *out)
{
    for (size_t i = from; i < n; i++) {
        float    v = res ? in[i] + res[i] : in[i];
        uint16_t h = half ? hc_float_to_half(v) : hc_float_to_bf16(v);

        out[i] = h;
        if (res)
            res[i] = residual_of(v, half ? hc_half_to_float(h) : hc_bf16_to_float(h));
    }
}

static void decode_generic(const uint16_t *msg, size_t from, size_t n, int half, float *out,
                           int add)
{
    for (size_t i = from; i < n; i++) {
        float d = half ? hc_half_to_float(msg[i]) : hc_bf16_to_float(msg[i]);

        out[i] = add ? out[i] + d : d;
    }
}

/* 8 floats to bfloat16 (round to nearest even, NaN truncated and quieted),
 * in the low 16 bits of each 32-bit lane. */
static inline HC_AVX2_F16C __m256i bf16_round(__m256 x)
{
    __m256i u   = _mm256_castps_si256(x);
    __m256i hi  = _mm256_srli_epi32(u, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r   = _mm256_srli_epi32(
          _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));

    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

/* The low 16 bits of each lane, packed in order. */
static inline HC_AVX2_F16C __m128i pack16(__m256i x)
{
    __m256i p = _mm256_packus_epi32(x, x); /* lanes 0-3 0-3 | 4-7 4-7 */

    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

static HC_AVX2_F16C void encode_avx2(const float *in, float *res, size_t n, int half, uint16_t *out)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf  = _mm256_set1_ps(INFINITY);
    size_t       i;

    for (i = 0; i + 8 <= n; i += 8) {
        __m256  v = _mm256_loadu_ps(in + i), d, r;
        __m128i h;

        if (res)
            v = _mm256_add_ps(v, _mm256_loadu_ps(res + i));
        if (half) {
            h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
            d = _mm256_cvtph_ps(h);
        } else {
            h = pack16(bf16_round(v));
            d = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        }
        _mm_storeu_si128((__m128i *)(out + i), h);
        if (res) {
            r = _mm256_sub_ps(v, d);
            r = _mm256_and_ps(r, _mm256_cmp_ps(_mm256_and_ps(r, absm), inf, _CMP_LT_OQ));
            _mm256_storeu_ps(res + i, r);
        }
    }
    encode_generic(in, res, i, n, half, out);
}

static HC_AVX2_F16C void decode_avx2(const uint16_t *msg, size_t n, int half, float *out, int add)
{
    size_t i;

    for (i = 0; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(msg + i));
        __m256  d = half ? _mm256_cvtph_ps(h)
                         : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));

        if (add)
            d = _mm256_add_ps(_mm256_loadu_ps(out + i), d);
        _mm256_storeu_ps(out + i, d);
    }
    decode_generic(msg, i, n, half, out, add);
}

void hc_cast_encode(const float *in, float *residual, size_t n, int half, uint16_t *out)
{
    if (avx2_usable(half))
        encode_avx2(in, residual, n, half, out);
    else
        encode_generic(in, residual, 0, n, half, out);
}

void hc_cast_decode(const uint16_t *msg, size_t n, int half, float *out, int add)
{
    if (avx2_usable(half))
        decode_avx2(msg, n, half, out, add);
    else
        decode_generic(msg, 0, n, half, out, add);
}
