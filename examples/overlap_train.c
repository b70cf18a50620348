/*
 * overlap_train.c - a simulated backward pass whose gradient all-reduce
 * overlaps its compute through gradient buckets (hcomm_bucket.h).
 *
 * The model has L layers; each owns a float32 gradient of --layer-bytes. The
 * backward pass visits them last layer first; each layer's "kernel" is real
 * floating-point work on the layer's gradient, calibrated at start to cost
 * --compute-us microseconds, whose result is the layer's gradient (a known
 * value per rank, layer, step and element, so the average can be checked).
 * Every step measures, on every rank, then takes the slowest rank's time:
 *   compute  the backward pass alone, no communication;
 *   comm     the buckets alone: every gradient marked ready at once, then wait;
 *   overlap  the backward pass marking each gradient ready as soon as its
 *            layer is done, then wait: buckets all-reduce on the stream while
 *            earlier layers still compute;
 *   serial   the backward pass, then every gradient marked ready, then wait.
 * and prints overlap / max(compute, comm), which overlap drives towards 1, and
 * serial / max(compute, comm), about (compute + comm) / max; pass_ms is the
 * backward pass inside the overlap step, longer than compute_ms where the
 * communication takes CPU from it. After each
 * communicating phase every gradient element is checked against the average
 * it must have (exactly representable inputs, so within float rounding); with
 * onebit or top-k, which leave no average, it must be the same on every rank.
 *
 * Launch: tools/hcomm-run -n 2 examples/overlap_train [--layers 16]
 *   [--layer-bytes 1M] [--compute-us 2000] [--steps 5] [--warmup 1]
 *   [--mode overlap|serial|both] [--compress none|onebit|topk:R|fp16|bf16]
 *   [--bucket-bytes 4M]
 * --bucket-bytes sets HCOMM_BUCKET_BYTES (default 25M, the first bucket at
 * most 1M): with the default, 16 layers of 1M make a 1M bucket and a 15M one
 * that can only start when the pass is over; 4M buckets overlap.
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcomm.h"
#include "hcomm_bucket.h"
#include "hcomm_compress.h"
#include "hcomm_stream.h"

/* A failing hcomm call ends the rank with status 1 (hcomm-run stops the rest). */
#define CHECK(call)                                                                        \
    do {                                                                                   \
        hcomm_status_t st_ = (call);                                                       \
        if (st_ != HCOMM_SUCCESS) {                                                        \
            fprintf(stderr, "overlap_train: rank %d: %s failed: %s (%s)\n", g_rank, #call, \
                    hcomm_status_name(st_), hcomm_status_str(st_));                        \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

enum { MODE_OVERLAP = 1, MODE_SERIAL = 2, MODE_BOTH = 3 };
/* T_PASS: the backward pass inside the overlap step (compute slowed by the
 * communication running beside it) */
enum { T_COMPUTE, T_COMM, T_OVERLAP, T_SERIAL, T_PASS, T_COMM_CPU, T_COUNT };

typedef struct {
    int                     layers, steps, warmup, mode;
    size_t                  layer_bytes;
    double                  compute_us;
    hcomm_compress_config_t compress;
} options_t;

static int           g_rank, g_nranks;
static volatile float g_half = 0.5f; /* read at run time: the kernel cannot be folded */

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* Rank r's gradient at element i of layer l in phase p: a multiple of 1/16 in
 * [-2, 1.9375], so sums over ranks are exact; cheap, so that the kernel's
 * cost is mostly its multiply-adds. */
static float target(int r, int l, int p, size_t i)
{
    uint32_t h = (uint32_t)i * 2654435761u + (uint32_t)l * 40503u + (uint32_t)p * 977u +
                 (uint32_t)r * 7919u;
    return (float)((int)(h >> 26) - 32) / 16.0f;
}

/* The layer's kernel: iters multiply-adds per element on chains that stay at
 * their targets (x * 0.5 + t * 0.5 == t exactly for these values), 64
 * independent chains at a time so that the cost is linear in iters (the
 * multiply-adds' throughput, not their latency). */
static void kernel(float *g, size_t n, int l, int p, long iters)
{
    const float c = g_half;
    float       x[64], h[64];
    for (size_t i0 = 0; i0 < n; i0 += 64) {
        size_t m = n - i0 < 64 ? n - i0 : 64;
        for (size_t j = 0; j < m; j++) {
            x[j] = target(g_rank, l, p, i0 + j);
            h[j] = x[j] * c;
        }
        for (long k = 0; k < iters; k++)
            for (size_t j = 0; j < m; j++)
                x[j] = x[j] * c + h[j];
        memcpy(g + i0, x, m * sizeof(float));
    }
}

/* The fastest of a few timed kernels (other processes share the CPUs). */
static double time_kernel(float *g, size_t n, long iters)
{
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        kernel(g, n, 0, 0, iters);
        double t = now() - t0;
        best     = t < best ? t : best;
    }
    return best;
}

/* Iterations per element for compute_us microseconds per layer: a pass with
 * none (the values alone) and the cost of one iteration, measured at 64 then
 * again at the first estimate. At least 1. */
static long calibrate(float *g, size_t n, double compute_us)
{
    if (compute_us <= 0 || n == 0)
        return 0;
    double want = compute_us * 1e-6, base = time_kernel(g, n, 0);
    long   iters = 64;
    for (int round = 0; round < 2; round++) {
        /* a noisy base can exceed the timed run: count at least half of the
         * run as iterations, or the estimate explodes */
        double t   = time_kernel(g, n, iters);
        double per = fmax(t - base, 0.5 * t) / (double)iters;
        iters      = (long)((want - base) / per + 0.5);
        if (iters < 1)
            return 1;
    }
    return iters;
}

static int lossy(const options_t *o)
{
    return o->compress.kind == HCOMM_COMPRESS_ONEBIT || o->compress.kind == HCOMM_COMPRESS_TOPK;
}

/* Lossy codecs leave no average to compare with, but every rank must hold the
 * same finite bits: a hash of each layer, its MIN and MAX over the ranks. */
static size_t check_lossy(const options_t *o, float **grad, size_t n, hcomm_comm_t comm)
{
    size_t bad = 0;
    for (int l = 0; l < o->layers; l++) {
        uint64_t h = 1469598103934665603ull, lo = 0, hi = 1;
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &grad[l][i], sizeof(u));
            h = (h ^ u) * 1099511628211ull;
            bad += !isfinite(grad[l][i]);
        }
        CHECK(hcomm_allreduce(&h, &lo, 1, HCOMM_UINT64, HCOMM_MIN, comm, NULL));
        CHECK(hcomm_allreduce(&h, &hi, 1, HCOMM_UINT64, HCOMM_MAX, comm, NULL));
        bad += lo != hi ? n : 0;
    }
    return bad;
}

