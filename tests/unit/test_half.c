/* test_half.c - float16 / bfloat16 conversions against independent references:
 * exhaustive round trips, ties to even at every halfway point, overflow,
 * subnormals and NaNs. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/reduce.h"

static uint32_t fbits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bitsf(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

/* binary16 value by its definition. */
static double ref_half_value(uint16_t h)
{
    int    e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);

    return (h & 0x8000) ? -v : v;
}

/* Nearest binary16 to f, ties to even, computed in double with rint. */
static uint16_t ref_float_to_half(float f)
{
    uint16_t sign = (fbits(f) >> 16) & 0x8000;
    double   a    = fabs((double)f);
    int      e;

    if (isnan(f))
        return (uint16_t)(sign | 0x7e00 | ((fbits(f) & 0x7fffff) >> 13));
    if (a >= 65520.0) /* halfway between 65504 and 2^16, and beyond: inf */
        return sign | 0x7c00;
    if (a < ldexp(1, -14)) /* subnormal step 2^-24; 1024 is the smallest normal */
        return (uint16_t)(sign | (uint16_t)rint(ldexp(a, 24)));
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    double r = rint(ldexp(a, 11 - e)); /* significand in [1024, 2048] */
    int    E = e - 1 + 15;
    if (r == 2048.0) {
        r = 1024.0;
        E++;
    }
    return (uint16_t)(sign | (E << 10) | ((int)r - 1024));
}

static void test_half_to_float_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float    f  = hc_half_to_float((uint16_t)h);
        uint32_t fb = fbits(f);

        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            /* NaN: sign and payload kept, quiet bit set */
            assert_true(isnan(f));
            assert_int_equal(fb, ((h & 0x8000) << 16) | 0x7fc00000 | ((h & 0x3ff) << 13));
        } else if ((h & 0x7fff) == 0x7c00) {
            assert_true(isinf(f));
            assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0);
        } else {
            assert_true((double)f == ref_half_value((uint16_t)h));
            assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0); /* -0 stays -0 */
        }
        /* round trip: identity, except that a NaN comes back quiet */
        uint16_t back = hc_float_to_half(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            assert_int_equal(back, h | 0x200);
        else
            assert_int_equal(back, h);
    }
}

/* Every halfway point between neighbouring halves goes to the even one; one
 * float ulp either side goes to the nearer. Covers subnormals (from 0 up),
 * the normal/subnormal boundary and the overflow threshold 65520. */
static void test_half_ties_to_even(void **state)
{
    (void)state;
    for (uint16_t h = 0; h < 0x7c00; h++) {
        for (int neg = 0; neg < 2; neg++) {
            uint16_t s   = neg ? 0x8000 : 0;
            double   lo  = ref_half_value(h);
            double   hi  = h == 0x7bff ? 65536.0 : ref_half_value((uint16_t)(h + 1));
            float    mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : h;

            assert_true((double)mid == (lo + hi) / 2);
            if (neg)
                mid = -mid;
            assert_int_equal(hc_float_to_half(mid), s | even);
            assert_int_equal(hc_float_to_half(nextafterf(mid, 0.0f)), s | h);
            assert_int_equal(hc_float_to_half(nextafterf(mid, neg ? -INFINITY : INFINITY)),
                             s | (h + 1));
        }
    }
}

