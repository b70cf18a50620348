/* test_reduce.c - hc_reduce and hc_reduce_div for every dtype and op against a
 * scalar reference: odd lengths, aliasing, misaligned buffers, wrapping, avg
 * truncation, NaN and signed zeros in min/max. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/reduce.h"
#include "base/reduce_half.h"

static const size_t lens[] = {0, 1, 7, 33, 1027};
#define NLENS   (sizeof(lens) / sizeof(lens[0]))
#define MAXLEN  1027
#define ALIGNED __attribute__((aligned(64)))

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* A finite float with a random sign, mantissa and exponent in [-20, 20], or
 * (one in eight) a special value. */
static double rnd_float(int is_double)
{
    static const double special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0,
                                      FLT_MIN, -FLT_MAX, FLT_MAX, 1e-40 /* float subnormal */,
                                      DBL_MIN, 4.9e-324, DBL_MAX};
    size_t nspecial = sizeof(special) / sizeof(special[0]) - (is_double ? 0 : 3);
    double m = (double)(rnd() >> 11) / 9007199254740992.0; /* [0, 1) */

    if (rnd() % 8 == 0)
        return special[rnd() % nspecial];
    return ldexp((rnd() & 1) ? -m : m, (int)(rnd() % 41) - 20);
}

static void fill(hcomm_dtype_t dt, void *buf, size_t n)
{
    unsigned char *p = buf;

    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        if (dt == HCOMM_FLOAT32) {
            float f = (float)rnd_float(0);
            memcpy(p + i * 4, &f, 4);
        } else if (dt == HCOMM_FLOAT64) {
            double d = rnd_float(1);
            memcpy(p + i * 8, &d, 8);
        } else {
            size_t es = hcomm_dtype_size(dt);
            if (i % 5 == 0) /* extremes: 0x00.., 0x7f.., 0x80.., 0xff.. */
                r = (uint64_t[]){0, UINT64_MAX >> 1, 1ull << 63, UINT64_MAX}[rnd() % 4] >>
                    (64 - 8 * es);
            memcpy(p + i * es, &r, es); /* little endian: low bytes */
        }
    }
}

/* The reference semantics: NaN in either operand gives NaN, else b only when it
 * is strictly smaller (larger); ties, signed zeros included, give a. */
#define REF_FLOAT(T, x, y, op)                                                          \
    ((op) == HCOMM_PROD   ? (T)((x) * (y))                                              \
     : (op) == HCOMM_MIN  ? (isnan(x) || isnan(y) ? (T)NAN : ((y) < (x) ? (y) : (x)))   \
     : (op) == HCOMM_MAX  ? (isnan(x) || isnan(y) ? (T)NAN : ((y) > (x) ? (y) : (x)))   \
                          : (T)((x) + (y)))

/* Integers: 8-bit exact in int64, wider in uint64_t (wrapping); the cast back
 * keeps the low bits. */
#define REF_INT(T, W, x, y, op)                                                         \
    ((op) == HCOMM_PROD  ? (T)((W)(x) * (W)(y))                                         \
     : (op) == HCOMM_MIN ? ((x) < (y) ? (x) : (y))                                      \
     : (op) == HCOMM_MAX ? ((x) > (y) ? (x) : (y))                                      \
                         : (T)((W)(x) + (W)(y)))

#define REF_CASE(DT, T, EXPR)                   \
    case DT: {                                  \
        T x, y, r;                              \
        memcpy(&x, pa, sizeof(T));              \
        memcpy(&y, pb, sizeof(T));              \
        r = EXPR;                               \
        memcpy(pd, &r, sizeof(T));              \
        break;                                  \
    }

static void ref_elem(hcomm_dtype_t dt, hcomm_op_t op, const void *pa, const void *pb, void *pd)
{
    switch (dt) {
        REF_CASE(HCOMM_INT8, int8_t, REF_INT(int8_t, int64_t, x, y, op))
        REF_CASE(HCOMM_UINT8, uint8_t, REF_INT(uint8_t, int64_t, x, y, op))
        REF_CASE(HCOMM_INT32, int32_t, REF_INT(int32_t, uint64_t, x, y, op))
        REF_CASE(HCOMM_UINT32, uint32_t, REF_INT(uint32_t, uint64_t, x, y, op))
        REF_CASE(HCOMM_INT64, int64_t, REF_INT(int64_t, uint64_t, x, y, op))
        REF_CASE(HCOMM_UINT64, uint64_t, REF_INT(uint64_t, uint64_t, x, y, op))
        REF_CASE(HCOMM_FLOAT32, float, REF_FLOAT(float, x, y, op))
        REF_CASE(HCOMM_FLOAT64, double, REF_FLOAT(double, x, y, op))
    case HCOMM_FLOAT16:
    case HCOMM_BFLOAT16: {
        int      h = dt == HCOMM_FLOAT16;
        uint16_t ha, hb, hr;
        memcpy(&ha, pa, 2);
        memcpy(&hb, pb, 2);
        float x = h ? hc_half_to_float(ha) : hc_bf16_to_float(ha);
        float y = h ? hc_half_to_float(hb) : hc_bf16_to_float(hb);
        float r = REF_FLOAT(float, x, y, op);
        hr      = h ? hc_float_to_half(r) : hc_float_to_bf16(r);
        memcpy(pd, &hr, 2);
        break;
    }
    default:
        fail_msg("bad dtype %d", dt);
    }
}

