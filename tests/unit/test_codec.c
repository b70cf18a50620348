/* test_codec.c - the gradient codecs of src/compress/: onebit, topk and the
 * float16 / bfloat16 casts. Round trips against references written here, the
 * generic and AVX2 onebit paths bit for bit, and error feedback: over many
 * steps the decoded outputs add up to the inputs minus the residual, and the
 * residual stays bounded. */
#include <float.h>
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
#include "compress/codec.h"
#include "compress/compress_model.h"

/* codec_onebit.c exports both paths for this test. */
void hc_onebit_encode_generic(const float *in, float *residual, size_t n, uint8_t *out);
void hc_onebit_encode_avx2(const float *in, float *residual, size_t n, uint8_t *out);
void hc_onebit_decode_generic(const uint8_t *msg, size_t n, float *out, int add);
void hc_onebit_decode_avx2(const uint8_t *msg, size_t n, float *out, int add);
int  hc_onebit_avx2_usable(void);
/* codec_topk.c: the encoder without its AVX2 streaming pass. */
int hc_topk_encode_generic(const float *in, float *residual, size_t n, size_t k, void *scratch,
                           hc_topk_pair_t *out);

static uint64_t rng_state = 0x853c49e6748fea9bULL;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* uniform in [-1, 1) */
static float rnd_unit(void)
{
    return (float)rnd() / 2147483648.0f - 1.0f;
}

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

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);

    assert_non_null(p);
    return p;
}

/* Random values with exact zeros, negative zeros and some repeats mixed in. */
static void fill_values(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t c = rnd() % 16;

        v[i] = c == 0 ? 0.0f : c == 1 ? -0.0f : c == 2 ? 0.25f : rnd_unit() * 3.0f;
    }
}

/* ---- onebit ---- */

static const size_t onebit_sizes[] = {0, 1, 7, 2048, 2049, 100003};

/* Checks msg against v: each block's scale is mean |v| (to float rounding of
 * the sum), bit = v < 0, unused bits of the last byte 0, decoded = +-scale. */
static void check_onebit_msg(const float *v, size_t n, const uint8_t *msg)
{
    const uint8_t *p = msg;

    for (size_t b = 0; b < n; b += HC_ONEBIT_BLOCK) {
        size_t len = n - b < HC_ONEBIT_BLOCK ? n - b : HC_ONEBIT_BLOCK;
        double sum = 0.0;
        float  s;

        for (size_t i = 0; i < len; i++)
            sum += fabs((double)v[b + i]);
        memcpy(&s, p, sizeof(s));
        assert_true(fabs(s - sum / (double)len) <= 1e-5 * (sum / (double)len) + 1e-30);
        p += sizeof(s);
        for (size_t i = 0; i < len; i++)
            assert_int_equal((p[i / 8] >> (i % 8)) & 1, v[b + i] < 0.0f);
        if (len % 8)
            assert_int_equal(p[len / 8] >> (len % 8), 0);
        p += (len + 7) / 8;
    }
    assert_int_equal((size_t)(p - msg), hc_onebit_bytes(n));
}

static void test_onebit_bytes(void **state)
{
    (void)state;
    assert_int_equal(hc_onebit_bytes(0), 0);
    assert_int_equal(hc_onebit_bytes(1), 5);
    assert_int_equal(hc_onebit_bytes(8), 5);
    assert_int_equal(hc_onebit_bytes(9), 6);
    assert_int_equal(hc_onebit_bytes(2048), 260);
    assert_int_equal(hc_onebit_bytes(2049), 265);
    assert_int_equal(hc_onebit_bytes(100003), 48 * 260 + 4 + (1699 + 7) / 8);
}

