/* coll_data.c - inputs, serial reference and comparison for coll_check. */
#include "coll_data.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int ct_is_float(hcomm_dtype_t dt)
{
    return dt == HCOMM_FLOAT16 || dt == HCOMM_BFLOAT16 || dt == HCOMM_FLOAT32 ||
           dt == HCOMM_FLOAT64;
}

int ct_is_signed(hcomm_dtype_t dt)
{
    return dt == HCOMM_INT8 || dt == HCOMM_INT32 || dt == HCOMM_INT64;
}

size_t ct_size(hcomm_dtype_t dt)
{
    switch (dt) {
    case HCOMM_INT8:
    case HCOMM_UINT8:
        return 1;
    case HCOMM_FLOAT16:
    case HCOMM_BFLOAT16:
        return 2;
    case HCOMM_INT32:
    case HCOMM_UINT32:
    case HCOMM_FLOAT32:
        return 4;
    case HCOMM_INT64:
    case HCOMM_UINT64:
    case HCOMM_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

static uint64_t mask_of(hcomm_dtype_t dt)
{
    size_t s = ct_size(dt);
    return s >= 8 ? UINT64_MAX : ((uint64_t)1 << (8 * s)) - 1;
}

static int64_t sign_extend(uint64_t u, hcomm_dtype_t dt)
{
    size_t bits = 8 * ct_size(dt);
    if (bits >= 64)
        return (int64_t)u;
    uint64_t sign = (uint64_t)1 << (bits - 1);
    return (int64_t)((u ^ sign) - sign);
}

/* splitmix64 finaliser: a cheap, well-mixed hash. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

ct_val_t ct_input(hcomm_dtype_t dt, hcomm_op_t op, int rank, size_t idx, uint64_t seed)
{
    uint64_t r = mix(mix(seed) ^ ((uint64_t)(unsigned)rank << 40) ^ (uint64_t)idx);
    ct_val_t v = {0, 0.0};

    if (op == HCOMM_PROD) {
        static const int prod_set[3] = {1, 2, -1};
        int64_t          s           = prod_set[r % 3];
        if (!ct_is_float(dt) && !ct_is_signed(dt))
            s = (int64_t)(r % 3) + 1;
        if (ct_is_float(dt))
            v.f = (double)s;
        else
            v.u = (uint64_t)s & mask_of(dt);
    } else if (ct_is_float(dt)) {
        v.f = (double)((int)(r % 9) - 4);
    } else {
        v.u = r & mask_of(dt);
    }
    return v;
}

void ct_store(void *buf, size_t i, hcomm_dtype_t dt, ct_val_t v)
{
    switch (dt) {
    case HCOMM_INT8:
    case HCOMM_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v.u;
        break;
    case HCOMM_INT32:
    case HCOMM_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)v.u;
        break;
    case HCOMM_INT64:
    case HCOMM_UINT64:
        ((uint64_t *)buf)[i] = v.u;
        break;
    case HCOMM_FLOAT16:
        ((uint16_t *)buf)[i] = ct_float_to_half((float)v.f);
        break;
    case HCOMM_BFLOAT16:
        ((uint16_t *)buf)[i] = ct_float_to_bf16((float)v.f);
        break;
    case HCOMM_FLOAT32:
        ((float *)buf)[i] = (float)v.f;
        break;
    case HCOMM_FLOAT64:
        ((double *)buf)[i] = v.f;
        break;
    default:
        break;
    }
}

ct_val_t ct_load(const void *buf, size_t i, hcomm_dtype_t dt)
{
    ct_val_t v = {0, 0.0};
    switch (dt) {
    case HCOMM_INT8:
    case HCOMM_UINT8:
        v.u = ((const uint8_t *)buf)[i];
        break;
    case HCOMM_INT32:
    case HCOMM_UINT32:
        v.u = ((const uint32_t *)buf)[i];
        break;
    case HCOMM_INT64:
    case HCOMM_UINT64:
        v.u = ((const uint64_t *)buf)[i];
        break;
    case HCOMM_FLOAT16:
        v.f = ct_half_to_float(((const uint16_t *)buf)[i]);
        break;
    case HCOMM_BFLOAT16:
        v.f = ct_bf16_to_float(((const uint16_t *)buf)[i]);
        break;
    case HCOMM_FLOAT32:
        v.f = ((const float *)buf)[i];
        break;
    case HCOMM_FLOAT64:
        v.f = ((const double *)buf)[i];
        break;
    default:
        break;
    }
    return v;
}

void ct_fill(void *buf, size_t count, hcomm_dtype_t dt, hcomm_op_t op, int rank, size_t base,
             uint64_t seed)
{
    for (size_t i = 0; i < count; i++)
        ct_store(buf, i, dt, ct_input(dt, op, rank, base + i, seed));
}

static uint64_t int_combine(hcomm_dtype_t dt, hcomm_op_t op, uint64_t a, uint64_t b)
{
    int sgn = ct_is_signed(dt);
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        return (a + b) & mask_of(dt);
    case HCOMM_PROD:
        return (a * b) & mask_of(dt);
    case HCOMM_MIN:
        if (sgn)
            return sign_extend(b, dt) < sign_extend(a, dt) ? b : a;
        return b < a ? b : a;
    case HCOMM_MAX:
        if (sgn)
            return sign_extend(b, dt) > sign_extend(a, dt) ? b : a;
        return b > a ? b : a;
    default:
        return a;
    }
}

static double float_combine(hcomm_op_t op, double a, double b)
{
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        return a + b;
    case HCOMM_PROD:
        return a * b;
    case HCOMM_MIN:
        return b < a ? b : a;
    case HCOMM_MAX:
        return b > a ? b : a;
    default:
        return a;
    }
}

ct_val_t ct_reduce_ref(hcomm_dtype_t dt, hcomm_op_t op, int nranks, size_t idx, uint64_t seed)
{
    ct_val_t acc = ct_input(dt, op, 0, idx, seed);

    for (int r = 1; r < nranks; r++) {
        ct_val_t b = ct_input(dt, op, r, idx, seed);
        if (ct_is_float(dt))
            acc.f = float_combine(op, acc.f, b.f);
        else
            acc.u = int_combine(dt, op, acc.u, b.u);
    }
    if (op == HCOMM_AVG) {
        if (ct_is_float(dt))
            acc.f /= nranks;
        else if (ct_is_signed(dt))
            acc.u = (uint64_t)(sign_extend(acc.u, dt) / nranks) & mask_of(dt);
        else
            acc.u /= (uint64_t)nranks;
    }
    return acc;
}

/*
 * Tolerance. Float inputs are integers in [-4, 4] (prod: {1, 2, -1}), so every
 * partial sum, product, min and max is exactly representable in every float type
 * (|sum| <= 4 * nranks <= 2048, |prod| <= 2^nranks): sum, prod, min and max must
 * be exact in any order. Only avg rounds: the library may divide at the end or
 * pre-scale each input by 1/nranks, and float16/bfloat16 round every step after
 * accumulating in float32. Each partial result then has magnitude at most
 * M = max(|expected|, 4), so the error is below nranks * eps * M, with eps =
 * 2^-11 (float16), 2^-8 (bfloat16), 2^-21 (float32: 2^-24 with a factor 8 of
 * slack), 2^-50 (float64). Integers are always exact.
 */
double ct_tolerance_eps(hcomm_dtype_t dt)
{
    switch (dt) {
    case HCOMM_FLOAT16:
        return ldexp(1.0, -11);
    case HCOMM_BFLOAT16:
        return ldexp(1.0, -8);
    case HCOMM_FLOAT32:
        return ldexp(1.0, -21);
    case HCOMM_FLOAT64:
        return ldexp(1.0, -50);
    default:
        return 0.0;
    }
}

double ct_tolerance(hcomm_dtype_t dt, hcomm_op_t op, int nranks, ct_val_t expected)
{
    if (!ct_is_float(dt) || op != HCOMM_AVG)
        return 0.0;
    double m = fabs(expected.f) > 4.0 ? fabs(expected.f) : 4.0;
    return nranks * ct_tolerance_eps(dt) * m;
}

int ct_equal(hcomm_dtype_t dt, ct_val_t got, ct_val_t expected, double tol)
{
    if (!ct_is_float(dt))
        return got.u == expected.u;
    if (tol == 0.0)
        return got.f == expected.f;
    return fabs(got.f - expected.f) <= tol; /* false for NaN */
}

void ct_format(char *s, size_t n, hcomm_dtype_t dt, ct_val_t v)
{
    if (ct_is_float(dt))
        snprintf(s, n, "%.9g", v.f);
    else if (ct_is_signed(dt))
        snprintf(s, n, "%" PRId64, sign_extend(v.u, dt));
    else
        snprintf(s, n, "%" PRIu64, v.u);
}

uint16_t ct_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax   = x & 0x7fffffffu;

    if (ax > 0x7f800000u)
        return sign | 0x7e00u; /* quiet NaN */
    if (ax >= 0x477ff000u)     /* >= 65520 rounds to infinity */
        return sign | 0x7c00u;
    if (ax <= 0x33000000u) /* <= 2^-25 rounds to zero (tie to even) */
        return sign;
    if (ax < 0x38800000u) { /* half subnormal: units of 2^-24 */
        uint32_t m     = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - (ax >> 23);
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h   = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is still correct */
    return (uint16_t)(sign | h);
}

float ct_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t x;
    float    f;

    if (e == 0) {
        f = (float)m * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    if (e == 31)
        x = sign | 0x7f800000u | (m << 13);
    else
        x = sign | ((e + 112u) << 23) | (m << 13);
    memcpy(&f, &x, sizeof(f));
    return f;
}

uint16_t ct_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float ct_bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float    f;
    memcpy(&f, &x, sizeof(f));
    return f;
}
