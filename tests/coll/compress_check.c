/*
 * compress_check - one rank of the compressed-allreduce test, under hcomm-run
 * (or alone: one rank). For every codec, several counts, in place and out of
 * place, it runs STEPS steps with new inputs each step and compares every
 * step's result with the serial model (src/compress/compress_model.h) that
 * every rank computes from all ranks' inputs, residuals included: onebit and
 * topk must agree bit for bit, the casts (summed in half precision on the
 * wire) within a bound printed at the start; then each codec after a step
 * of all inf (no later output may be inf or NaN), and with values whose
 * average fits the format but whose sum does not (no output may be inf);
 * some again on a stream.
 * Then the bad configurations, float16 / bfloat16 tensors out of place with
 * different inputs per rank, bit for bit against the model, ranks that
 * disagree, and a state destroyed while its calls are still queued.
 * Exit: 0 all passed, 1 a case failed, 2 init failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__ /* defined by the headers above */
#include <malloc.h>
#endif

#include "base/reduce.h"
#include "compress/compress_model.h"
#include "hcomm_compress.h"
#include "hcomm_stream.h"
#include "test_comm.h"

#define STEPS 4

static const char *const specs[] = {"onebit", "topk:0.01", "topk:0.3", "topk:1",
                                    "fp16",   "bf16",      "none"};
static const size_t counts[] = {1, 7, 2048, 2049, 100003};

static int g_rank, g_nranks, g_failed, g_cases;

/* Rank r's input at element i of step t: varied signs and sizes, below 16. */
static float input_value(int r, int t, size_t i)
{
    uint64_t h = ((uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(t + 1) << 40) ^ i;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    return (float)((double)(h % 4001) / 256.0 - 7.8125);
}

/* Inputs beyond the ordinary: X_OVERFLOWED, step 0 all inf (an fp16 step whose
 * loss scale overflowed), which must leave no inf or NaN in the later steps'
 * outputs; X_LARGE, values whose average fits the format but whose sum over
 * ranks need not (fp16: up to 60000; the others up to 1e36, whose mean over a
 * onebit block fits a float but not the block's sum). */
enum { X_PLAIN, X_OVERFLOWED, X_LARGE };

static double large_of(hcomm_compress_kind_t k)
{
    return k == HCOMM_COMPRESS_FP16 ? 60000.0 : 1e36;
}

static float case_value(int x, hcomm_compress_kind_t k, int r, int t, size_t i)
{
    if (x == X_OVERFLOWED && t == 0)
        return INFINITY;
    if (x == X_LARGE)
        return (float)(input_value(r, t, i) / 8.0 * large_of(k));
    return input_value(r, t, i);
}

static int is_exact(hcomm_compress_kind_t k)
{
    return k == HCOMM_COMPRESS_ONEBIT || k == HCOMM_COMPRESS_TOPK;
}

/* Largest error a cast may show: n additions in half precision, each off by
 * half a step of a partial sum below n x 8, averaged over n. */
static double cast_bound(hcomm_compress_kind_t k, int n)
{
    double eps = k == HCOMM_COMPRESS_BF16 ? 1.0 / 256 : 1.0 / 2048;
    return k == HCOMM_COMPRESS_NONE ? 1e-4 : eps * 8.0 * n;
}

/* Elements of got that differ from want (scale: the inputs' largest / 8) or
 * are not finite. */
static size_t compare(hcomm_compress_kind_t k, const float *got, const float *want, size_t n,
                      double scale)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(got[i]) ||
               (is_exact(k) ? memcmp(&got[i], &want[i], sizeof(float)) != 0
                            : !(fabs((double)got[i] - want[i]) <= cast_bound(k, g_nranks) * scale));
    return bad;
}