/* Every element against the average of every rank's target. */
static size_t check(const options_t *o, float **grad, size_t n, int p, hcomm_comm_t comm)
{
    size_t bad = 0;
    double tol = o->compress.kind == HCOMM_COMPRESS_NONE ? 1e-6 : 1.0 / 64;
    if (lossy(o))
        return check_lossy(o, grad, n, comm);
    for (int l = 0; l < o->layers; l++)
        for (size_t i = 0; i < n; i++) {
            double sum = 0;
            for (int r = 0; r < g_nranks; r++)
                sum += target(r, l, p, i);
            double want = sum / g_nranks;
            bad += !(fabs(grad[l][i] - want) <= tol * (fabs(want) + 1e-3));
        }
    return bad;
}

/* The backward pass: layers last to first, each gradient handed to the
 * buckets when ready (bk != NULL) or not at all. */
static void backward(const options_t *o, float **grad, size_t n, int p, long iters,
                     hcomm_buckets_t bk)
{
    for (int l = o->layers - 1; l >= 0; l--) {
        kernel(grad[l], n, l, p, iters);
        if (bk != NULL)
            CHECK(hcomm_buckets_ready(bk, o->layers - 1 - l)); /* tensor j = layer L-1-j */
    }
}

static void ready_all(const options_t *o, hcomm_buckets_t bk)
{
    for (int j = 0; j < o->layers; j++)
        CHECK(hcomm_buckets_ready(bk, j));
}

