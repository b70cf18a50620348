/*
 * bucket_check - one rank of the gradient-bucket test, under hcomm-run (or
 * alone: one rank). NT tensors of random sizes (the same on every rank: 0, 1,
 * small, and larger than a bucket) are registered; each of STEPS steps fills
 * them with new values, marks them ready in an order of the rank's own (with
 * short random pauses), waits, and checks:
 *  - plain buckets (float32, float16, int32) against hcomm_allreduce(AVG) of
 *    each tensor alone, bit for bit. The inputs are small dyadic values whose
 *    sums are exact in any order, so the fused and the per-tensor average (a
 *    sum, then a division by nranks, in every algorithm) must agree although
 *    the algorithm and each element's place in the ring differ;
 *  - float32 with arbitrary values: bit for bit on 1-2 ranks (a + b is
 *    commutative), beyond within the bound of a different summation order
 *    (an element's order depends on the algorithm and on its offset in the
 *    ring's blocks); the differing count is printed;
 *  - compressed buckets (onebit, topk) bit for bit against the serial model of
 *    the compressed allreduce on each bucket's fused values;
 *  - the layout (tensors in order, first bucket at most 1 MiB and
 *    HCOMM_BUCKET_BYTES, the others at most HCOMM_BUCKET_BYTES unless a single
 *    tensor, each bucket as full as the next tensor allows);
 *  - bad usage: each a clear status.
 * With --kill instead: the last rank exits in the middle of a step and every
 * other rank's hcomm_buckets_wait must return an error. With --older-failure
 * (and HCOMM_TIMEOUT=1): the stream failed before the buckets were made, and
 * every step must still average and succeed.
 * Exit: 0 all passed, 1 a case failed, 2 init failure.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compress/compress_model.h"
#include "hcomm_bucket.h"
#include "test_comm.h"

#define NT    48
#define STEPS 3

static int      g_rank, g_nranks, g_failed, g_cases;
static size_t   g_counts[NT];
static uint64_t g_rng;

static uint64_t mix(uint64_t h)
{
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 32);
}

static uint64_t rnd(void)
{
    return mix(g_rng += 0x9e3779b97f4a7c15ull);
}

/* A hash of rank r's element i of tensor t at step s in case c. */
static uint64_t key(int c, int r, int s, int t, size_t i)
{
    return mix(((uint64_t)c << 56) ^ ((uint64_t)(r + 1) << 48) ^ ((uint64_t)s << 40) ^
               ((uint64_t)t << 32) ^ i);
}

/* Float to IEEE binary16 for values it holds exactly (|v| small, dyadic). */
static uint16_t to_half(float v)
{
    uint16_t sign = v < 0 ? 0x8000 : 0;
    int      e;
    double   m = frexp(fabs((double)v), &e); /* v = m 2^e, 0.5 <= m < 1 */
    if (v == 0)
        return 0;
    return (uint16_t)(sign | (uint16_t)((e + 14) << 10) | (uint16_t)((m * 2 - 1) * 1024));
}

typedef enum { V_EXACT, V_ANY } values_t;

typedef struct {
    const char   *name;
    hcomm_dtype_t dtype;
    values_t      values;
    const char   *compress; /* NULL: plain */
} kase_t;

static const kase_t cases[] = {
    {"float32 exact", HCOMM_FLOAT32, V_EXACT, NULL},
    {"float16 exact", HCOMM_FLOAT16, V_EXACT, NULL},
    {"int32", HCOMM_INT32, V_EXACT, NULL},
    {"float32 any", HCOMM_FLOAT32, V_ANY, NULL},
    {"float32 onebit", HCOMM_FLOAT32, V_ANY, "onebit"},
    {"float32 topk:0.05", HCOMM_FLOAT32, V_ANY, "topk:0.05"},
};

/* Rank r's element i: dyadic values (8 fraction bits, |v| < 8; float16: 3
 * bits, |v| <= 4) keep every sum over 8 ranks exact. */
static float any_value(uint64_t h)
{
    return (float)(((double)(h >> 11) / 9007199254740992.0 - 0.5) * ldexp(1.0, (int)(h % 16) - 8));
}