/* STEPS steps of one codec and count against the model; x: the inputs. */
static int run_case(hcomm_comm_t comm, const char *spec, size_t count, int inplace,
                    hcomm_stream_t stream, int x)
{
    hcomm_compress_config_t cfg;
    hcomm_compress_t        st = NULL;
    hc_compress_model_t     m;
    float **in = calloc((size_t)g_nranks, sizeof(float *)), *buf = malloc(count * 4);
    float  *out = malloc(count * 4), *want = malloc(count * 4);
    int     fail = 0;

    g_cases++;
    if (!in || !buf || !out || !want || hcomm_compress_parse(spec, &cfg) != HCOMM_SUCCESS ||
        hcomm_compress_create(comm, &cfg, count, HCOMM_FLOAT32, &st) != HCOMM_SUCCESS ||
        hc_compress_model_init(&m, &cfg, g_nranks, count) != HCOMM_SUCCESS) {
        printf("FAIL rank %d: %s count %zu: set-up failed\n", g_rank, spec, count);
        return 1;
    }
    for (int r = 0; r < g_nranks; r++)
        in[r] = malloc(count * 4);
    for (int t = 0; t < STEPS && !fail; t++) {
        for (int r = 0; r < g_nranks; r++)
            for (size_t i = 0; i < count; i++)
                in[r][i] = case_value(x, cfg.kind, r, t, i);
        memcpy(buf, in[g_rank], count * 4);
        hcomm_status_t s = hcomm_allreduce_compressed(buf, inplace ? buf : out, count,
                                                      HCOMM_FLOAT32, st, comm, stream);
        if (s == HCOMM_SUCCESS && stream != NULL)
            s = hcomm_stream_synchronize(stream);
        if (s != HCOMM_SUCCESS) {
            printf("FAIL rank %d: %s count %zu step %d: %s\n", g_rank, spec, count, t,
                   hcomm_status_name(s));
            fail = 1;
            break;
        }
        hc_compress_model_step(&m, (const float *const *)in, want);
        if (x == X_OVERFLOWED && t == 0)
            continue; /* inf or NaN, as the model's: what counts is the next steps */
        size_t bad = compare(cfg.kind, inplace ? buf : out, want, count,
                             x == X_LARGE ? large_of(cfg.kind) / 8 : 1.0);
        if (bad != 0 || (!inplace && memcmp(buf, in[g_rank], count * 4) != 0)) {
            printf("FAIL rank %d: %s count %zu%s %s step %d: %zu of %zu elements differ from "
                   "the model or are not finite%s\n",
                   g_rank, spec, count,
                   x == X_OVERFLOWED ? " after an all-inf step"
                   : x == X_LARGE    ? " large"
                                     : "",
                   inplace ? "in place" : "out of place", t, bad, count,
                   bad ? "" : " (the send buffer changed)");
            fail = 1;
        }
    }
    for (int r = 0; r < g_nranks; r++)
        free(in[r]);
    free(in);
    free(buf);
    free(out);
    free(want);
    hc_compress_model_free(&m);
    hcomm_compress_destroy(st);
    return fail;
}

/* STEPS calls queued on a stream at once, in place, each on its own buffer,
 * one synchronize at the end: every call must keep its own buffers and the
 * state's residuals must advance in order. */
