/* codec_topk.c - exact top-k by magnitude, with error feedback.
 *
 * Order: a value's key is its float bits without the sign, which orders |v|
 * as unsigned integers (NaN above inf, so a NaN is sent rather than kept).
 * Each value gets the 64-bit rank key << 32 | ~index: all distinct, and larger
 * means preferred, which breaks ties by lower index. The k largest ranks are
 * the selection.
 *
 * Expected O(n): a stratified sample of the ranks gives a threshold that about
 * 1.35 k values pass (k plus four standard deviations of the estimate); one
 * streaming pass computes v and collects the ranks that pass, in index order;
 * a quickselect on a copy of those finds the k-th rank, and a pass over the
 * candidates emits the selection with indexes ascending. When fewer than k
 * pass (the estimate was too high) or too many (flat data), a quickselect over
 * all n ranks replaces the candidates. Pivots come from a generator seeded
 * from n, so a result never depends on anything but the input. The streaming
 * pass has an AVX2 version (chosen at run time); both collect the same list. */
#include "compress/codec.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/reduce_half.h"

#define HC_AVX2 __attribute__((target("avx2")))

#define TOPK_SAMPLES_MAX 16384
#define TOPK_SMALL 4096 /* below this n, or above k > n / 8: select over all */

/* Exported for the unit test: the encoder without AVX2. */
int hc_topk_encode_generic(const float *in, float *residual, size_t n, size_t k, void *scratch,
                           hc_topk_pair_t *out);

size_t hc_topk_scratch_bytes(size_t n)
{
    return n * (sizeof(float) + sizeof(uint32_t));
}

static inline uint64_t rank_of(float x, size_t i)
{
    uint32_t u;

    memcpy(&u, &x, sizeof(u));
    return (uint64_t)(u & 0x7fffffffu) << 32 | (uint32_t) ~(uint32_t)i;
}

static inline uint32_t rank_index(uint64_t r)
{
    return ~(uint32_t)r;
}

static inline uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: the state is never 0 (seeded with n | 1 mixed) */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dULL;
}

static void sort_desc(uint64_t *a, ptrdiff_t lo, ptrdiff_t hi)
{
    for (ptrdiff_t i = lo + 1; i <= hi; i++) {
        uint64_t  x = a[i];
        ptrdiff_t j = i - 1;

        for (; j >= lo && a[j] < x; j--)
            a[j + 1] = a[j];
        a[j + 1] = x;
    }
}

static inline uint64_t median3(uint64_t a, uint64_t b, uint64_t c)
{
    if (a > b) {
        uint64_t t = a;

        a = b;
        b = t;
    }
    return c <= a ? a : c >= b ? b : c;
}

/* The element that would be at a[kth] were a[0, m) sorted descending
 * (Hoare partition, random median-of-3 pivots); reorders a. */
static uint64_t select_desc(uint64_t *a, size_t m, size_t kth, uint64_t *rng)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)m - 1, k = (ptrdiff_t)kth;

    while (hi - lo >= 16) {
        size_t    len = (size_t)(hi - lo + 1);
        uint64_t  p   = median3(a[lo + (ptrdiff_t)(rng_next(rng) % len)],
                                a[lo + (ptrdiff_t)(rng_next(rng) % len)],
                                a[lo + (ptrdiff_t)(rng_next(rng) % len)]);
        ptrdiff_t i = lo, j = hi;

        while (i <= j) {
            while (a[i] > p)
                i++;
            while (a[j] < p)
                j--;
            if (i <= j) {
                uint64_t t = a[i];

                a[i++] = a[j];
                a[j--] = t;
            }
        }
        /* [lo, j] >= p >= [i, hi]; anything between equals p */
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    sort_desc(a, lo, hi);
    return a[k];
}

/* v = in + residual into residual (when there is one); returns where v is. */
static const float *compute_v(const float *in, float *res, size_t n)
{
    if (!res)
        return in;
    for (size_t i = 0; i < n; i++)
        res[i] += in[i];
    return res;
}

/* Non-finite values rank above all finite ones, so every one is sent unless
 * more than k are, and then the k-th rank is one of them. Those left would be
 * re-selected every later step (about 1/ratio steps of inf or NaN after one
 * overflowed step): their residual becomes 0, as onebit's and the casts' do. */
static void drop_nonfinite(float *res, size_t n, uint64_t kth)
{
    if (res == NULL || kth >> 32 < 0x7f800000u)
        return;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(res[i]))
            res[i] = 0.0f;
}

/* Selection over all n ranks, then one pass emitting those >= the k-th;
 * returns the k-th. */
static uint64_t select_all(const float *v, float *res, size_t n, size_t k, uint64_t *work,
                           uint64_t *rng, hc_topk_pair_t *out)
{
    uint64_t kth;
    size_t   o = 0;

    for (size_t i = 0; i < n; i++)
        work[i] = rank_of(v[i], i);
    kth = select_desc(work, n, k - 1, rng);
    for (size_t i = 0; i < n && o < k; i++) {
        if (rank_of(v[i], i) >= kth) {
            out[o].index = (uint32_t)i;
            out[o].value = v[i];
            o++;
            if (res)
                res[i] = 0.0f;
        }
    }
    return kth;
}

/* The rank key threshold that about (k + 4 sigma + 8) / s of the values pass,
 * from s stratified samples of in + residual; 0 when sampling cannot help. */