static void fill(const kase_t *k, int c, int r, int s, int t, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h = key(c, r, s, t, i);
        if (k->dtype == HCOMM_INT32)
            ((int32_t *)buf)[i] = (int32_t)(h % 2000001) - 1000000;
        else if (k->dtype == HCOMM_FLOAT16)
            ((uint16_t *)buf)[i] = to_half((float)((int)(h % 65) - 32) / 8.0f);
        else if (k->values == V_EXACT)
            ((float *)buf)[i] = (float)((int)(h % 4001) - 2000) / 256.0f;
        else
            ((float *)buf)[i] = any_value(h);
    }
}

/* Two float32 sums of the same n terms in different orders differ by at most
 * 2 (n - 1) eps sum |x_r|; the average divides that by n and adds its own
 * rounding, both covered by 2 n eps sum |x_r| / n. */
static int close_enough(int c, int s, int t, size_t e, float a, float b)
{
    double sum = 0;
    for (int r = 0; r < g_nranks; r++)
        sum += fabs((double)any_value(key(c, r, s, t, e)));
    return fabs((double)a - b) <= 2.0 * ldexp(1.0, -24) * sum;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL rank %d: ", g_rank);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    g_failed++;
}

static void shuffle(int *p, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1)), x = p[i];
        p[i] = p[j], p[j] = x;
    }
}

/* The per-tensor allreduce, then the comparison. */
static size_t compare_plain(int c, int s, const kase_t *k, hcomm_comm_t comm, void **t,
                            void **ref, size_t es, size_t *differ)
{
    size_t bad = 0;
    for (int i = 0; i < NT; i++) {
        if (hcomm_allreduce(ref[i], ref[i], g_counts[i], k->dtype, HCOMM_AVG, comm, NULL) !=
            HCOMM_SUCCESS)
            return SIZE_MAX;
        for (size_t e = 0; e < g_counts[i]; e++) {
            int same = memcmp((char *)t[i] + e * es, (char *)ref[i] + e * es, es) == 0;
            *differ += !same;
            if (same)
                continue;
            if (k->values == V_EXACT || g_nranks <= 2)
                bad++;
            else
                bad += !close_enough(c, s, i, e, ((float *)t[i])[e], ((float *)ref[i])[e]);
        }
    }
    return bad;
}

/* Every bucket's fused values on every rank through the serial model. */
static size_t compare_model(int c, const kase_t *k, hcomm_buckets_t bk, hc_compress_model_t *m,
                            int s, void **t)
{
    int    nb = 0, first, last;
    size_t bad = 0;
    hcomm_buckets_layout(bk, 0, &nb, NULL, NULL);
    for (int b = 0; b < nb; b++) {
        hcomm_buckets_layout(bk, b, NULL, &first, &last);
        size_t n = 0;
        for (int i = first; i < last; i++)
            n += g_counts[i];
        if (n == 0)
            continue;
        float **in = calloc((size_t)g_nranks, sizeof(float *)), *want = malloc(n * 4);
        for (int r = 0; r < g_nranks; r++) {
            in[r] = malloc(n * 4);
            size_t off = 0;
            for (int i = first; i < last; off += g_counts[i], i++)
                fill(k, c, r, s, i, in[r] + off, g_counts[i]);
        }
        hc_compress_model_step(&m[b], (const float *const *)in, want);
        size_t off = 0;
        for (int i = first; i < last; off += g_counts[i], i++)
            for (size_t e = 0; e < g_counts[i]; e++)
                bad += memcmp(&((float *)t[i])[e], &want[off + e], 4) != 0;
        for (int r = 0; r < g_nranks; r++)
            free(in[r]);
        free(in);
        free(want);
    }
    return bad;
}

/* Compression: one model per bucket (NULL when plain). */
static hc_compress_model_t *models(const kase_t *k, hcomm_buckets_t bk)
{
    hcomm_compress_config_t cfg;
    int                     nb = 0, first, last;
    if (k->compress == NULL || hcomm_compress_parse(k->compress, &cfg) != HCOMM_SUCCESS)
        return NULL;
    hcomm_buckets_layout(bk, 0, &nb, NULL, NULL);
    hc_compress_model_t *m = calloc((size_t)nb, sizeof(*m));
    for (int b = 0; b < nb; b++) {
        size_t n = 0;
        hcomm_buckets_layout(bk, b, NULL, &first, &last);
        for (int i = first; i < last; i++)
            n += g_counts[i];
        if (n != 0 && hc_compress_model_init(&m[b], &cfg, g_nranks, n) != HCOMM_SUCCESS)
            return NULL;
    }
    return m;
}