static void test_onebit_roundtrip(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(onebit_sizes) / sizeof(onebit_sizes[0]); t++) {
        size_t   n = onebit_sizes[t], nb = hc_onebit_bytes(n);
        float   *in = xmalloc(n * sizeof(float)), *res = xmalloc(n * sizeof(float));
        float   *v = xmalloc(n * sizeof(float)), *dec = xmalloc(n * sizeof(float));
        float   *acc = xmalloc(n * sizeof(float));
        uint8_t *msg = xmalloc(nb + 1), *msg2 = xmalloc(nb + 1);

        fill_values(in, n);
        for (size_t i = 0; i < n; i++) {
            res[i] = i % 3 ? rnd_unit() * 0.5f : 0.0f;
            v[i]   = in[i] + res[i];
            acc[i] = 1.5f;
        }
        msg[nb] = 0xa5;
        hc_onebit_encode(in, res, n, msg);
        assert_int_equal(msg[nb], 0xa5); /* wrote exactly nb bytes */
        check_onebit_msg(v, n, msg);
        hc_onebit_decode(msg, n, dec, 0);
        hc_onebit_decode(msg, n, acc, 1);
        for (size_t i = 0; i < n; i++) {
            float s;

            memcpy(&s, msg + (i / HC_ONEBIT_BLOCK) * 260, sizeof(s));
            assert_true(dec[i] == (v[i] < 0.0f ? -s : s));
            assert_true(fbits(res[i]) == fbits(v[i] - dec[i]));
            assert_true(acc[i] == 1.5f + dec[i]);
        }
        /* no residual: the same message from in + 0, in untouched */
        hc_onebit_encode(v, NULL, n, msg2);
        assert_memory_equal(msg, msg2, nb);
        free(in), free(res), free(v), free(dec), free(acc), free(msg), free(msg2);
    }
}

/* Zero and negative zero encode as +, NaN compares false so it is + too. */
static void test_onebit_zero_sign(void **state)
{
    float   in[9] = {0.0f, -0.0f, 1.0f, -2.0f, 0.0f, -0.0f, -1.0f, 3.0f, -0.0f};
    float   dec[9];
    uint8_t msg[16];

    (void)state;
    hc_onebit_encode(in, NULL, 9, msg);
    assert_int_equal(msg[4], 0x48); /* bits 3 and 6 */
    assert_int_equal(msg[5], 0x00);
    hc_onebit_decode(msg, 9, dec, 0);
    for (int i = 0; i < 9; i++)
        assert_true(dec[i] == (i == 3 || i == 6 ? -7.0f / 9.0f : 7.0f / 9.0f));
}

/* Random data with non-finite values in some blocks, both paths. */
static void test_onebit_generic_vs_avx2(void **state)
{
    size_t n = 100003, nb = hc_onebit_bytes(n);

    (void)state;
    if (!hc_onebit_avx2_usable()) {
        print_message("skip: this CPU has no AVX2, only the generic onebit path exists\n");
        skip();
    }
    float   *in = xmalloc(n * sizeof(float)), *r1 = xmalloc(n * sizeof(float));
    float   *r2 = xmalloc(n * sizeof(float)), *d1 = xmalloc(n * sizeof(float));
    float   *d2 = xmalloc(n * sizeof(float));
    uint8_t *m1 = xmalloc(nb), *m2 = xmalloc(nb);

    for (int rep = 0; rep < 4; rep++) {
        for (size_t i = 0; i < n; i++) {
            /* wide exponent range, so that the summation order matters */
            in[i] = rnd_unit() * ldexpf(1.0f, (int)(rnd() % 40) - 20);
            r1[i] = r2[i] = rep ? rnd_unit() * 1e-3f : 0.0f;
        }
        in[5000]  = INFINITY;
        in[9000]  = NAN;
        in[13000] = 1e-40f; /* float subnormal */
        for (int step = 0; step < 3; step++) {
            hc_onebit_encode_generic(in, r1, n, m1);
            hc_onebit_encode_avx2(in, r2, n, m2);
            assert_memory_equal(m1, m2, nb);
            assert_memory_equal(r1, r2, n * sizeof(float));
        }
        hc_onebit_encode_generic(in, NULL, n - rep, m1);
        hc_onebit_encode_avx2(in, NULL, n - rep, m2);
        assert_memory_equal(m1, m2, hc_onebit_bytes(n - rep));
        memcpy(d1, in, n * sizeof(float));
        memcpy(d2, in, n * sizeof(float));
        hc_onebit_decode_generic(m1, n - rep, d1, rep & 1);
        hc_onebit_decode_avx2(m2, n - rep, d2, rep & 1);
        assert_memory_equal(d1, d2, n * sizeof(float));
    }
    /* the residual of the blocks with inf / NaN is 0, not inf / NaN */
    for (size_t i = 0; i < n; i++)
        assert_true(isfinite(r1[i]));
    assert_true(r1[5000] == 0.0f && r1[4096] == 0.0f && r1[9000] == 0.0f);
    free(in), free(r1), free(r2), free(d1), free(d2), free(m1), free(m2);
}