static int is_nan_elem(hcomm_dtype_t dt, const void *p)
{
    uint16_t h;
    float    f;
    double   d;

    switch (dt) {
    case HCOMM_FLOAT16:
        memcpy(&h, p, 2);
        return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    case HCOMM_BFLOAT16:
        memcpy(&h, p, 2);
        return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    case HCOMM_FLOAT32:
        memcpy(&f, p, 4);
        return isnan(f);
    case HCOMM_FLOAT64:
        memcpy(&d, p, 8);
        return isnan(d);
    default:
        return 0;
    }
}

/* Bitwise equal, except that where the reference is NaN any NaN will do. */
static void check_equal(hcomm_dtype_t dt, const void *got, const void *want, size_t n,
                        const char *what)
{
    size_t es = hcomm_dtype_size(dt);

    for (size_t i = 0; i < n; i++) {
        const unsigned char *g = (const unsigned char *)got + i * es;
        const unsigned char *w = (const unsigned char *)want + i * es;
        int ok = is_nan_elem(dt, w) ? is_nan_elem(dt, g) : memcmp(g, w, es) == 0;
        if (!ok) {
            uint64_t gv = 0, wv = 0;
            memcpy(&gv, g, es);
            memcpy(&wv, w, es);
            fail_msg("%s: dtype %d element %zu of %zu: got 0x%llx want 0x%llx", what, dt, i, n,
                     (unsigned long long)gv, (unsigned long long)wv);
        }
    }
}

typedef void (*reduce_fn)(void *dst, const void *a, const void *b, size_t count,
                          hcomm_dtype_t dtype, hcomm_op_t op);

static void reduce_f16_generic(void *dst, const void *a, const void *b, size_t count,
                               hcomm_dtype_t dtype, hcomm_op_t op)
{
    (void)dtype;
    hc_reduce_f16_generic(dst, a, b, count, op);
}

enum { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B, ALIAS_ALL, ALIAS_MODES };

/* One dtype: every op x length x aliasing mode x alignment (0 or 1 element). */
static void run_dtype(hcomm_dtype_t dt, reduce_fn fn)
{
    static unsigned char ALIGNED a[8 * (MAXLEN + 1)], b[sizeof(a)], d[sizeof(a)];
    static unsigned char ALIGNED a0[sizeof(a)], b0[sizeof(a)], want[sizeof(a)];
    size_t es = hcomm_dtype_size(dt);

    for (int op = 0; op < HCOMM_OP_COUNT; op++)
        for (size_t li = 0; li < NLENS; li++)
            for (int mode = 0; mode < ALIAS_MODES; mode++)
                for (size_t off = 0; off < 2; off++) {
                    size_t n = lens[li];
                    char   what[64];
                    fill(dt, a0, n);
                    fill(dt, b0, n);
                    if (mode == ALIAS_ALL)
                        memcpy(b0, a0, n * es);
                    for (size_t i = 0; i < n; i++)
                        ref_elem(dt, op, a0 + i * es, b0 + i * es, want + i * es);
                    memcpy(a + off * es, a0, n * es);
                    memcpy(b + off * es, b0, n * es);
                    unsigned char *pa = a + off * es, *pb = b + off * es, *pd = d + off * es;
                    if (mode == ALIAS_DST_A || mode == ALIAS_ALL)
                        pd = pa;
                    if (mode == ALIAS_DST_B)
                        pd = pb;
                    if (mode == ALIAS_ALL)
                        pb = pa;
                    fn(pd, pa, pb, n, dt, op);
                    snprintf(what, sizeof(what), "op %d len %zu alias %d off %zu", op, n, mode,
                             off);
                    check_equal(dt, pd, want, n, what);
                }
}