/* One step: fill, mark ready in this rank's own order, wait, check. */
static int run_step(int c, const kase_t *k, hcomm_comm_t comm, hcomm_buckets_t bk,
                    hc_compress_model_t *m, int s, void **t, void **ref, size_t *differ)
{
    size_t es = hcomm_dtype_size(k->dtype), bad;
    int    order[NT];
    for (int i = 0; i < NT; i++) {
        fill(k, c, g_rank, s, i, t[i], g_counts[i]);
        if (g_counts[i] != 0)
            memcpy(ref[i], t[i], g_counts[i] * es);
    }
    shuffle(order, NT);
    for (int j = 0; j < NT; j++) {
        hcomm_status_t st = hcomm_buckets_ready(bk, order[j]);
        if (st != HCOMM_SUCCESS) {
            fail("%s step %d: hcomm_buckets_ready(%d): %s", k->name, s, order[j], hcomm_status_name(st));
            return 1;
        }
        if (rnd() % 8 == 0)
            usleep((useconds_t)(rnd() % 300));
    }
    hcomm_status_t st = hcomm_buckets_wait(bk);
    if (st != HCOMM_SUCCESS) {
        fail("%s step %d: hcomm_buckets_wait: %s", k->name, s, hcomm_status_name(st));
        return 1;
    }
    bad = m != NULL ? compare_model(c, k, bk, m, s, t)
                    : compare_plain(c, s, k, comm, t, ref, es, differ);
    if (bad != 0) {
        if (bad == SIZE_MAX)
            fail("%s step %d: the reference allreduce failed", k->name, s);
        else
            fail("%s step %d: %zu elements wrong", k->name, s, bad);
        return 1;
    }
    return 0;
}

static void run_case(int c, hcomm_comm_t comm, hcomm_stream_t stream)
{
    const kase_t           *k  = &cases[c];
    size_t                  es = hcomm_dtype_size(k->dtype), differ = 0, total = 0;
    void                   *t[NT], *ref[NT];
    hcomm_buckets_t         bk = NULL;
    hcomm_compress_config_t cfg = {HCOMM_COMPRESS_NONE, 0};
    hc_compress_model_t    *m   = NULL;

    g_cases++;
    for (int i = 0; i < NT; i++) {
        t[i]   = g_counts[i] ? malloc(g_counts[i] * es) : NULL; /* empty: NULL allowed */
        ref[i] = malloc(g_counts[i] * es + 1);
        total += g_counts[i];
    }
    if ((k->compress && hcomm_compress_parse(k->compress, &cfg) != HCOMM_SUCCESS) ||
        hcomm_buckets_create(comm, NT, t, g_counts, k->dtype, &cfg, stream, &bk) !=
            HCOMM_SUCCESS ||
        (k->compress && (m = models(k, bk)) == NULL)) {
        fail("%s: set-up failed", k->name);
    } else {
        for (int s = 0; s < STEPS; s++)
            if (run_step(c, k, comm, bk, m, s, t, ref, &differ) != 0)
                break;
    }
    if (g_rank == 0 && k->values == V_ANY && !k->compress)
        printf("bucket_check: %s: %zu of %zu elements not bit-identical to the per-tensor "
               "allreduce over %d steps (%s)\n", k->name, differ, total * STEPS, STEPS,
               g_nranks <= 2 ? "must be 0" : "allowed: a different summation order");
    if (m != NULL) {
        int nb = 0;
        hcomm_buckets_layout(bk, 0, &nb, NULL, NULL);
        for (int b = 0; b < nb; b++)
            hc_compress_model_free(&m[b]);
        free(m);
    }
    hcomm_buckets_destroy(bk);
    for (int i = 0; i < NT; i++)
        free(t[i]), free(ref[i]);
}

/* HCOMM_BUCKET_BYTES as the library reads it (K/M/G suffixes). */
static size_t bucket_cap(void)
{
    const char *e = getenv("HCOMM_BUCKET_BYTES");
    char       *end;
    if (e == NULL || *e == 0)
        return (size_t)25 << 20;
    size_t v = strtoull(e, &end, 10);
    int    sh = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
              : *end == 'G' || *end == 'g' ? 30 : 0;
    return v << sh;
}

