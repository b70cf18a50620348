/* reduce.c - element-wise reduction kernels for the integer, float32 and float64
 * dtypes, and the dispatch of hc_reduce / hc_reduce_div (float16 and bfloat16
 * kernels are in reduce_half.c).
 *
 * The kernels are plain loops that gcc vectorises; each is built twice
 * (target_clones: AVX2 and baseline) and picked once at load time. No pointer is
 * restrict: dst may alias a or b exactly, each index is read before it is
 * written, and gcc's runtime alias check lets exact aliasing (distance 0) take
 * the vector loop.
 *
 * Float min/max: a NaN in either operand gives NaN (the operand's own NaN, b's
 * when both are); otherwise equal values (including -0 and +0) give a. */
#include "base/reduce.h"

#include "base/reduce_half.h"

/* After the includes, so that the headers' inline functions keep their own
 * options. At -O2 gcc 12 only vectorises loops whose trip count it knows. */
#ifndef __clang__ /* clang vectorises these at -O2 already */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#ifdef HC_NO_LOAD_RESOLVERS /* a ThreadSanitizer build (configure.ac) */
#define HC_CLONES
#else
#define HC_CLONES __attribute__((target_clones("avx2", "default")))
#endif

/* The kernels reach their elements through types of alignment 1: a
 * transport hands a message on in pieces that may start at any byte (a tcp
 * read can end inside an element), and a load through a misaligned int32_t *
 * is undefined behaviour (UBSan caught it); x86 loads them at full speed. */
#define HC_UNALIGNED(name, T) typedef T name##_ut __attribute__((aligned(1)))

/* Integers: sum and prod in the unsigned type U of the same width, so that
 * overflow wraps instead of being undefined. */
#define HC_INT_KERNELS(name, T, U)                                                                 \
    HC_UNALIGNED(name, T);                                                                         \
    static HC_CLONES void name##_sum(name##_ut *d, const name##_ut *a, const name##_ut *b,         \
                                     size_t n)                                                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = (T)((U)a[i] + (U)b[i]);                                                         \
    }                                                                                              \
    static HC_CLONES void name##_prod(name##_ut *d, const name##_ut *a, const name##_ut *b,        \
                                      size_t n)                                                    \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = (T)((U)a[i] * (U)b[i]);                                                         \
    }                                                                                              \
    static HC_CLONES void name##_min(name##_ut *d, const name##_ut *a, const name##_ut *b,         \
                                     size_t n)                                                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = b[i] < a[i] ? b[i] : a[i];                                                      \
    }                                                                                              \
    static HC_CLONES void name##_max(name##_ut *d, const name##_ut *a, const name##_ut *b,         \
                                     size_t n)                                                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = b[i] > a[i] ? b[i] : a[i];                                                      \
    }

/* Floats: min/max select b only when it is strictly better or NaN; both
 * selects compile to compare + blend, so the loops vectorise without
 * -ffast-math. */
#define HC_FLOAT_KERNELS(name, T)                                                                  \
    HC_UNALIGNED(name, T);                                                                         \
    static HC_CLONES void name##_sum(name##_ut *d, const name##_ut *a, const name##_ut *b,         \
                                     size_t n)                                                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = a[i] + b[i];                                                                    \
    }                                                                                              \
    static HC_CLONES void name##_prod(name##_ut *d, const name##_ut *a, const name##_ut *b,        \
                                      size_t n)                                                    \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = a[i] * b[i];                                                                    \
    }                                                                                              \
    static HC_CLONES void name##_min(name##_ut *d, const name##_ut *a, const name##_ut *b,         \
                                     size_t n)                                                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = a[i], y = b[i];                                                                  \
            T m  = y < x ? y : x;                                                                  \
            d[i] = y != y ? y : m;                                                                 \
        }                                                                                          \
    }                                                                                              \
    static HC_CLONES void name##_max(name##_ut *d, const name##_ut *a, const name##_ut *b,         \
                                     size_t n)                                                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = a[i], y = b[i];                                                                  \
            T m  = y > x ? y : x;                                                                  \
            d[i] = y != y ? y : m;                                                                 \
        }                                                                                          \
    }