/* One timed phase, all ranks starting together; returns this rank's seconds
 * (t[T_PASS]: the overlap step's backward pass; t[T_COMM_CPU]: the process's
 * CPU seconds in the communication alone). */
static double phase(int which, const options_t *o, float **grad, size_t n, int p, long iters,
                    hcomm_comm_t comm, hcomm_buckets_t bk, double *t)
{
    if (which == T_COMM)
        backward(o, grad, n, p, 0, NULL); /* the gradients, untimed */
    CHECK(hcomm_barrier(comm, NULL));
    double t0 = now(), cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    switch (which) {
    case T_COMPUTE: backward(o, grad, n, p, iters, NULL); break;
    case T_COMM: ready_all(o, bk); break;
    case T_OVERLAP:
        backward(o, grad, n, p, iters, bk);
        t[T_PASS] = now() - t0;
        break;
    case T_SERIAL:
        backward(o, grad, n, p, iters, NULL);
        ready_all(o, bk);
        break;
    }
    if (which != T_COMPUTE)
        CHECK(hcomm_buckets_wait(bk));
    double dt = now() - t0;
    if (which == T_COMM)
        t[T_COMM_CPU] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    if (which != T_COMPUTE) {
        size_t bad = check(o, grad, n, p, comm);
        if (bad != 0) {
            fprintf(stderr, "overlap_train: rank %d: phase %d: %zu gradient values wrong\n",
                    g_rank, p, bad);
            exit(1);
        }
    }
    return dt;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: overlap_train [--layers L] [--layer-bytes B[K|M]] [--compute-us U]\n"
               "  [--steps N] [--warmup W] [--mode overlap|serial|both]\n"
               "  [--compress none|onebit|topk:R|fp16|bf16] [--bucket-bytes B[K|M]]\n"
               "--bucket-bytes sets HCOMM_BUCKET_BYTES (default 25M; the first bucket 1M)\n");
}

/* A whole number of bytes, K or M suffix allowed; 0 for anything else. */
static size_t parse_bytes(const char *s)
{
    char              *end;
    unsigned long long v = s[0] == '-' ? 0 : strtoull(s, &end, 10);
    if (v == 0 || end == s)
        return 0;
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : 0;
    if (end[shift != 0] != '\0' || v > (SIZE_MAX >> shift))
        return 0;
    return (size_t)v << shift;
}

/* A whole number in [lo, 1e9]; -1 for anything else. */
static int parse_count(const char *s, int lo)
{
    char *end;
    long  v = strtol(s, &end, 10);
    return end == s || *end != '\0' || v < lo || v > 1000000000 ? -1 : (int)v;
}