/* The layout of float32 tensors: in order, within caps, greedy. */
static void check_layout(hcomm_comm_t comm, hcomm_stream_t stream)
{
    static float    dummy[1];
    void           *t[NT];
    hcomm_buckets_t bk;
    size_t          cap = bucket_cap(), first_cap = cap < (1u << 20) ? cap : (1u << 20);
    int             nb = 0, f, l, next = 0;

    g_cases++;
    for (int i = 0; i < NT; i++)
        t[i] = dummy; /* never marked ready: never read */
    if (hcomm_buckets_create(comm, NT, t, g_counts, HCOMM_FLOAT32, NULL, stream, &bk) !=
        HCOMM_SUCCESS) {
        fail("layout: create failed");
        return;
    }
    hcomm_buckets_layout(bk, 0, &nb, NULL, NULL);
    for (int b = 0; b < nb; b++) {
        size_t bytes = 0, c = b == 0 ? first_cap : cap;
        int    nonempty = 0;
        hcomm_buckets_layout(bk, b, NULL, &f, &l);
        for (int i = f; i < l; i++)
            bytes += g_counts[i] * 4, nonempty += g_counts[i] != 0;
        if (f != next || l <= f || (bytes > c && nonempty > 1))
            fail("layout: bucket %d [%d, %d): bad range or over its cap", b, f, l);
        /* greedy: the next bucket's first tensor with data did not fit */
        if (b + 1 < nb && bytes + g_counts[l] * 4 <= c && bytes > 0)
            fail("layout: bucket %d could have taken tensor %d", b, l);
        next = l;
    }
    if (next != NT)
        fail("layout: buckets end at tensor %d of %d", next, NT);
    if (g_rank == 0)
        printf("bucket_check: %d tensors in %d buckets (cap %zu bytes, first %zu)\n", NT, nb,
               cap, first_cap);
    hcomm_buckets_destroy(bk);
}

static void expect(const char *what, hcomm_status_t got, hcomm_status_t want)
{
    g_cases++;
    if (got != want) {
        printf("FAIL rank %d: %s returned %s, expected %s\n", g_rank, what, hcomm_status_name(got),
               hcomm_status_name(want));
        g_failed++;
    }
}

/* Bad usage: each a clear status, and the buckets stay usable. */
static void bad_usage(hcomm_comm_t comm, hcomm_stream_t stream)
{
    float                   a[4] = {1, 2, 3, 4}, b[3] = {5, 6, 7};
    void                   *t[2] = {a, b}, *tn[2] = {a, NULL};
    size_t                  n[2] = {4, 3};
    hcomm_compress_config_t onebit = {HCOMM_COMPRESS_ONEBIT, 0};
    hcomm_buckets_t         bk = NULL;
    int                     nb = 0;

    expect("NULL stream", hcomm_buckets_create(comm, 2, t, n, HCOMM_FLOAT32, NULL, NULL, &bk),
           HCOMM_ERR_INVALID_ARG);
    expect("no tensors", hcomm_buckets_create(comm, 0, t, n, HCOMM_FLOAT32, NULL, stream, &bk),
           HCOMM_ERR_INVALID_ARG);
    expect("NULL tensor", hcomm_buckets_create(comm, 2, tn, n, HCOMM_FLOAT32, NULL, stream, &bk),
           HCOMM_ERR_NULL_BUFFER);
    expect("bad dtype",
           hcomm_buckets_create(comm, 2, t, n, HCOMM_DTYPE_COUNT, NULL, stream, &bk),
           HCOMM_ERR_INVALID_DTYPE);
    expect("onebit on int32", hcomm_buckets_create(comm, 2, t, n, HCOMM_INT32, &onebit, stream,
                                                   &bk), HCOMM_ERR_INVALID_DTYPE);
    hcomm_compress_config_t badkind = {(hcomm_compress_kind_t)42, 0};
    expect("bad compression kind",
           hcomm_buckets_create(comm, 2, t, n, HCOMM_FLOAT32, &badkind, stream, &bk),
           HCOMM_ERR_INVALID_ARG);
    expect("NULL comm", hcomm_buckets_create(NULL, 2, t, n, HCOMM_FLOAT32, NULL, stream, &bk),
           HCOMM_ERR_INVALID_COMM);
    expect("NULL buckets", hcomm_buckets_ready(NULL, 0), HCOMM_ERR_INVALID_ARG);
    expect("NULL buckets wait", hcomm_buckets_wait(NULL), HCOMM_ERR_INVALID_ARG);
    if (bk != NULL) {
        fail("bad usage: a failing create set its output");
        return;
    }
    expect("create", hcomm_buckets_create(comm, 2, t, n, HCOMM_FLOAT32, NULL, stream, &bk),
           HCOMM_SUCCESS);
    if (bk == NULL)
        return;
    expect("layout", hcomm_buckets_layout(bk, 0, &nb, NULL, NULL), HCOMM_SUCCESS);
    expect("layout bucket -1", hcomm_buckets_layout(bk, -1, &nb, NULL, NULL),
           HCOMM_ERR_INVALID_ARG);
    expect("layout bucket nb", hcomm_buckets_layout(bk, nb, &nb, NULL, NULL),
           HCOMM_ERR_INVALID_ARG);
    expect("ready -1", hcomm_buckets_ready(bk, -1), HCOMM_ERR_INVALID_ARG);
    expect("ready 2", hcomm_buckets_ready(bk, 2), HCOMM_ERR_INVALID_ARG);
    expect("wait, none ready", hcomm_buckets_wait(bk), HCOMM_ERR_INVALID_USAGE);
    expect("ready 1", hcomm_buckets_ready(bk, 1), HCOMM_SUCCESS);
    expect("ready 1 again", hcomm_buckets_ready(bk, 1), HCOMM_ERR_INVALID_USAGE);
    expect("wait, one not ready", hcomm_buckets_wait(bk), HCOMM_ERR_INVALID_USAGE);
    expect("ready 0", hcomm_buckets_ready(bk, 0), HCOMM_SUCCESS);
    expect("wait", hcomm_buckets_wait(bk), HCOMM_SUCCESS);
    if (a[0] != 1 || b[2] != 7) /* every rank gave the same values */
        fail("bad usage: the average of equal inputs changed them (%g, %g)", a[0], b[2]);
    expect("next step ready 0", hcomm_buckets_ready(bk, 0), HCOMM_SUCCESS);
    expect("next step ready 1", hcomm_buckets_ready(bk, 1), HCOMM_SUCCESS);
    expect("next step wait", hcomm_buckets_wait(bk), HCOMM_SUCCESS);
    hcomm_buckets_destroy(bk);
    hcomm_buckets_destroy(NULL);
}