static void test_int8(void **s) { (void)s; run_dtype(HCOMM_INT8, hc_reduce); }
static void test_uint8(void **s) { (void)s; run_dtype(HCOMM_UINT8, hc_reduce); }
static void test_int32(void **s) { (void)s; run_dtype(HCOMM_INT32, hc_reduce); }
static void test_uint32(void **s) { (void)s; run_dtype(HCOMM_UINT32, hc_reduce); }
static void test_int64(void **s) { (void)s; run_dtype(HCOMM_INT64, hc_reduce); }
static void test_uint64(void **s) { (void)s; run_dtype(HCOMM_UINT64, hc_reduce); }
static void test_bfloat16(void **s) { (void)s; run_dtype(HCOMM_BFLOAT16, hc_reduce); }
static void test_float32(void **s) { (void)s; run_dtype(HCOMM_FLOAT32, hc_reduce); }
static void test_float64(void **s) { (void)s; run_dtype(HCOMM_FLOAT64, hc_reduce); }

static void test_float16(void **s)
{
    (void)s;
    if (!hc_reduce_f16c_usable())
        printf("note: no F16C on this CPU; hc_reduce float16 takes the generic path\n");
    run_dtype(HCOMM_FLOAT16, hc_reduce);
    run_dtype(HCOMM_FLOAT16, reduce_f16_generic);
}

/* The F16C and generic float16 paths must give the same bits; only the payload
 * of a sum or product of two NaNs is unspecified (the compiler may swap the
 * operands of x + y, and x86 keeps the first operand's NaN). */
static void test_float16_paths_identical(void **s)
{
    static uint16_t a[MAXLEN], b[MAXLEN], d1[MAXLEN], d2[MAXLEN];

    (void)s;
    if (!hc_reduce_f16c_usable())
        skip(); /* cmocka prints the skip; the generic path is tested above */
    for (int op = 0; op < HCOMM_OP_COUNT; op++)
        for (int rep = 0; rep < 64; rep++) {
            fill(HCOMM_FLOAT16, a, MAXLEN);
            fill(HCOMM_FLOAT16, b, MAXLEN);
            hc_reduce_f16(d1, a, b, MAXLEN, op);
            hc_reduce_f16_generic(d2, a, b, MAXLEN, op);
            for (size_t i = 0; i < MAXLEN; i++)
                if (d1[i] != d2[i] &&
                    !((op == HCOMM_SUM || op == HCOMM_PROD || op == HCOMM_AVG) &&
                      is_nan_elem(HCOMM_FLOAT16, &a[i]) && is_nan_elem(HCOMM_FLOAT16, &b[i]) &&
                      is_nan_elem(HCOMM_FLOAT16, &d1[i]) && is_nan_elem(HCOMM_FLOAT16, &d2[i])))
                    fail_msg("op %d: %04x op %04x: f16c %04x generic %04x", op, a[i], b[i], d1[i],
                             d2[i]);
        }
}

static void test_int_wrap(void **s)
{
    int8_t   i8a[]  = {127, -128, -128, 100}, i8b[] = {1, -1, -1, 100};
    uint8_t  u8a[]  = {255, 16}, u8b[] = {1, 16};
    int32_t  i32a[] = {INT32_MAX, INT32_MIN, 65536}, i32b[] = {1, -1, 65536};
    uint32_t u32a[] = {UINT32_MAX, 65536}, u32b[] = {2, 65536};
    int64_t  i64a[] = {INT64_MAX, INT64_MIN, INT64_MAX}, i64b[] = {1, -1, 2};
    uint64_t u64a[] = {UINT64_MAX, 1ull << 32}, u64b[] = {1, 1ull << 32};
    int8_t   i8d[4];

    (void)s;
    hc_reduce(i8d, i8a, i8b, 2, HCOMM_INT8, HCOMM_SUM);
    assert_int_equal(i8d[0], -128);
    assert_int_equal(i8d[1], 127);
    hc_reduce(i8d, i8a, i8b, 4, HCOMM_INT8, HCOMM_PROD);
    assert_int_equal(i8d[2], -128); /* -128 * -1 = 128 wraps */
    assert_int_equal(i8d[3], 16);   /* 10000 mod 256 */
    hc_reduce(u8a, u8a, u8b, 2, HCOMM_UINT8, HCOMM_SUM);
    assert_int_equal(u8a[0], 0);
    hc_reduce(i32a, i32a, i32b, 3, HCOMM_INT32, HCOMM_SUM);
    assert_int_equal(i32a[0], INT32_MIN);
    assert_int_equal(i32a[1], INT32_MAX);
    hc_reduce(i32a, i32a, i32b, 3, HCOMM_INT32, HCOMM_PROD);
    assert_int_equal(i32a[2], 0); /* (65536 + 65536) * 65536 = 2^33 */
    hc_reduce(u32a, u32a, u32b, 2, HCOMM_UINT32, HCOMM_SUM);
    assert_int_equal(u32a[0], 1);
    hc_reduce(u32a, u32a, u32b, 2, HCOMM_UINT32, HCOMM_PROD);
    assert_int_equal(u32a[1], 0);
    hc_reduce(i64a, i64a, i64b, 3, HCOMM_INT64, HCOMM_PROD);
    assert_true(i64a[0] == INT64_MAX && i64a[2] == -2);
    assert_true(i64a[1] == INT64_MIN); /* INT64_MIN * -1 wraps to itself */
    hc_reduce(u64a, u64a, u64b, 2, HCOMM_UINT64, HCOMM_SUM);
    assert_true(u64a[0] == 0 && u64a[1] == 1ull << 33);
    hc_reduce(u64a, u64a, u64b, 2, HCOMM_UINT64, HCOMM_PROD);
    assert_true(u64a[1] == 0);
}