/* Finite values whose block sum of |v| overflows a float (mean 1e36, and
 * random values up to FLT_MAX / 4, so that v = in + residual stays finite
 * over the steps): the scale is their mean, finite, and so are
 * the decoded values and the residual; both paths the same bits. */
static void test_onebit_large(void **state)
{
    size_t   n = 2 * HC_ONEBIT_BLOCK + 9, nb = hc_onebit_bytes(n);
    float   *in = xmalloc(n * sizeof(float)), *r1 = xmalloc(n * sizeof(float));
    float   *r2 = xmalloc(n * sizeof(float)), *dec = xmalloc(n * sizeof(float));
    uint8_t *m1 = xmalloc(nb), *m2 = xmalloc(nb);
    float    s;

    (void)state;
    for (int rep = 0; rep < 2; rep++) {
        for (size_t i = 0; i < n; i++) {
            in[i] = rep == 0 ? (i % 2 ? -1e36f : 1e36f) : rnd_unit() * (FLT_MAX / 4);
            r1[i] = r2[i] = 0.0f;
        }
        for (int step = 0; step < 3; step++) {
            hc_onebit_encode_generic(in, r1, n, m1);
            if (hc_onebit_avx2_usable()) {
                hc_onebit_encode_avx2(in, r2, n, m2);
                assert_memory_equal(m1, m2, nb);
                assert_memory_equal(r1, r2, n * sizeof(float));
            }
            hc_onebit_decode(m1, n, dec, 0);
            for (size_t i = 0; i < n; i++)
                assert_true(isfinite(dec[i]) && isfinite(r1[i]));
        }
        hc_onebit_encode(in, NULL, n, m1);
        check_onebit_msg(in, n, m1);
        memcpy(&s, m1, sizeof(s));
        if (rep == 0)
            assert_true(s == 1e36f);
    }
    free(in), free(r1), free(r2), free(dec), free(m1), free(m2);
}

/* ---- topk ---- */

static const float *cmp_v;