/* Sizes, the same on every rank: 0, 1, up to 5000, and above a bucket. */
static void pick_sizes(void)
{
    size_t big = bucket_cap() / 4 + 1;
    if (big > 300000)
        big = 300000; /* above the first bucket's 1 MiB, without tens of MB */
    for (int i = 0; i < NT; i++) {
        uint64_t h = rnd() % 10;
        g_counts[i] = h == 0 ? 0 : h == 1 ? 1 : h <= 7 ? 2 + rnd() % 5000 : big + rnd() % big;
    }
    g_counts[0] = 0;          /* an empty tensor first */
    g_counts[NT - 1] = big;   /* and a large one last */
}

/* --kill: the last rank leaves in the middle of a step; every other rank's
 * wait must fail (HCOMM_TIMEOUT bounds it), not hang or succeed. */
static int kill_case(hcomm_comm_t comm, hcomm_stream_t stream)
{
    enum { KT = 8, KN = 300000 };
    float          *a = calloc((size_t)KT * KN, sizeof(float));
    void           *t[KT];
    size_t          n[KT];
    hcomm_buckets_t bk;

    for (int i = 0; i < KT; i++)
        t[i] = a + (size_t)i * KN, n[i] = KN;
    if (g_nranks < 2 || a == NULL ||
        hcomm_buckets_create(comm, KT, t, n, HCOMM_FLOAT32, NULL, stream, &bk) != HCOMM_SUCCESS) {
        printf("FAIL rank %d: --kill: set-up failed (it needs 2 ranks or more)\n", g_rank);
        return 1;
    }
    for (int i = 0; i < KT; i++) {
        if (g_rank == g_nranks - 1 && i == KT / 2) {
            usleep(100000); /* the others have launched buckets by now */
            _exit(0);
        }
        hcomm_buckets_ready(bk, i); /* may fail once the peer is gone */
    }
    hcomm_status_t st = hcomm_buckets_wait(bk);
    printf("%s rank %d: --kill: hcomm_buckets_wait returned %s\n", st < 0 ? "PASS" : "FAIL",
           g_rank, hcomm_status_name(st));
    hcomm_buckets_destroy(bk);
    hcomm_stream_destroy(stream);
    hcomm_comm_abort(comm);
    free(a);
    return st >= 0;
}

static void nap(void *arg)
{
    usleep((useconds_t)(uintptr_t)arg);
}