static int run_queued(hcomm_comm_t comm, const char *spec, size_t count, hcomm_stream_t stream)
{
    hcomm_compress_config_t cfg;
    hcomm_compress_t        st = NULL;
    hc_compress_model_t     m;
    float *in[8] = {0}, *bufs[STEPS] = {0}, *want = malloc(count * 4);
    int    fail  = 0;

    g_cases++;
    if (g_nranks > 8 || want == NULL || hcomm_compress_parse(spec, &cfg) != HCOMM_SUCCESS ||
        hcomm_compress_create(comm, &cfg, count, HCOMM_FLOAT32, &st) != HCOMM_SUCCESS ||
        hc_compress_model_init(&m, &cfg, g_nranks, count) != HCOMM_SUCCESS) {
        printf("FAIL rank %d: queued %s: set-up failed\n", g_rank, spec);
        return 1;
    }
    for (int r = 0; r < g_nranks; r++)
        in[r] = malloc(count * 4);
    for (int t = 0; t < STEPS; t++) {
        bufs[t] = malloc(count * 4);
        for (size_t i = 0; i < count; i++)
            bufs[t][i] = input_value(g_rank, t, i);
        fail |= hcomm_allreduce_compressed(bufs[t], bufs[t], count, HCOMM_FLOAT32, st, comm,
                                           stream) != HCOMM_SUCCESS;
    }
    fail |= hcomm_stream_synchronize(stream) != HCOMM_SUCCESS;
    for (int t = 0; t < STEPS && !fail; t++) {
        for (int r = 0; r < g_nranks; r++)
            for (size_t i = 0; i < count; i++)
                in[r][i] = input_value(r, t, i);
        hc_compress_model_step(&m, (const float *const *)in, want);
        size_t bad = compare(cfg.kind, bufs[t], want, count, 1.0);
        if (bad != 0) {
            printf("FAIL rank %d: %s queued on a stream, call %d: %zu of %zu elements differ\n",
                   g_rank, spec, t, bad, count);
            fail = 1;
        }
    }
    for (int r = 0; r < g_nranks; r++)
        free(in[r]);
    for (int t = 0; t < STEPS; t++)
        free(bufs[t]);
    free(want);
    hc_compress_model_free(&m);
    hcomm_compress_destroy(st);
    return fail;
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

/* The state destroyed while its calls are still queued on a stream (ranks
 * other than 0 issue theirs later, so rank 0's decode steps surely run after
 * its destroy): the calls keep the state until they have run and give the
 * model's results. glibc is told to map every buffer of 128 KiB and more, so
 * a step reading a state freed under it faults instead of reading what the
 * free left. */
static void destroy_while_queued(hcomm_comm_t comm)
{
    const size_t            count = (size_t)1 << 16, calls = 3;
    hcomm_compress_config_t cfg;
    hcomm_compress_t        st     = NULL;
    hcomm_stream_t          stream = NULL;
    hc_compress_model_t     m;
    float                  *in[8] = {0}, *bufs[3] = {0}, *want = malloc(count * 4);
    int                     fail = 0;

    g_cases++;
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
    if (g_nranks > 8 || want == NULL || hcomm_compress_parse("topk:0.01", &cfg) != HCOMM_SUCCESS ||
        hcomm_stream_create(&stream) != HCOMM_SUCCESS ||
        hcomm_compress_create(comm, &cfg, count, HCOMM_FLOAT32, &st) != HCOMM_SUCCESS ||
        hc_compress_model_init(&m, &cfg, g_nranks, count) != HCOMM_SUCCESS) {
        printf("FAIL rank %d: destroy while queued: set-up failed\n", g_rank);
        g_failed++;
        return;
    }
    for (int r = 0; r < g_nranks; r++)
        in[r] = malloc(count * 4);
    for (size_t t = 0; t < calls; t++) {
        bufs[t] = malloc(count * 4);
        for (size_t i = 0; i < count; i++)
            bufs[t][i] = input_value(g_rank, (int)t, i);
    }
    if (g_rank != 0)
        usleep(100 * 1000);
    for (size_t t = 0; t < calls; t++)
        fail |= hcomm_allreduce_compressed(bufs[t], bufs[t], count, HCOMM_FLOAT32, st, comm,
                                           stream) != HCOMM_SUCCESS;
    hcomm_compress_destroy(st);
    fail |= hcomm_stream_synchronize(stream) != HCOMM_SUCCESS;
    for (size_t t = 0; t < calls && !fail; t++) {
        for (int r = 0; r < g_nranks; r++)
            for (size_t i = 0; i < count; i++)
                in[r][i] = input_value(r, (int)t, i);
        hc_compress_model_step(&m, (const float *const *)in, want);
        size_t bad = compare(cfg.kind, bufs[t], want, count, 1.0);
        if (bad != 0) {
            printf("FAIL rank %d: state destroyed while queued, call %zu: %zu of %zu elements "
                   "differ\n",
                   g_rank, t, bad, count);
            fail = 1;
        }
    }
    if (fail)
        printf("FAIL rank %d: state destroyed while its calls were queued\n", g_rank);
    g_failed += fail;
    for (int r = 0; r < g_nranks; r++)
        free(in[r]);
    for (size_t t = 0; t < calls; t++)
        free(bufs[t]);
    free(want);
    hc_compress_model_free(&m);
    hcomm_stream_destroy(stream);
}

/* Bad configurations: each a clear status (and one log line). */
static void bad_configs(hcomm_comm_t comm)
{
    hcomm_compress_config_t cfg = {HCOMM_COMPRESS_TOPK, 0};
    hcomm_compress_t        st  = NULL;
    float                   x[16] = {0};

    expect("topk ratio 0", hcomm_compress_create(comm, &cfg, 16, HCOMM_FLOAT32, &st),
           HCOMM_ERR_INVALID_ARG);
    cfg.ratio = 1.5;
    expect("topk ratio 1.5", hcomm_compress_create(comm, &cfg, 16, HCOMM_FLOAT32, &st),
           HCOMM_ERR_INVALID_ARG);
    cfg.ratio = 0.01; /* its pairs' indices are 32 bits */
    expect("topk of 2^32 elements",
           hcomm_compress_create(comm, &cfg, (size_t)UINT32_MAX + 1, HCOMM_FLOAT32, &st),
           HCOMM_ERR_OVERFLOW);
    expect("parse topk:0", hcomm_compress_parse("topk:0", &cfg), HCOMM_ERR_INVALID_ARG);
    expect("parse topk", hcomm_compress_parse("topk", &cfg), HCOMM_ERR_INVALID_ARG);
    expect("parse twobit", hcomm_compress_parse("twobit", &cfg), HCOMM_ERR_INVALID_ARG);
    /* a name reads back as the same config, in the fewest digits */
    static const double ratios[] = {0.01, 1.0 / 3, 0.07, 0.1 + 1e-12, 1e-7, 1.0};
    for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
        hcomm_compress_config_t back     = {HCOMM_COMPRESS_NONE, 0};
        char                    name[64] = "";
        cfg = (hcomm_compress_config_t){HCOMM_COMPRESS_TOPK, ratios[i]};
        g_cases++;
        if (hcomm_compress_name(&cfg, name, sizeof(name)) == NULL ||
            hcomm_compress_parse(name, &back) != HCOMM_SUCCESS || back.kind != cfg.kind ||
            back.ratio != cfg.ratio || (i == 0 && strcmp(name, "topk:0.01") != 0)) {
            printf("FAIL rank %d: topk ratio %.17g named \"%s\", which parses as %.17g\n", g_rank,
                   cfg.ratio, name, back.ratio);
            g_failed++;
        }
    }
    expect("parse onebit", hcomm_compress_parse("onebit", &cfg), HCOMM_SUCCESS);
    expect("int32 tensor", hcomm_compress_create(comm, &cfg, 16, HCOMM_INT32, &st),
           HCOMM_ERR_INVALID_DTYPE);
    expect("create 16", hcomm_compress_create(comm, &cfg, 16, HCOMM_FLOAT32, &st), HCOMM_SUCCESS);
    expect("state for another size",
           hcomm_allreduce_compressed(x, x, 8, HCOMM_FLOAT32, st, comm, NULL),
           HCOMM_ERR_INVALID_ARG);
    expect("state for another dtype",
           hcomm_allreduce_compressed(x, x, 16, HCOMM_FLOAT16, st, comm, NULL),
           HCOMM_ERR_INVALID_ARG);
    expect("NULL state", hcomm_allreduce_compressed(x, x, 16, HCOMM_FLOAT32, NULL, comm, NULL),
           HCOMM_ERR_INVALID_ARG);
    expect("NULL buffer", hcomm_allreduce_compressed(NULL, x, 16, HCOMM_FLOAT32, st, comm, NULL),
           HCOMM_ERR_NULL_BUFFER);
    expect("inside a group", hcomm_group_start(), HCOMM_SUCCESS);
    expect("inside a group", hcomm_allreduce_compressed(x, x, 16, HCOMM_FLOAT32, st, comm, NULL),
           HCOMM_ERR_INVALID_USAGE);
    expect("group end: the group failed", hcomm_group_end(), HCOMM_ERR_INVALID_USAGE);
    expect("still usable", hcomm_allreduce_compressed(x, x, 16, HCOMM_FLOAT32, st, comm, NULL),
           HCOMM_SUCCESS);
    expect("reset", hcomm_compress_reset(st), HCOMM_SUCCESS);
    hcomm_compress_destroy(st);
    hcomm_compress_destroy(NULL);

    /* a state of a destroyed communicator, used with a later one (malloc
     * often gives it the same address): refused, not sized for the old */
    hcomm_comm_t alone = NULL, all = NULL;
    float        big[4096] = {0};
    expect("split alone", hcomm_comm_split(comm, g_rank, 0, &alone), HCOMM_SUCCESS);
    expect("create on it", hcomm_compress_create(alone, &cfg, 4096, HCOMM_FLOAT32, &st),
           HCOMM_SUCCESS);
    expect("destroy it", hcomm_comm_destroy(alone), HCOMM_SUCCESS);
    expect("split all", hcomm_comm_split(comm, 0, g_rank, &all), HCOMM_SUCCESS);
    expect("state of a destroyed communicator",
           hcomm_allreduce_compressed(big, big, 4096, HCOMM_FLOAT32, st, all, NULL),
           HCOMM_ERR_INVALID_ARG);
    hcomm_compress_destroy(st);
    if (all != NULL)
        hcomm_comm_destroy(all);
}