/* |v| descending as the codec orders it (NaN largest), then index ascending */
static int cmp_rank(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint32_t ki = fbits(cmp_v[i]) & 0x7fffffffu, kj = fbits(cmp_v[j]) & 0x7fffffffu;

    if (ki != kj)
        return ki > kj ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* Encodes in + res with hc_topk_encode and checks everything against a sort. */
static void check_topk(const float *in, const float *res0, size_t n, size_t k)
{
    float          *v = xmalloc(n * sizeof(float)), *res = xmalloc(n * sizeof(float));
    uint32_t       *idx = xmalloc(n * sizeof(uint32_t));
    void           *scr = xmalloc(hc_topk_scratch_bytes(n));
    hc_topk_pair_t *out = xmalloc((k + 1) * sizeof(*out)), *out2 = xmalloc((k + 1) * sizeof(*out));
    unsigned char  *sel = calloc(n ? n : 1, 1);

    assert_non_null(sel);
    for (size_t i = 0; i < n; i++) {
        res[i] = res0[i];
        v[i]   = in[i] + res0[i];
        idx[i] = (uint32_t)i;
    }
    cmp_v = v;
    qsort(idx, n, sizeof(*idx), cmp_rank);
    qsort(idx, k, sizeof(*idx), cmp_u32);
    out[k].index = 0xdeadbeef;
    assert_int_equal(hc_topk_encode(in, res, n, k, scr, out), 0);
    assert_int_equal(out[k].index, 0xdeadbeef);
    for (size_t j = 0; j < k; j++) {
        assert_int_equal(out[j].index, idx[j]);
        assert_true(fbits(out[j].value) == fbits(v[idx[j]]));
        sel[idx[j]] = 1;
    }
    for (size_t i = 0; i < n; i++)
        assert_true(fbits(res[i]) == (sel[i] || !isfinite(v[i]) ? fbits(0.0f) : fbits(v[i])));
    /* no residual: the same pairs from v; and the same without AVX2 */
    assert_int_equal(hc_topk_encode(v, NULL, n, k, scr, out2), 0);
    assert_memory_equal(out, out2, k * sizeof(*out));
    for (size_t i = 0; i < n; i++)
        res[i] = res0[i];
    assert_int_equal(hc_topk_encode_generic(in, res, n, k, scr, out2), 0);
    assert_memory_equal(out, out2, k * sizeof(*out));
    for (size_t i = 0; i < n; i++)
        assert_true(fbits(res[i]) == (sel[i] || !isfinite(v[i]) ? fbits(0.0f) : fbits(v[i])));
    free(v), free(res), free(idx), free(scr), free(out), free(out2), free(sel);
}

static void test_topk_random(void **state)
{
    static const size_t sizes[] = {1, 7, 100, 4096, 5000, 100003, 1u << 20};

    (void)state;
    for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
        size_t n  = sizes[t];
        float *in = xmalloc(n * sizeof(float)), *res = xmalloc(n * sizeof(float));
        size_t ks[] = {0, 1, n / 100, n / 10, n / 8, n / 2, n - 1, n};

        fill_values(in, n);
        for (size_t i = 0; i < n; i++)
            res[i] = i % 2 ? rnd_unit() : 0.0f;
        for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++)
            check_topk(in, res, n, ks[j]);
        free(in), free(res);
    }
}

/* Few distinct magnitudes, so that the k-th is tied with many others; all
 * equal; and specials. */
static void test_topk_ties(void **state)
{
    size_t n  = 50000;
    float *in = xmalloc(n * sizeof(float)), *zero = calloc(n, sizeof(float));

    (void)state;
    assert_non_null(zero);
    for (size_t i = 0; i < n; i++)
        in[i] = (float)(rnd() % 4) * (rnd() % 2 ? 1.0f : -1.0f);
    for (size_t k = 1; k < n; k = k * 3 + 1)
        check_topk(in, zero, n, k);
    for (size_t i = 0; i < n; i++)
        in[i] = i % 2 ? -1.0f : 1.0f;
    check_topk(in, zero, n, 500);
    check_topk(in, zero, n, 1);
    for (size_t i = 0; i < n; i++)
        in[i] = rnd_unit();
    in[10] = NAN, in[20] = -INFINITY, in[30] = INFINITY, in[40] = -0.0f;
    check_topk(in, zero, n, 3);
    check_topk(in, zero, n, 500);
    check_topk(in, zero, 7, 7);
    free(in), free(zero);
}

/* More non-finite values than k (an fp16 step that overflowed): those not
 * sent must leave a residual of 0, or each is sent again at a later step, for
 * about 1/ratio steps. Every path: small n, sampled candidates, and k = 0. */
static void test_topk_nonfinite(void **state)
{
    static const size_t sizes[]     = {100, 5000, 50000};
    float               nonfinite[] = {INFINITY, -INFINITY, NAN};

    (void)state;
    for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
        size_t n  = sizes[t];
        float *in = xmalloc(n * sizeof(float)), *res = xmalloc(n * sizeof(float));
        size_t ks[] = {0, 1, n / 100, n / 10};

        for (int every = 1; every <= 7; every += 6) { /* all, then 1 in 7 */
            for (size_t i = 0; i < n; i++) {
                in[i]  = i % (size_t)every ? rnd_unit() : nonfinite[i % 3];
                res[i] = rnd_unit();
            }
            for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++)
                check_topk(in, res, n, ks[j]);
        }
        free(in), free(res);
    }
}