static void test_avg_truncation(void **s)
{
    int32_t  i32[] = {-7, 7, -1, -5, 5, INT32_MIN, INT32_MAX, -6};
    int8_t   i8[]  = {-128, 127, -7, -1};
    int64_t  i64[] = {-7, INT64_MIN, INT64_MAX, -1};
    uint32_t u32[] = {7, UINT32_MAX, 1};
    uint8_t  u8[]  = {255, 7};
    uint16_t h[]   = {0x4200 /* 3.0 */, 0x3c01 /* 1 + 2^-10 */, 0x3c03, 0x3c00};
    float    f[]   = {-3.0f, 1.0f};

    (void)s;
    hc_reduce_div(i32, 8, HCOMM_INT32, 2);
    assert_int_equal(i32[0], -3);
    assert_int_equal(i32[1], 3);
    assert_int_equal(i32[2], 0);
    assert_int_equal(i32[3], -2);
    assert_int_equal(i32[4], 2);
    assert_int_equal(i32[5], INT32_MIN / 2);
    assert_int_equal(i32[6], INT32_MAX / 2);
    assert_int_equal(i32[7], -3);
    hc_reduce_div(i8, 4, HCOMM_INT8, 3);
    assert_true(i8[0] == -42 && i8[1] == 42 && i8[2] == -2 && i8[3] == 0);
    hc_reduce_div(i64, 4, HCOMM_INT64, 2);
    assert_true(i64[0] == -3 && i64[1] == INT64_MIN / 2 && i64[2] == INT64_MAX / 2 && i64[3] == 0);
    hc_reduce_div(u32, 3, HCOMM_UINT32, 2);
    assert_true(u32[0] == 3 && u32[1] == UINT32_MAX / 2 && u32[2] == 0);
    hc_reduce_div(u8, 2, HCOMM_UINT8, 2);
    assert_true(u8[0] == 127 && u8[1] == 3);
    /* 3 / 2 = 1.5; (1 + k * 2^-10) / 2 exact; 1 / 3 rounds to 0x3555 */
    hc_reduce_div(h, 3, HCOMM_FLOAT16, 2);
    assert_int_equal(h[0], 0x3e00);
    assert_int_equal(h[1], 0x3801);
    assert_int_equal(h[2], 0x3803);
    hc_reduce_div(h + 3, 1, HCOMM_FLOAT16, 3);
    assert_int_equal(h[3], 0x3555);
    hc_reduce_div(f, 2, HCOMM_FLOAT32, 2);
    assert_true(f[0] == -1.5f && f[1] == 0.5f);
}