/* Ranks that disagree: rank 0's topk state is for 1000 elements, the
 * others' for 2000, both 10 pairs, so rank 0 decodes indexes out of its range.
 * Queued on a stream, the call returned before that: the stream and the
 * communicator (failed: the ranks' results differ) must say so. On a
 * communicator of its own, which the others find failed at their next call. */
static void disagreeing_ranks(hcomm_comm_t comm)
{
    size_t                  n      = g_rank == 0 ? 1000 : 2000;
    hcomm_compress_config_t cfg    = {HCOMM_COMPRESS_TOPK, g_rank == 0 ? 0.01 : 0.005};
    hcomm_comm_t            sub    = NULL;
    hcomm_stream_t          stream = NULL;
    hcomm_compress_t        st     = NULL;
    float                  *x      = g_nranks > 1 ? malloc(n * sizeof(float)) : NULL;

    if (g_nranks < 2) /* one rank agrees with itself */
        return;
    expect("disagreeing ranks: malloc", x != NULL ? HCOMM_SUCCESS : HCOMM_ERR_NO_MEMORY,
           HCOMM_SUCCESS);
    if (x == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)i; /* the largest last: the others' pairs lie past 1000 */
    expect("disagreeing ranks: split", hcomm_comm_split(comm, 0, g_rank, &sub), HCOMM_SUCCESS);
    expect("disagreeing ranks: stream", hcomm_stream_create(&stream), HCOMM_SUCCESS);
    expect("disagreeing ranks: state", hcomm_compress_create(sub, &cfg, n, HCOMM_FLOAT32, &st),
           HCOMM_SUCCESS);
    expect("disagreeing ranks: queued",
           hcomm_allreduce_compressed(x, x, n, HCOMM_FLOAT32, st, sub, stream), HCOMM_SUCCESS);
    hcomm_status_t sync = hcomm_stream_synchronize(stream);
    if (g_rank == 0) {
        expect("disagreeing ranks: the stream", sync, HCOMM_ERR_PROTOCOL);
        expect("disagreeing ranks: the communicator", hcomm_comm_get_error(sub),
               HCOMM_ERR_PROTOCOL);
    }
    hcomm_stream_destroy(stream);
    hcomm_compress_destroy(st);
    hcomm_comm_destroy(sub);
    free(x);
}