/* One switch on op per dtype; HCOMM_AVG reduces as a sum. */
#define HC_OP_DISPATCH(name)                                                                       \
    static void name##_reduce(void *d, const void *a, const void *b, size_t n, hcomm_op_t op)      \
    {                                                                                              \
        switch (op) {                                                                              \
        case HCOMM_SUM:                                                                            \
        case HCOMM_AVG:                                                                            \
            name##_sum((name##_ut *)d, (const name##_ut *)a, (const name##_ut *)b, n);             \
            break;                                                                                 \
        case HCOMM_PROD:                                                                           \
            name##_prod((name##_ut *)d, (const name##_ut *)a, (const name##_ut *)b, n);            \
            break;                                                                                 \
        case HCOMM_MIN:                                                                            \
            name##_min((name##_ut *)d, (const name##_ut *)a, (const name##_ut *)b, n);             \
            break;                                                                                 \
        case HCOMM_MAX:                                                                            \
            name##_max((name##_ut *)d, (const name##_ut *)a, (const name##_ut *)b, n);             \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

HC_INT_KERNELS(k_i8, int8_t, uint8_t)
HC_INT_KERNELS(k_u8, uint8_t, uint8_t)
HC_INT_KERNELS(k_i32, int32_t, uint32_t)
HC_INT_KERNELS(k_u32, uint32_t, uint32_t)
HC_INT_KERNELS(k_i64, int64_t, uint64_t)
HC_INT_KERNELS(k_u64, uint64_t, uint64_t)
HC_FLOAT_KERNELS(k_f32, float)
HC_FLOAT_KERNELS(k_f64, double)

HC_OP_DISPATCH(k_i8)
HC_OP_DISPATCH(k_u8)
HC_OP_DISPATCH(k_i32)
HC_OP_DISPATCH(k_u32)
HC_OP_DISPATCH(k_i64)
HC_OP_DISPATCH(k_u64)
HC_OP_DISPATCH(k_f32)
HC_OP_DISPATCH(k_f64)

void hc_reduce(void *dst, const void *a, const void *b, size_t count, hcomm_dtype_t dtype,
               hcomm_op_t op)
{
    if (count == 0)
        return;
    switch (dtype) {
    case HCOMM_INT8:
        k_i8_reduce(dst, a, b, count, op);
        break;
    case HCOMM_UINT8:
        k_u8_reduce(dst, a, b, count, op);
        break;
    case HCOMM_INT32:
        k_i32_reduce(dst, a, b, count, op);
        break;
    case HCOMM_UINT32:
        k_u32_reduce(dst, a, b, count, op);
        break;
    case HCOMM_INT64:
        k_i64_reduce(dst, a, b, count, op);
        break;
    case HCOMM_UINT64:
        k_u64_reduce(dst, a, b, count, op);
        break;
    case HCOMM_FLOAT16:
        hc_reduce_f16(dst, a, b, count, op);
        break;
    case HCOMM_BFLOAT16:
        hc_reduce_bf16(dst, a, b, count, op);
        break;
    case HCOMM_FLOAT32:
        k_f32_reduce(dst, a, b, count, op);
        break;
    case HCOMM_FLOAT64:
        k_f64_reduce(dst, a, b, count, op);
        break;
    default:
        break;
    }
}

/* Division of 8- and 32-bit integers through double, which vectorises where
 * integer division does not. It is exact: |x| < 2^32, so x/n lies at least
 * 1/|x| > 2^-53 (relative) away from any integer it is not equal to, and the
 * rounded quotient truncates to the same integer as C's x / n (toward zero). */
#define HC_DIV_VIA_DOUBLE(name, T)                                 \
    static HC_CLONES void name##_div(T *buf, size_t count, int n) \
    {                                                              \
        double dn = (double)n;                                     \
        for (size_t i = 0; i < count; i++)                         \
            buf[i] = (T)((double)buf[i] / dn);                     \
    }

HC_DIV_VIA_DOUBLE(k_i8, int8_t)
HC_DIV_VIA_DOUBLE(k_u8, uint8_t)
HC_DIV_VIA_DOUBLE(k_i32, int32_t)
HC_DIV_VIA_DOUBLE(k_u32, uint32_t)

static void k_i64_div(int64_t *buf, size_t count, int n)
{
    for (size_t i = 0; i < count; i++)
        buf[i] /= n;
}

static void k_u64_div(uint64_t *buf, size_t count, int n)
{
    uint64_t un = (uint64_t)n;

    for (size_t i = 0; i < count; i++)
        buf[i] /= un;
}

/* Divides (not multiplies by 1/n) so that each quotient is correctly rounded;
 * (float)n is exact for n <= 2^24. */
static HC_CLONES void k_f32_div(float *buf, size_t count, int n)
{
    float fn = (float)n;

    for (size_t i = 0; i < count; i++)
        buf[i] = buf[i] / fn;
}

static HC_CLONES void k_f64_div(double *buf, size_t count, int n)
{
    double dn = (double)n;

    for (size_t i = 0; i < count; i++)
        buf[i] = buf[i] / dn;
}

/* n is the number of ranks; n <= 1 leaves buf as it is. */
void hc_reduce_div(void *buf, size_t count, hcomm_dtype_t dtype, int n)
{
    if (count == 0 || n <= 1)
        return;
    switch (dtype) {
    case HCOMM_INT8:
        k_i8_div(buf, count, n);
        break;
    case HCOMM_UINT8:
        k_u8_div(buf, count, n);
        break;
    case HCOMM_INT32:
        k_i32_div(buf, count, n);
        break;
    case HCOMM_UINT32:
        k_u32_div(buf, count, n);
        break;
    case HCOMM_INT64:
        k_i64_div(buf, count, n);
        break;
    case HCOMM_UINT64:
        k_u64_div(buf, count, n);
        break;
    case HCOMM_FLOAT16:
        hc_reduce_div_f16(buf, count, n);
        break;
    case HCOMM_BFLOAT16:
        hc_reduce_div_bf16(buf, count, n);
        break;
    case HCOMM_FLOAT32:
        k_f32_div(buf, count, n);
        break;
    case HCOMM_FLOAT64:
        k_f64_div(buf, count, n);
        break;
    default:
        break;
    }
}