static void parse(int argc, char **argv, options_t *o)
{
    static const struct option opts[] = {
        {"layers", 1, 0, 'l'}, {"layer-bytes", 1, 0, 'b'}, {"compute-us", 1, 0, 'c'},
        {"steps", 1, 0, 's'},  {"warmup", 1, 0, 'w'},      {"mode", 1, 0, 'm'},
        {"compress", 1, 0, 'C'}, {"bucket-bytes", 1, 0, 'B'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    *o = (options_t){16, 5, 1, MODE_BOTH, (size_t)1 << 20, 2000, {HCOMM_COMPRESS_NONE, 0}};
    while ((c = getopt_long(argc, argv, "l:b:c:s:w:m:C:B:h", opts, NULL)) != -1) {
        switch (c) {
        case 'l': o->layers = parse_count(optarg, 1); break;
        case 'b': o->layer_bytes = parse_bytes(optarg); break;
        case 'c': o->compute_us = atof(optarg); break;
        case 's': o->steps = parse_count(optarg, 1); break;
        case 'w': o->warmup = parse_count(optarg, 0); break;
        case 'm':
            o->mode = !strcmp(optarg, "overlap") ? MODE_OVERLAP
                      : !strcmp(optarg, "serial") ? MODE_SERIAL
                      : !strcmp(optarg, "both")   ? MODE_BOTH : 0;
            break;
        case 'C':
            if (hcomm_compress_parse(optarg, &o->compress) != HCOMM_SUCCESS)
                o->mode = 0;
            break;
        case 'B': { /* the library reads its parameters at the first call: before init */
            char   num[32];
            size_t v = parse_bytes(optarg);
            snprintf(num, sizeof(num), "%zu", v);
            if (v == 0 || setenv("HCOMM_BUCKET_BYTES", num, 1) != 0)
                o->mode = 0;
            break;
        }
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (o->layers < 1 || o->steps < 1 || o->warmup < 0 || o->mode == 0 ||
        o->layer_bytes < 4 || o->compute_us < 0 || optind != argc) {
        usage(stderr);
        exit(2);
    }
}

static void print_header(const options_t *o, hcomm_buckets_t bk, long iters, size_t n,
                         double layer_s)
{
    int  nb = 0;
    char spec[64];
    CHECK(hcomm_buckets_layout(bk, 0, &nb, NULL, NULL));
    printf("overlap_train: %d ranks, %d layers x %zu bytes (%.1f MiB of gradients) in %d "
           "buckets, compute %.0f us per layer asked, %.0f us measured (%ld multiply-adds per "
           "element), compress %s\n",
           g_nranks, o->layers, n * 4, (double)o->layers * (double)n * 4 / 1048576.0, nb,
           o->compute_us, layer_s * 1e6, iters,
           hcomm_compress_name(&o->compress, spec, sizeof(spec)));
    printf("%5s %11s %9s %11s %6s %8s %10s %6s\n", "step", "compute_ms", "comm_ms",
           "overlap_ms", "ratio", "pass_ms", "serial_ms", "ratio");
}

static void print_row(const char *label, const double *t, int mode)
{
    double m = fmax(t[T_COMPUTE], t[T_COMM]);
    printf("%5s %11.2f %9.2f", label, t[T_COMPUTE] * 1e3, t[T_COMM] * 1e3);
    if (mode & MODE_OVERLAP)
        printf(" %11.2f %6.2f %8.2f", t[T_OVERLAP] * 1e3, t[T_OVERLAP] / m, t[T_PASS] * 1e3);
    else
        printf(" %11s %6s %8s", "-", "-", "-");
    if (mode & MODE_SERIAL)
        printf(" %10.2f %6.2f", t[T_SERIAL] * 1e3, t[T_SERIAL] / m);
    printf("\n");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Steps: the phases of each step, the slowest rank's times, printed by rank 0. */
static void run(const options_t *o, hcomm_comm_t comm, hcomm_buckets_t bk, float **grad,
                size_t n, long iters)
{
    double sum[T_COUNT] = {0};
    int    p = 0;
    /* per-step ratios to max(compute, comm): their median resists a noisy step */
    double *ro = calloc((size_t)o->steps, sizeof(double)),
           *rs = calloc((size_t)o->steps, sizeof(double));
    if (ro == NULL || rs == NULL) {
        fprintf(stderr, "overlap_train: out of memory\n");
        exit(1);
    }
    for (int s = -o->warmup; s < o->steps; s++) {
        double t[T_COUNT] = {0};
        for (int w = 0; w < T_PASS; w++)
            if ((w != T_OVERLAP || (o->mode & MODE_OVERLAP)) &&
                (w != T_SERIAL || (o->mode & MODE_SERIAL)))
                t[w] = phase(w, o, grad, n, ++p, iters, comm, bk, t);
        CHECK(hcomm_allreduce(t, t, T_COUNT, HCOMM_FLOAT64, HCOMM_MAX, comm, NULL));
        if (s < 0)
            continue;
        for (int w = 0; w < T_COUNT; w++)
            sum[w] += t[w] / o->steps;
        ro[s] = t[T_OVERLAP] / fmax(fmax(t[T_COMPUTE], t[T_COMM]), 1e-9);
        rs[s] = t[T_SERIAL] / fmax(fmax(t[T_COMPUTE], t[T_COMM]), 1e-9);
        if (g_rank == 0) {
            char label[16];
            snprintf(label, sizeof(label), "%d", s + 1);
            print_row(label, t, o->mode);
        }
    }
    if (g_rank == 0) {
        print_row("avg", sum, o->mode);
        if ((o->mode & MODE_OVERLAP) && (o->mode & MODE_SERIAL))
            printf("median of the per-step ratios: overlap %.2f, serial %.2f\n",
                   median(ro, o->steps), median(rs, o->steps));
        printf("overlap_train: the communication alone kept %.0f%% of a CPU busy per rank "
               "(the busiest rank)", 100.0 * sum[T_COMM_CPU] / fmax(sum[T_COMM], 1e-9));
        if (o->mode & MODE_OVERLAP)
            printf("; the backward pass took %.2f x its time alone inside the overlap step",
                   sum[T_PASS] / fmax(sum[T_COMPUTE], 1e-9));
        printf("\n");
        printf("overlap_train: every gradient %s after each all-reduce\n",
               lossy(o) ? "identical on every rank (lossy compression: no average to check)"
                        : "checked against its expected average");
    }
    free(ro);
    free(rs);
}

int main(int argc, char **argv)
{
    options_t       o;
    hcomm_comm_t    comm;
    hcomm_stream_t  stream;
    hcomm_buckets_t bk;

    parse(argc, argv, &o);
    CHECK(hcomm_comm_init_env(&comm));
    CHECK(hcomm_comm_rank(comm, &g_rank));
    CHECK(hcomm_comm_size(comm, &g_nranks));
    size_t  n     = o.layer_bytes / 4;
    float **grad  = calloc((size_t)o.layers, sizeof(float *));
    void  **order = calloc((size_t)o.layers, sizeof(void *));
    size_t *count = calloc((size_t)o.layers, sizeof(size_t));
    if (grad == NULL || order == NULL || count == NULL) {
        fprintf(stderr, "overlap_train: out of memory\n");
        return 1;
    }
    for (int l = 0; l < o.layers; l++) {
        grad[l] = malloc(n * sizeof(float));
        if (grad[l] == NULL) {
            fprintf(stderr, "overlap_train: out of memory for %d layers\n", o.layers);
            return 1;
        }
        order[o.layers - 1 - l] = grad[l]; /* registered in backward order */
        count[o.layers - 1 - l] = n;
    }
    long   iters   = calibrate(grad[0], n, o.compute_us);
    double layer_s = time_kernel(grad[0], n, iters);
    CHECK(hcomm_stream_create(&stream));
    CHECK(hcomm_buckets_create(comm, o.layers, order, count, HCOMM_FLOAT32, &o.compress, stream,
                               &bk));
    if (g_rank == 0)
        print_header(&o, bk, iters, n, layer_s);
    run(&o, comm, bk, grad, n, iters);
    hcomm_buckets_destroy(bk);
    CHECK(hcomm_stream_destroy(stream));
    for (int l = 0; l < o.layers; l++)
        free(grad[l]);
    free(grad);
    free(order);
    free(count);
    CHECK(hcomm_comm_destroy(comm));
    return 0;
}