/* A float16 or bfloat16 tensor: compressed through float32, the result
 * rounded back. Out of place into a buffer of 0xffff (a NaN in both), each
 * rank its own inputs, STEPS steps so the residuals count; the exact codecs
 * must give the model's result on the converted inputs, rounded, bit for bit. */
static void half_tensor(hcomm_comm_t comm, const char *spec, hcomm_dtype_t dt)
{
    const size_t            n    = 1003; /* not a multiple of 8: the casts' tails too */
    int                     half = dt == HCOMM_FLOAT16, fail = 0;
    hcomm_compress_config_t cfg;
    hcomm_compress_t        st = NULL;
    hc_compress_model_t     m;
    float   **in = calloc((size_t)g_nranks, sizeof(float *)), *want = malloc(n * 4);
    uint16_t *h = malloc(n * 2), *out = malloc(n * 2), *sent = malloc(n * 2);
    char      what[64];

    snprintf(what, sizeof(what), "%s %s tensor", spec, hcomm_dtype_name(dt));
    g_cases++;
    if (!in || !want || !h || !out || !sent || hcomm_compress_parse(spec, &cfg) != HCOMM_SUCCESS ||
        hcomm_compress_create(comm, &cfg, n, dt, &st) != HCOMM_SUCCESS ||
        hc_compress_model_init(&m, &cfg, g_nranks, n) != HCOMM_SUCCESS) {
        printf("FAIL rank %d: %s: set-up failed\n", g_rank, what);
        g_failed++;
        return;
    }
    for (int r = 0; r < g_nranks; r++)
        in[r] = malloc(n * 4);
    for (int t = 0; t < STEPS && !fail; t++) {
        /* rank r's inputs as dtype, and the model's float32 copy of them */
        for (int r = 0; r < g_nranks; r++)
            for (size_t i = 0; i < n; i++) {
                float    v = input_value(r, t, i) * (float)(r + 1);
                uint16_t x = half ? hc_float_to_half(v) : hc_float_to_bf16(v);
                in[r][i]   = half ? hc_half_to_float(x) : hc_bf16_to_float(x);
                if (r == g_rank)
                    h[i] = x;
            }
        memcpy(sent, h, n * 2);
        memset(out, 0xff, n * 2);
        hcomm_status_t s = hcomm_allreduce_compressed(h, out, n, dt, st, comm, NULL);
        if (s != HCOMM_SUCCESS) {
            printf("FAIL rank %d: %s step %d: %s\n", g_rank, what, t, hcomm_status_name(s));
            fail = 1;
            break;
        }
        hc_compress_model_step(&m, (const float *const *)in, want);
        size_t bad = 0, first = n;
        for (size_t i = 0; i < n; i++)
            if (out[i] != (half ? hc_float_to_half(want[i]) : hc_float_to_bf16(want[i])) &&
                bad++ == 0)
                first = i;
        if (bad != 0 || memcmp(h, sent, n * 2) != 0) {
            printf("FAIL rank %d: %s step %d: %zu of %zu elements differ from the model "
                   "(first %zu: 0x%04x)%s\n", g_rank, what, t, bad, n, first,
                   first < n ? out[first] : 0, bad ? "" : " (the send buffer changed)");
            fail = 1;
        }
    }
    g_failed += fail;
    for (int r = 0; r < g_nranks; r++)
        free(in[r]);
    free(in);
    free(want);
    free(h);
    free(out);
    free(sent);
    hc_compress_model_free(&m);
    hcomm_compress_destroy(st);
}