static void test_half_special(void **state)
{
    (void)state;
    /* overflow */
    assert_int_equal(hc_float_to_half(65504.0f), 0x7bff);
    assert_int_equal(hc_float_to_half(65519.996f), 0x7bff);
    assert_int_equal(hc_float_to_half(65520.0f), 0x7c00);
    assert_int_equal(hc_float_to_half(1e5f), 0x7c00);
    assert_int_equal(hc_float_to_half(FLT_MAX), 0x7c00);
    assert_int_equal(hc_float_to_half(-FLT_MAX), 0xfc00);
    assert_int_equal(hc_float_to_half(INFINITY), 0x7c00);
    assert_int_equal(hc_float_to_half(-INFINITY), 0xfc00);
    /* subnormals and underflow */
    assert_int_equal(hc_float_to_half(ldexpf(1, -24)), 0x0001);
    assert_int_equal(hc_float_to_half(ldexpf(1, -25)), 0x0000);              /* tie: even */
    assert_int_equal(hc_float_to_half(ldexpf(3, -25)), 0x0002);              /* tie: even */
    assert_int_equal(hc_float_to_half(nextafterf(ldexpf(1, -25), 1)), 0x0001);
    assert_int_equal(hc_float_to_half(ldexpf(1023, -24)), 0x03ff);
    assert_int_equal(hc_float_to_half(ldexpf(1, -14)), 0x0400);
    assert_int_equal(hc_float_to_half(bitsf(0x00000001)), 0x0000); /* float subnormal */
    assert_int_equal(hc_float_to_half(-bitsf(0x00000001)), 0x8000);
    assert_int_equal(hc_float_to_half(-0.0f), 0x8000);
    assert_true(hc_half_to_float(0x0001) == ldexpf(1, -24));
    /* NaN: a float NaN whose payload sits below the kept bits stays NaN */
    assert_int_equal(hc_float_to_half(bitsf(0x7f800001)), 0x7e00);
    assert_int_equal(hc_float_to_half(bitsf(0xff800001)), 0xfe00);
    assert_int_equal(hc_float_to_half(bitsf(0x7fa00000)), 0x7f00);
    assert_int_equal(hc_float_to_half(NAN) & 0x7e00, 0x7e00);
}

/* A spread of all float exponents and signs against the double reference. */
static void test_half_sampled(void **state)
{
    (void)state;
    for (uint64_t x = 0; x < 0x100000000ull; x += 4093) {
        float f = bitsf((uint32_t)x);

        assert_int_equal(hc_float_to_half(f), ref_float_to_half(f));
    }
}

static void test_bf16_exhaustive(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 0x10000; b++) {
        float    f   = hc_bf16_to_float((uint16_t)b);
        int      nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f);

        assert_int_equal(fbits(f), b << 16); /* exact, subnormals included */
        assert_int_equal(hc_float_to_bf16(f), nan ? (b | 0x40) : b);
        assert_int_equal(isnan(hc_bf16_to_float(hc_float_to_bf16(f))) != 0, nan);
    }
}

/* Constructed halfway floats: bits (b << 16) | 0x8000 lie exactly between b and
 * b + 1; ties go to the even one, 1 ulp either side to the nearer. */
static void test_bf16_ties_to_even(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 0x10000; b++) {
        if ((b & 0x7f80) == 0x7f80) /* inf / NaN */
            continue;
        uint32_t mid  = (b << 16) | 0x8000;
        uint16_t even = (b & 1) ? (uint16_t)(b + 1) : (uint16_t)b;

        assert_int_equal(hc_float_to_bf16(bitsf(mid)), even);
        assert_int_equal(hc_float_to_bf16(bitsf(mid - 1)), b);
        assert_int_equal(hc_float_to_bf16(bitsf(mid + 1)), b + 1);
    }
    /* 0x7f7f is odd: the tie above the largest finite rounds to inf */
    assert_int_equal(hc_float_to_bf16(FLT_MAX), 0x7f80);
    assert_int_equal(hc_float_to_bf16(-FLT_MAX), 0xff80);
    assert_int_equal(hc_float_to_bf16(bitsf(0x7f7f7fff)), 0x7f7f);
    assert_int_equal(hc_float_to_bf16(INFINITY), 0x7f80);
    /* NaN with only low payload bits must not round to inf */
    assert_int_equal(hc_float_to_bf16(bitsf(0x7f800001)), 0x7fc0);
    assert_int_equal(hc_float_to_bf16(bitsf(0xff80ffff)), 0xffc0);
    assert_int_equal(hc_float_to_bf16(bitsf(0x7fffffff)), 0x7fff);
    /* subnormals round like anything else */
    assert_int_equal(hc_float_to_bf16(bitsf(0x00008000)), 0x0000);
    assert_int_equal(hc_float_to_bf16(bitsf(0x00018000)), 0x0002);
    assert_int_equal(hc_float_to_bf16(bitsf(0x00008001)), 0x0001);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_to_float_exhaustive),
        cmocka_unit_test(test_half_ties_to_even),
        cmocka_unit_test(test_half_special),
        cmocka_unit_test(test_half_sampled),
        cmocka_unit_test(test_bf16_exhaustive),
        cmocka_unit_test(test_bf16_ties_to_even),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