/* k = ceil(ratio x count), the ratio's decimal value and not its double's. */
static void test_topk_k(void **state)
{
    (void)state;
    assert_int_equal(hc_compress_topk_k(0.07, 100), 7); /* 7.000000000000001 */
    assert_int_equal(hc_compress_topk_k(0.29, 100), 29);
    assert_int_equal(hc_compress_topk_k(0.01, 1000000), 10000);
    assert_int_equal(hc_compress_topk_k(0.07, 101), 8);               /* 7.07 */
    assert_int_equal(hc_compress_topk_k(0.01, 1000000001), 10000001); /* 10000000.01 */
    assert_int_equal(hc_compress_topk_k(0.01, 1), 1);
    assert_int_equal(hc_compress_topk_k(1.0, 5), 5);
    assert_int_equal(hc_compress_topk_k(0.5, 0), 0);
    for (size_t n = 1; n <= 1000; n++) /* ratio i / 100: exactly ceil(i n / 100) */
        for (size_t i = 1; i <= 100; i++)
            assert_int_equal(hc_compress_topk_k((double)i / 100.0, n), (i * n + 99) / 100);
}

static void test_topk_bad(void **state)
{
    float          in[4] = {1, 2, 3, 4}, res[4] = {0}, out[4] = {0};
    uint64_t       scr[4];
    hc_topk_pair_t p[5] = {{0, 1.0f}, {4, 2.0f}, {3, 3.0f}, {0xffffffffu, 4.0f}, {3, 0.5f}};

    (void)state;
    assert_int_equal(hc_topk_encode(in, res, 4, 5, scr, p), -1);
    assert_int_equal(p[0].index, 0); /* nothing written */
    assert_int_equal(hc_topk_encode(in, res, 0, 0, scr, p), 0);
    assert_int_equal(hc_topk_decode_add(p, 5, out, 4), 2);
    assert_true(out[0] == 1.0f && out[1] == 0.0f && out[2] == 0.0f && out[3] == 3.5f);
    assert_int_equal(hc_topk_decode_add(p, 0, out, 4), 0);
    assert_int_equal(hc_topk_decode_add(p, 3, out, 4), 1);
    assert_true(out[0] == 2.0f && out[3] == 6.5f);
}

/* ---- casts ---- */

/* The scalar reference: encode one value, and the residual the codec keeps. */
static uint16_t ref_cast(float v, int half, float *res)
{
    uint16_t h = half ? hc_float_to_half(v) : hc_float_to_bf16(v);
    float    r = v - (half ? hc_half_to_float(h) : hc_bf16_to_float(h));

    *res = isfinite(r) ? r : 0.0f;
    return h;
}

static void check_cast(const float *v, size_t n, int half)
{
    uint16_t *h  = xmalloc(n * sizeof(uint16_t));
    float    *in = xmalloc(n * sizeof(float)), *res = xmalloc(n * sizeof(float));

    for (size_t i = 0; i < n; i++) {
        /* v = in + res exactly (x + -0 is x, also for -0): v goes in in or in res */
        in[i]  = i % 3 ? v[i] : -0.0f;
        res[i] = i % 3 ? -0.0f : v[i];
    }
    hc_cast_encode(in, res, n, half, h);
    for (size_t i = 0; i < n; i++) {
        float    r;
        uint16_t e = ref_cast(v[i], half, &r);

        if (h[i] != e || fbits(res[i]) != fbits(r))
            fail_msg("%s of %08x: %04x res %08x, expected %04x res %08x", half ? "fp16" : "bf16",
                     fbits(v[i]), h[i], fbits(res[i]), e, fbits(r));
    }
    hc_cast_encode(v, NULL, n, half, h + 0);
    for (size_t i = 0; i < n; i++) {
        float r;

        assert_int_equal(h[i], ref_cast(v[i], half, &r));
        if (isnan(v[i]))
            assert_true(isnan(half ? hc_half_to_float(h[i]) : hc_bf16_to_float(h[i])));
    }
    free(h), free(in), free(res);
}