/* --older-failure: the stream failed before the buckets came (an event wait
 * that timed out: run with HCOMM_TIMEOUT=1); the stream's error is sticky,
 * but it is not theirs: every step still averages and succeeds. */
static int older_failure_case(hcomm_comm_t comm, hcomm_stream_t stream)
{
    enum { KN = 1000 };
    static float    a[KN];
    void           *t[1] = {a};
    size_t          n[1] = {KN};
    hcomm_stream_t  side;
    hcomm_event_t   ev;
    hcomm_buckets_t bk;
    int             bad = 0;

    if (hcomm_stream_create(&side) != HCOMM_SUCCESS || hcomm_event_create(&ev) != HCOMM_SUCCESS ||
        hcomm_launch_host_func(side, nap, (void *)(uintptr_t)1500000) != HCOMM_SUCCESS ||
        hcomm_event_record(ev, side) != HCOMM_SUCCESS ||
        hcomm_stream_wait_event(stream, ev) != HCOMM_SUCCESS) {
        printf("FAIL rank %d: --older-failure: set-up failed\n", g_rank);
        return 1;
    }
    /* synchronize's own wait (HCOMM_TIMEOUT without a task finishing) may end
     * just before the event wait fails; the second one returns once it did,
     * so the buckets come after the failure (what is queued behind a wait
     * before it fails is skipped, docs/streams.md) */
    hcomm_status_t st = hcomm_stream_synchronize(stream);
    if (st == HCOMM_ERR_TIMEOUT)
        st = hcomm_stream_synchronize(stream);
    if (st != HCOMM_ERR_TIMEOUT) {
        printf("FAIL rank %d: --older-failure: the event wait gave %s, not a timeout (run with "
               "HCOMM_TIMEOUT=1)\n",
               g_rank, hcomm_status_name(st));
        return 1;
    }
    if (hcomm_buckets_create(comm, 1, t, n, HCOMM_FLOAT32, NULL, stream, &bk) != HCOMM_SUCCESS) {
        printf("FAIL rank %d: --older-failure: hcomm_buckets_create failed\n", g_rank);
        return 1;
    }
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < KN; i++)
            a[i] = (float)(g_rank + step);
        hcomm_status_t r = hcomm_buckets_ready(bk, 0), w = hcomm_buckets_wait(bk);
        float          want = (float)(g_nranks - 1) / 2.0f + (float)step;
        if (r != HCOMM_SUCCESS || w != HCOMM_SUCCESS || a[0] != want || a[KN - 1] != want) {
            printf("FAIL rank %d: --older-failure step %d: ready %s, wait %s, %g (want %g)\n",
                   g_rank, step, hcomm_status_name(r), hcomm_status_name(w), (double)a[0],
                   (double)want);
            bad = 1;
        }
    }
    if (!bad)
        printf("PASS rank %d: --older-failure: 3 steps averaged after the stream's own failure\n",
               g_rank);
    hcomm_buckets_destroy(bk);
    hcomm_event_destroy(ev);
    hcomm_stream_destroy(side);
    hcomm_stream_destroy(stream);
    hcomm_comm_destroy(comm);
    return bad;
}

int main(int argc, char **argv)
{
    hcomm_comm_t   comm   = NULL;
    hcomm_stream_t stream = NULL;
    hcomm_status_t st     = test_comm_init(&comm, &g_rank, &g_nranks);

    if (st != HCOMM_SUCCESS || (st = hcomm_stream_create(&stream)) != HCOMM_SUCCESS) {
        fprintf(stderr, "bucket_check: init failed: %s\n", hcomm_status_str(st));
        return 2;
    }
    if (argc > 1 && strcmp(argv[1], "--kill") == 0)
        return kill_case(comm, stream);
    if (argc > 1 && strcmp(argv[1], "--older-failure") == 0)
        return older_failure_case(comm, stream);
    g_rng = 12345;
    pick_sizes();
    g_rng = 1000003u * (uint64_t)(g_rank + 1); /* from here: this rank's own order */
    check_layout(comm, stream);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
        run_case((int)c, comm, stream);
    bad_usage(comm, stream);
    if (hcomm_stream_destroy(stream) != HCOMM_SUCCESS)
        fail("hcomm_stream_destroy failed");
    printf("bucket_check rank %d: %d cases, %d failed\n", g_rank, g_cases, g_failed);
    hcomm_comm_destroy(comm);
    return g_failed != 0;
}