static uint32_t sample_threshold(const float *in, const float *res, size_t n, size_t k,
                                 uint64_t *work, uint64_t *rng)
{
    size_t s  = n / 16 < TOPK_SAMPLES_MAX ? n / 16 : TOPK_SAMPLES_MAX;
    double ps = (double)k * (double)s / (double)n;
    size_t r  = (size_t)ceil(ps + 4.0 * sqrt(ps) + 8.0);

    if (r >= s / 2)
        return 0;
    for (size_t j = 0; j < s; j++) {
        size_t i = j * n / s + rng_next(rng) % (n / s);
        float  x = res ? in[i] + res[i] : in[i];

        work[j] = rank_of(x, i);
    }
    return (uint32_t)(select_desc(work, s, r - 1, rng) >> 32);
}

/* The streaming pass from value i on: v into residual, ranks with key >= t
 * appended to cand (holding c already) in index order. Returns their count,
 * or cap + 1 when more than cap pass. */
static size_t collect_from(const float *in, float *res, size_t i, size_t n, uint32_t t,
                           uint64_t *cand, size_t c, size_t cap)
{
    for (; i < n; i++) {
        float    x = res ? in[i] + res[i] : in[i];
        uint32_t u;

        if (res)
            res[i] = x;
        memcpy(&u, &x, sizeof(u));
        if ((u & 0x7fffffffu) >= t) {
            if (c == cap) {
                compute_v(in + i + 1, res ? res + i + 1 : NULL, n - i - 1);
                return cap + 1;
            }
            cand[c++] = rank_of(x, i);
        }
    }
    return c;
}

/* The same, 8 values a step: most steps have no candidate and cost one
 * compare. t >= 1, so key >= t is key > t - 1 on positive int32. */
static HC_AVX2 size_t collect_avx2(const float *in, float *res, size_t n, uint32_t t,
                                   uint64_t *cand, size_t cap)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), tv = _mm256_set1_epi32((int)(t - 1));
    const float  *v = res ? res : in;
    size_t        c = 0, i;

    for (i = 0; i + 8 <= n; i += 8) {
        __m256   x = _mm256_loadu_ps(in + i);
        __m256i  key;
        unsigned m;

        if (res) {
            x = _mm256_add_ps(x, _mm256_loadu_ps(res + i));
            _mm256_storeu_ps(res + i, x);
        }
        key = _mm256_and_si256(_mm256_castps_si256(x), absm);
        m   = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(key, tv)));
        for (; m; m &= m - 1) {
            size_t j = i + (size_t)__builtin_ctz(m);

            if (c == cap) {
                compute_v(in + i + 8, res ? res + i + 8 : NULL, n - i - 8);
                return cap + 1;
            }
            cand[c++] = rank_of(v[j], j);
        }
    }
    return collect_from(in, res, i, n, t, cand, c, cap);
}

static size_t collect(const float *in, float *res, size_t n, uint32_t t, uint64_t *cand, size_t cap,
                      int avx2)
{
    if (avx2)
        return collect_avx2(in, res, n, t, cand, cap);
    return collect_from(in, res, 0, n, t, cand, 0, cap);
}

/* The encoder; avx2 picks the streaming pass, nothing else differs. */
static int topk_encode(const float *in, float *residual, size_t n, size_t k, void *scratch,
                       hc_topk_pair_t *out, int avx2)
{
    uint64_t    *work = scratch, kth, rng = ((uint64_t)n * 0x9e3779b97f4a7c15ULL) | 1;
    const float *v;
    size_t       c = 0, o = 0;
    uint32_t     t = 0;

    if (k > n || n > UINT32_MAX)
        return -1;
    if (k == 0) {
        compute_v(in, residual, n);
        drop_nonfinite(residual, n, UINT64_MAX);
        return 0;
    }
    if (n >= TOPK_SMALL && k <= n / 8)
        t = sample_threshold(in, residual, n, k, work, &rng);
    if (t == 0) {
        v   = compute_v(in, residual, n);
        kth = select_all(v, residual, n, k, work, &rng, out);
        drop_nonfinite(residual, n, kth);
        return 0;
    }
    c = collect(in, residual, n, t, work, n / 2, avx2);
    v = residual ? residual : in;
    if (c < k || c > n / 2) {
        kth = select_all(v, residual, n, k, work, &rng, out);
        drop_nonfinite(residual, n, kth);
        return 0;
    }
    memcpy(work + c, work, c * sizeof(*work));
    kth = select_desc(work + c, c, k - 1, &rng);
    for (size_t j = 0; j < c && o < k; j++) {
        if (work[j] >= kth) {
            uint32_t i = rank_index(work[j]);

            out[o].index = i;
            out[o].value = v[i];
            o++;
            if (residual)
                residual[i] = 0.0f;
        }
    }
    drop_nonfinite(residual, n, kth);
    return 0;
}

int hc_topk_encode(const float *in, float *residual, size_t n, size_t k, void *scratch,
                   hc_topk_pair_t *out)
{
    return topk_encode(in, residual, n, k, scratch, out, hc_cpu_has_avx2());
}

int hc_topk_encode_generic(const float *in, float *residual, size_t n, size_t k, void *scratch,
                           hc_topk_pair_t *out)
{
    return topk_encode(in, residual, n, k, scratch, out, 0);
}

size_t hc_topk_decode_add(const hc_topk_pair_t *pairs, size_t k, float *out, size_t n)
{
    size_t bad = 0;

    for (size_t j = 0; j < k; j++) {
        if (pairs[j].index < n)
            out[pairs[j].index] += pairs[j].value;
        else
            bad++;
    }
    return bad;
}