static void test_cast_specials(void **state)
{
    const float sp[] = {
        0.0f,
        -0.0f,
        INFINITY,
        -INFINITY,
        NAN,
        -NAN,
        bitsf(0x7f800001u),
        bitsf(0xffa00000u),
        bitsf(0x7fc12345u),
        65504.0f,
        65519.9f,
        65520.0f,
        -65520.0f,
        1e10f,
        FLT_MAX,
        -FLT_MAX,
        ldexpf(1, -24),
        ldexpf(1, -25),
        ldexpf(3, -25),
        ldexpf(1, -26),
        ldexpf(1, -14),
        ldexpf(1023, -24),
        1e-40f,
        -1e-45f,
        FLT_MIN,
        1.0f + ldexpf(1, -11),
        1.0f + ldexpf(3, -11),
        1.0f + ldexpf(1, -8),
        1.0f + ldexpf(3, -8),
        -1.0f - ldexpf(1, -8),
        3.14159265f,
        -2.5e-3f,
    };
    size_t n = sizeof(sp) / sizeof(sp[0]);

    (void)state;
    check_cast(sp, n, 1);
    check_cast(sp, n, 0);
    /* spot values: ties to even and NaN */
    assert_int_equal(hc_float_to_half(ldexpf(1, -25)), 0x0000);
    assert_int_equal(hc_float_to_half(ldexpf(3, -25)), 0x0002);
    assert_int_equal(hc_float_to_half(65520.0f), 0x7c00);
    assert_int_equal(hc_float_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);
    assert_int_equal(hc_float_to_bf16(1.0f + ldexpf(3, -8)), 0x3f82);
}

/* Every top half with low halves at and around both formats' ties. */
static void test_cast_sweep(void **state)
{
    static const uint32_t lo[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x2000,
                                  0x3000, 0x7fff, 0x8000, 0x8001, 0xffff};
    size_t                nl = sizeof(lo) / sizeof(lo[0]), n = 65536 * (nl + 1);
    float                *v = xmalloc(n * sizeof(float));

    (void)state;
    for (uint32_t hi = 0; hi < 65536; hi++) {
        for (size_t j = 0; j < nl; j++)
            v[hi * (nl + 1) + j] = bitsf(hi << 16 | lo[j]);
        v[hi * (nl + 1) + nl] = bitsf(hi << 16 | (rnd() & 0xffff));
    }
    check_cast(v, n - 3, 1); /* not a multiple of 8: the tail too */
    check_cast(v, n - 5, 0);
    free(v);
}

/* Decode of every 16-bit pattern against the scalar conversion, bit for bit. */
static void test_cast_decode(void **state)
{
    size_t    n = 65536 + 5;
    uint16_t *h = xmalloc(n * sizeof(uint16_t));
    float    *d = xmalloc(n * sizeof(float)), *a = xmalloc(n * sizeof(float));

    (void)state;
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    for (int half = 0; half < 2; half++) {
        for (size_t i = 0; i < n; i++)
            a[i] = 0.75f;
        hc_cast_decode(h, n, half, d, 0);
        hc_cast_decode(h, n, half, a, 1);
        for (size_t i = 0; i < n; i++) {
            float x = half ? hc_half_to_float(h[i]) : hc_bf16_to_float(h[i]);

            assert_int_equal(fbits(d[i]), fbits(x));
            assert_int_equal(fbits(a[i]), fbits(0.75f + x));
        }
    }
    free(h), free(d), free(a);
}

/* ---- error feedback ---- */

enum { EF_ONEBIT, EF_TOPK, EF_FP16, EF_BF16 };

/* One step: encode in with res, decode into dec (plain). */
static void ef_step(int codec, const float *in, float *res, size_t n, void *msg, void *scr,
                    float *dec)
{
    size_t k = n / 100;

    switch (codec) {
    case EF_ONEBIT:
        hc_onebit_encode(in, res, n, msg);
        hc_onebit_decode(msg, n, dec, 0);
        break;
    case EF_TOPK:
        assert_int_equal(hc_topk_encode(in, res, n, k, scr, msg), 0);
        memset(dec, 0, n * sizeof(float));
        assert_int_equal(hc_topk_decode_add(msg, k, dec, n), 0);
        break;
    default:
        hc_cast_encode(in, res, n, codec == EF_FP16, msg);
        hc_cast_decode(msg, n, codec == EF_FP16, dec, 0);
        break;
    }
}