/* hc_reduce_div on random data of every dtype against C's own division. */
static void test_div_random(void **s)
{
    static const int ns[] = {1, 2, 3, 7, 10, 255, 256, 1000003, INT_MAX};
    static unsigned char ALIGNED buf[8 * MAXLEN], want[sizeof(buf)];

    (void)s;
    for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++)
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
            for (size_t li = 0; li < NLENS; li++) {
                size_t n = lens[li], es = hcomm_dtype_size(dt);
                int    k = ns[ni];
                fill(dt, buf, n);
                for (size_t i = 0; i < n; i++) {
                    unsigned char *p = buf + i * es, *w = want + i * es;
                    union { int8_t i8; uint8_t u8; int32_t i32; uint32_t u32; int64_t i64;
                            uint64_t u64; uint16_t h; float f; double d; } v;
                    memcpy(&v, p, es);
                    switch (dt) {
                    case HCOMM_INT8: v.i8 = (int8_t)(v.i8 / k); break;
                    case HCOMM_UINT8: v.u8 = (uint8_t)(v.u8 / (unsigned)k); break;
                    case HCOMM_INT32: v.i32 = v.i32 / k; break;
                    case HCOMM_UINT32: v.u32 = v.u32 / (unsigned)k; break;
                    case HCOMM_INT64: v.i64 = v.i64 / k; break;
                    case HCOMM_UINT64: v.u64 = v.u64 / (uint64_t)k; break;
                    case HCOMM_FLOAT16:
                        v.h = hc_float_to_half(hc_half_to_float(v.h) / (float)k); break;
                    case HCOMM_BFLOAT16:
                        v.h = hc_float_to_bf16(hc_bf16_to_float(v.h) / (float)k); break;
                    case HCOMM_FLOAT32: v.f = v.f / (float)k; break;
                    default: v.d = v.d / k; break;
                    }
                    memcpy(w, &v, es);
                }
                hc_reduce_div(buf, n, dt, k);
                check_equal(dt, buf, want, n, "div");
            }
}

/* Documented min/max semantics: NaN wins from either side; ties give a. */
static void test_minmax_nan_zero(void **s)
{
    float    fa[] = {NAN, 1.0f, -0.0f, 0.0f, -INFINITY, 2.0f};
    float    fb[] = {1.0f, NAN, 0.0f, -0.0f, 1.0f, -INFINITY};
    double   da[] = {NAN, 1.0, -0.0, 0.0}, db[] = {1.0, NAN, 0.0, -0.0};
    uint16_t ha[] = {0x7e00, 0x3c00, 0x8000, 0x0000}, hb[] = {0x3c00, 0x7e00, 0x0000, 0x8000};
    uint16_t ba[] = {0x7fc0, 0x3f80, 0x8000, 0x0000}, bb[] = {0x3f80, 0x7fc0, 0x0000, 0x8000};
    float    fd[6];
    double   dd[4];
    uint16_t hd[4];

    (void)s;
    for (int op = 0; op < HCOMM_OP_COUNT; op++) {
        if (op != HCOMM_MIN && op != HCOMM_MAX)
            continue;
        hc_reduce(fd, fa, fb, 6, HCOMM_FLOAT32, op);
        assert_true(isnan(fd[0]) && isnan(fd[1]));
        assert_true(fd[2] == 0.0f && signbit(fd[2]) && fd[3] == 0.0f && !signbit(fd[3]));
        assert_true(op == HCOMM_MIN ? fd[4] == -INFINITY && fd[5] == -INFINITY
                                    : fd[4] == 1.0f && fd[5] == 2.0f);
        hc_reduce(dd, da, db, 4, HCOMM_FLOAT64, op);
        assert_true(isnan(dd[0]) && isnan(dd[1]) && signbit(dd[2]) && !signbit(dd[3]));
        hc_reduce(hd, ha, hb, 4, HCOMM_FLOAT16, op);
        assert_true(hd[0] == 0x7e00 && hd[1] == 0x7e00 && hd[2] == 0x8000 && hd[3] == 0x0000);
        hc_reduce_f16_generic(hd, ha, hb, 4, op);
        assert_true(hd[0] == 0x7e00 && hd[1] == 0x7e00 && hd[2] == 0x8000 && hd[3] == 0x0000);
        hc_reduce(hd, ba, bb, 4, HCOMM_BFLOAT16, op);
        assert_true(hd[0] == 0x7fc0 && hd[1] == 0x7fc0 && hd[2] == 0x8000 && hd[3] == 0x0000);
    }
}

static void test_empty(void **s)
{
    (void)s;
    for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++) {
        for (int op = 0; op < HCOMM_OP_COUNT; op++)
            hc_reduce(NULL, NULL, NULL, 0, dt, op);
        hc_reduce_div(NULL, 0, dt, 4);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8),
        cmocka_unit_test(test_uint8),
        cmocka_unit_test(test_int32),
        cmocka_unit_test(test_uint32),
        cmocka_unit_test(test_int64),
        cmocka_unit_test(test_uint64),
        cmocka_unit_test(test_float16),
        cmocka_unit_test(test_bfloat16),
        cmocka_unit_test(test_float32),
        cmocka_unit_test(test_float64),
        cmocka_unit_test(test_float16_paths_identical),
        cmocka_unit_test(test_int_wrap),
        cmocka_unit_test(test_avg_truncation),
        cmocka_unit_test(test_div_random),
        cmocka_unit_test(test_minmax_nan_zero),
        cmocka_unit_test(test_empty),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
