/* reduce_half.c - float16 / bfloat16 conversions and their reduction kernels.
 *
 * Both formats compute in float32 and round back to nearest even. float32 has
 * at least 2p + 2 bits for either format's p, so rounding twice (the float op,
 * then the narrowing) gives the correctly rounded sum or product of the two
 * 16-bit operands.
 *
 * The scalar conversions avoid branches (selects only) so that the kernels
 * around them vectorise. On CPUs with F16C, float16 uses the hardware
 * conversions instead. Both paths give the same bits: a NaN keeps its sign and
 * top payload bits and gets the quiet bit, as F16C does. Only which operand's
 * NaN a sum or product of two NaNs returns is unspecified (as for float32). */
#include "base/reduce.h"

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

#include "base/reduce_half.h"

#ifndef __clang__ /* clang vectorises these at -O2 already */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#ifdef HC_NO_LOAD_RESOLVERS /* a ThreadSanitizer build (configure.ac) */
#define HC_CLONES
#else
#define HC_CLONES __attribute__((target_clones("avx2", "default")))
#endif

/* Selects as masks: a ternary lets gcc sink the float op of one arm into a
 * branch, which then blocks vectorisation. */
static inline uint32_t sel(uint32_t cond, uint32_t x, uint32_t y)
{
    uint32_t m = 0u - cond; /* cond is 0 or 1 */

    return (x & m) | (y & ~m);
}

static inline float half_to_float(uint16_t h)
{
    uint32_t em   = (uint32_t)(h & 0x7fff) << 13; /* exponent and mantissa, float place */
    uint32_t exp  = em & 0x0f800000u;             /* the half exponent field */
    uint32_t norm = em + ((uint32_t)(127 - 15) << 23);
    /* Subnormal: make it 2^-14 * (1 + m) and subtract 2^-14; exact, and no
     * float subnormal is involved, so DAZ/FTZ modes cannot flush it. */
    uint32_t sub = hc_f32_bits(hc_bits_f32(em + (113u << 23)) - hc_bits_f32(113u << 23));
    /* inf, or NaN keeping its payload with the quiet bit set */
    uint32_t special = em | 0x7f800000u | ((uint32_t)(em > 0x0f800000u) << 22);
    uint32_t u       = sel(exp == 0, sub, norm);

    u = sel(exp == 0x0f800000u, special, u);
    return hc_bits_f32(u | (uint32_t)(h & 0x8000) << 16);
}

static inline uint16_t float_to_half(float f)
{
    uint32_t x    = hc_f32_bits(f);
    uint32_t ax   = x & 0x7fffffffu;
    uint32_t sign = (x >> 16) & 0x8000;
    /* Normal: rebias, add 0x0fff plus the lowest kept bit (ties to even), and a
     * carry out of the mantissa correctly bumps the exponent (up to inf). */
    uint32_t norm = (ax + ((uint32_t)(15 - 127) << 23) + 0x0fff + ((ax >> 13) & 1)) >> 13;
    /* Below 2^-14: adding 0.5f, whose ulp is 2^-24 (the half subnormal step),
     * lets the FPU round to nearest even; the low bits are the result. */
    uint32_t sub = hc_f32_bits(hc_bits_f32(ax) + 0.5f) - hc_f32_bits(0.5f);
    uint32_t r   = sel(ax < (113u << 23), sub, norm);

    r = sel(ax >= (143u << 23), 0x7c00u, r);           /* >= 2^16: inf */
    r = sel(ax > 0x7f800000u, 0x7e00u | ((ax >> 13) & 0x3ff), r); /* NaN: quiet */
    return (uint16_t)(r | sign);
}

static inline float bf16_to_float(uint16_t b)
{
    return hc_bits_f32((uint32_t)b << 16);
}

static inline uint16_t float_to_bf16(float f)
{
    uint32_t x = hc_f32_bits(f);
    uint32_t r = (x + 0x7fff + ((x >> 16) & 1)) >> 16;

    /* A NaN must not round into inf: truncate it and set the quiet bit. The
     * self-compare is one vector instruction; an unsigned compare is three. */
    r = f != f ? (x >> 16) | 0x0040 : r;
    return (uint16_t)r;
}

float hc_half_to_float(uint16_t h)
{
    return half_to_float(h);
}

uint16_t hc_float_to_half(float f)
{
    return float_to_half(f);
}

float hc_bf16_to_float(uint16_t b)
{
    return bf16_to_float(b);
}

uint16_t hc_float_to_bf16(float f)
{
    return float_to_bf16(f);
}

/* NaN-propagating min/max, the same selects as the float32 kernels. */
static inline float min_nan(float x, float y)
{
    float m = y < x ? y : x;

    return y != y ? y : m;
}

static inline float max_nan(float x, float y)
{
    float m = y > x ? y : x;

    return y != y ? y : m;
}

/* Alignment 1, as in reduce.c: pieces of a message may start at any byte. */
typedef uint16_t u16_ut __attribute__((aligned(1)));

#define HC_HALF_KERNEL(name, TOF, FROMF, EXPR)                                                     \
    static HC_CLONES void name(u16_ut *d, const u16_ut *a, const u16_ut *b, size_t n)              \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            float x = TOF(a[i]), y = TOF(b[i]);                                                    \
            d[i] = FROMF(EXPR);                                                                    \
        }                                                                                          \
    }