/* 200 steps of inputs in [-1, 1) plus a per-value bias in [-0.5, 0.5)
 * (gradients do not average to zero), so one step's values have magnitude
 * up to 1.5 and rms 0.65. Per value, sum of inputs - sum of decoded must equal
 * the residual up to float rounding, and the residual's rms and max must stay
 * under the bounds (a few steps' worth: it does not grow with the steps). */
static void run_ef(int codec, double max_bound, double rms_bound)
{
    size_t  n = 20000, steps = 200;
    float  *in = xmalloc(n * sizeof(float)), *res = calloc(n, sizeof(float));
    float  *dec = xmalloc(n * sizeof(float)), *bias = xmalloc(n * sizeof(float));
    double *sum = calloc(n, sizeof(double)), worst = 0.0, drift = 0.0, rms = 0.0;
    void   *msg = xmalloc(n * sizeof(float)), *scr = xmalloc(hc_topk_scratch_bytes(n));

    assert_non_null(res), assert_non_null(sum);
    for (size_t i = 0; i < n; i++)
        bias[i] = 0.5f * rnd_unit();
    for (size_t t = 0; t < steps; t++) {
        double sq = 0.0;

        for (size_t i = 0; i < n; i++)
            in[i] = rnd_unit() + bias[i];
        ef_step(codec, in, res, n, msg, scr, dec);
        for (size_t i = 0; i < n; i++) {
            sum[i] += (double)in[i] - (double)dec[i];
            drift = fmax(drift, fabs(sum[i] - res[i]));
            worst = fmax(worst, fabs(res[i]));
            sq += (double)res[i] * res[i];
        }
        rms = fmax(rms, sqrt(sq / (double)n));
    }
    print_message("codec %d: residual max %.4g (bound %.4g) rms %.4g (bound %.4g); "
                  "max |sum_in - sum_dec - res| %.3g\n",
                  codec, worst, max_bound, rms, rms_bound, drift);
    assert_true(worst <= max_bound);
    assert_true(rms <= rms_bound);
    assert_true(drift <= 1e-3);
    free(in), free(res), free(dec), free(bias), free(sum), free(msg), free(scr);
}

/* Measured (this seed, and over 5000 steps): max 4-7, rms 0.56. */
static void test_ef_onebit(void **state)
{
    (void)state;
    run_ef(EF_ONEBIT, 12.0, 1.0);
}

/* A value waits about 100 steps to be sent: the residual holds that many
 * steps of its bias. Measured: max 24.2, rms 13.1 at 200 steps, and the same
 * (24.7, 13.4) at 2000. */
static void test_ef_topk(void **state)
{
    (void)state;
    run_ef(EF_TOPK, 40.0, 20.0);
}

/* Half an ulp at |v| < 2, and that squared is the rms bound's square. */
static void test_ef_casts(void **state)
{
    (void)state;
    run_ef(EF_FP16, 1.0 / 2048, 1.0 / 2048);
    run_ef(EF_BF16, 1.0 / 256, 1.0 / 256);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onebit_bytes),     cmocka_unit_test(test_onebit_roundtrip),
        cmocka_unit_test(test_onebit_zero_sign), cmocka_unit_test(test_onebit_generic_vs_avx2),
        cmocka_unit_test(test_onebit_large),     cmocka_unit_test(test_topk_random),
        cmocka_unit_test(test_topk_ties),        cmocka_unit_test(test_topk_nonfinite),
        cmocka_unit_test(test_topk_k),           cmocka_unit_test(test_topk_bad),
        cmocka_unit_test(test_cast_specials),    cmocka_unit_test(test_cast_sweep),
        cmocka_unit_test(test_cast_decode),      cmocka_unit_test(test_ef_onebit),
        cmocka_unit_test(test_ef_topk),          cmocka_unit_test(test_ef_casts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