int main(void)
{
    hcomm_comm_t   comm = NULL;
    hcomm_status_t st;

    st = test_comm_init(&comm, &g_rank, &g_nranks);
    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, "compress_check: init failed: %s\n", hcomm_status_str(st));
        return 2;
    }
    if (g_rank == 0)
        printf("compress_check: %d ranks, %d steps per case; onebit/topk exact, fp16 within "
               "%g, bf16 within %g\n", g_nranks, STEPS, cast_bound(HCOMM_COMPRESS_FP16, g_nranks),
               cast_bound(HCOMM_COMPRESS_BF16, g_nranks));
    for (size_t s = 0; s < sizeof(specs) / sizeof(specs[0]); s++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int ip = 0; ip < 2; ip++)
                g_failed += run_case(comm, specs[s], counts[c], ip, NULL, X_PLAIN);
    for (size_t s = 0; s < sizeof(specs) / sizeof(specs[0]); s++) {
        g_failed += run_case(comm, specs[s], 4099, 0, NULL, X_OVERFLOWED);
        g_failed += run_case(comm, specs[s], 4099, 1, NULL, X_LARGE);
    }
    /* on a stream: the local steps become host functions between the collectives */
    hcomm_stream_t stream;
    if (hcomm_stream_create(&stream) != HCOMM_SUCCESS)
        g_failed++;
    for (size_t s = 0; s < sizeof(specs) / sizeof(specs[0]); s++) {
        g_failed += run_case(comm, specs[s], 2049, (int)(s % 2), stream, X_PLAIN);
        g_failed += run_queued(comm, specs[s], 4099, stream);
    }
    hcomm_stream_destroy(stream);
    bad_configs(comm);
    half_tensor(comm, "onebit", HCOMM_FLOAT16);
    half_tensor(comm, "onebit", HCOMM_BFLOAT16);
    half_tensor(comm, "topk:0.3", HCOMM_BFLOAT16);
    half_tensor(comm, "topk:0.3", HCOMM_FLOAT16);
    disagreeing_ranks(comm);
    destroy_while_queued(comm);
    printf("compress_check rank %d: %d cases, %d failed\n", g_rank, g_cases, g_failed);
    hcomm_comm_destroy(comm);
    return g_failed != 0;
}