HC_HALF_KERNEL(f16_sum, half_to_float, float_to_half, x + y)
HC_HALF_KERNEL(f16_prod, half_to_float, float_to_half, x * y)
HC_HALF_KERNEL(f16_min, half_to_float, float_to_half, min_nan(x, y))
HC_HALF_KERNEL(f16_max, half_to_float, float_to_half, max_nan(x, y))
HC_HALF_KERNEL(bf16_sum, bf16_to_float, float_to_bf16, x + y)
HC_HALF_KERNEL(bf16_prod, bf16_to_float, float_to_bf16, x * y)
HC_HALF_KERNEL(bf16_min, bf16_to_float, float_to_bf16, min_nan(x, y))
HC_HALF_KERNEL(bf16_max, bf16_to_float, float_to_bf16, max_nan(x, y))

/* F16C: 8 elements per step; the tail goes through a zero-padded block so that
 * every element sees the same instructions. */
#define HC_F16C __attribute__((target("avx,f16c")))

static inline HC_F16C __m256 f16c_op(__m256 x, __m256 y, hcomm_op_t op)
{
    switch (op) {
    case HCOMM_PROD:
        return _mm256_mul_ps(x, y);
    case HCOMM_MIN: /* min_ps(y, x) = y < x ? y : x, then NaN in y wins */
        return _mm256_blendv_ps(_mm256_min_ps(y, x), y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    case HCOMM_MAX:
        return _mm256_blendv_ps(_mm256_max_ps(y, x), y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    default:
        return _mm256_add_ps(x, y);
    }
}

static inline HC_F16C void f16c_block(uint16_t *d, const uint16_t *a, const uint16_t *b,
                                      hcomm_op_t op)
{
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)a));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b));

    _mm_storeu_si128((__m128i *)d, _mm256_cvtps_ph(f16c_op(x, y, op), _MM_FROUND_TO_NEAREST_INT));
}

/* op is a loop invariant: inlining f16c_block per case keeps the switch out of
 * the loop. */
#define HC_F16C_LOOP(OP)                             \
    for (; i + 8 <= n; i += 8)                       \
        f16c_block(d + i, a + i, b + i, OP)

static HC_F16C void f16c_reduce(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n,
                                hcomm_op_t op)
{
    uint16_t ta[8] = {0}, tb[8] = {0}, td[8];
    size_t   i     = 0;

    switch (op) {
    case HCOMM_PROD:
        HC_F16C_LOOP(HCOMM_PROD);
        break;
    case HCOMM_MIN:
        HC_F16C_LOOP(HCOMM_MIN);
        break;
    case HCOMM_MAX:
        HC_F16C_LOOP(HCOMM_MAX);
        break;
    default:
        HC_F16C_LOOP(HCOMM_SUM);
        break;
    }
    if (i == n)
        return;
    memcpy(ta, a + i, (n - i) * sizeof(*a));
    memcpy(tb, b + i, (n - i) * sizeof(*b));
    f16c_block(td, ta, tb, op);
    memcpy(d + i, td, (n - i) * sizeof(*d));
}

/* Bit 0: AVX and F16C, bit 1: AVX2, each with the YMM registers saved by the
 * OS (XCR0 bits 1 and 2). cpuid rather than __builtin_cpu_supports, which
 * clang's runtime does not know F16C for. */
static int cpu_probe(void)
{
    unsigned a, b, c, d, xcr0_lo, xcr0_hi;
    int      f16c, avx2;

    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX))
        return 0;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0_lo & 6) != 6)
        return 0;
    f16c = (c & bit_F16C) != 0;
    avx2 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
    return f16c | avx2 << 1;
}

/* cpuid is slow (a VM exit under a hypervisor): probe once. Racing threads
 * store the same value. */
static int cpu_features(void)
{
    static int features = -1;
    int        f        = __atomic_load_n(&features, __ATOMIC_RELAXED);

    if (f < 0) {
        f = cpu_probe();
        __atomic_store_n(&features, f, __ATOMIC_RELAXED);
    }
    return f;
}

int hc_reduce_f16c_usable(void)
{
    return cpu_features() & 1;
}

int hc_cpu_has_avx2(void)
{
    return (cpu_features() >> 1) & 1;
}

void hc_reduce_f16_generic(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t count,
                           hcomm_op_t op)
{
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        f16_sum(dst, a, b, count);
        break;
    case HCOMM_PROD:
        f16_prod(dst, a, b, count);
        break;
    case HCOMM_MIN:
        f16_min(dst, a, b, count);
        break;
    case HCOMM_MAX:
        f16_max(dst, a, b, count);
        break;
    default:
        break;
    }
}

void hc_reduce_f16(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t count,
                   hcomm_op_t op)
{
    if ((unsigned)op >= (unsigned)HCOMM_OP_COUNT)
        return;
    if (hc_reduce_f16c_usable())
        f16c_reduce(dst, a, b, count, op);
    else
        hc_reduce_f16_generic(dst, a, b, count, op);
}

void hc_reduce_bf16(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t count,
                    hcomm_op_t op)
{
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        bf16_sum(dst, a, b, count);
        break;
    case HCOMM_PROD:
        bf16_prod(dst, a, b, count);
        break;
    case HCOMM_MIN:
        bf16_min(dst, a, b, count);
        break;
    case HCOMM_MAX:
        bf16_max(dst, a, b, count);
        break;
    default:
        break;
    }
}

static HC_CLONES void f16_div(uint16_t *buf, size_t count, float fn)
{
    for (size_t i = 0; i < count; i++)
        buf[i] = float_to_half(half_to_float(buf[i]) / fn);
}

static HC_CLONES void bf16_div(uint16_t *buf, size_t count, float fn)
{
    for (size_t i = 0; i < count; i++)
        buf[i] = float_to_bf16(bf16_to_float(buf[i]) / fn);
}

void hc_reduce_div_f16(uint16_t *buf, size_t count, int n)
{
    f16_div(buf, count, (float)n);
}

void hc_reduce_div_bf16(uint16_t *buf, size_t count, int n)
{
    bf16_div(buf, count, (float)n);
}
