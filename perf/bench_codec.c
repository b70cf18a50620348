/* bench_codec.c - single-thread throughput of the gradient codecs, in GB/s of
 * float32 input (1 GB = 1e9 bytes), best of several repetitions.
 *
 * Usage: make perf/bench_codec && perf/bench_codec [MAX_MIB]; by hand:
 *   gcc -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -O2 -Iinclude -Isrc perf/bench_codec.c \
 *       src/compress/codec_onebit.c src/compress/codec_topk.c src/base/cast.c \
 *       src/base/reduce.c src/base/reduce_half.c -lm -o perf/bench_codec
 *   perf/bench_codec [MAX_MIB]     (sizes 256 KiB, 4 MiB, 64 MiB; MAX_MIB caps them)
 *
 * Encoders run with error feedback (a residual array); onebit decode and the
 * topk decode run with add = 1, as a server summing n messages does. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compress/codec.h"

/* codec_onebit.c exports both paths (for its unit test). */
void hc_onebit_encode_generic(const float *in, float *residual, size_t n, uint8_t *out);
void hc_onebit_decode_generic(const uint8_t *msg, size_t n, float *out, int add);
int  hc_onebit_avx2_usable(void);

enum {
    OB_ENC,
    OB_DEC,
    OB_ENC_GEN,
    OB_DEC_GEN,
    TK_ENC,
    TK_DEC,
    F16_ENC,
    F16_DEC,
    BF16_ENC,
    BF16_DEC,
    NCASE
};

static const char *const case_name[NCASE] = {
    "onebit encode+EF",
    "onebit decode add",
    "onebit encode+EF (generic)",
    "onebit decode add (generic)",
    "topk 1% encode+EF",
    "topk 1% decode add",
    "fp16 encode+EF",
    "fp16 decode add",
    "bf16 encode+EF",
    "bf16 decode add",
};

typedef struct bench_buf {
    size_t          n, k;
    float          *in, *res, *out;
    uint8_t        *msg; /* big enough for any codec's message */
    void           *scratch;
    hc_topk_pair_t *pairs;
} bench_buf_t;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run_case(int c, bench_buf_t *b)
{
    switch (c) {
    case OB_ENC:
        hc_onebit_encode(b->in, b->res, b->n, b->msg);
        break;
    case OB_DEC:
        hc_onebit_decode(b->msg, b->n, b->out, 1);
        break;
    case OB_ENC_GEN:
        hc_onebit_encode_generic(b->in, b->res, b->n, b->msg);
        break;
    case OB_DEC_GEN:
        hc_onebit_decode_generic(b->msg, b->n, b->out, 1);
        break;
    case TK_ENC:
        if (hc_topk_encode(b->in, b->res, b->n, b->k, b->scratch, b->pairs) != 0)
            abort();
        break;
    case TK_DEC:
        hc_topk_decode_add(b->pairs, b->k, b->out, b->n);
        break;
    case F16_ENC:
    case BF16_ENC:
        hc_cast_encode(b->in, b->res, b->n, c == F16_ENC, (uint16_t *)b->msg);
        break;
    default:
        hc_cast_decode((const uint16_t *)b->msg, b->n, c == F16_DEC, b->out, 1);
        break;
    }
}

/* Best GB/s over repetitions lasting about 0.3 s in all (at least 3). */
static double bench_case(int c, bench_buf_t *b)
{
    double best = INFINITY, spent = 0.0;

    /* a decode reads the message its encode writes: that encode runs first */
    int producer = c == OB_DEC || c == OB_DEC_GEN ? OB_ENC
                   : c == TK_DEC                  ? TK_ENC
                   : c == F16_DEC                 ? F16_ENC
                   : c == BF16_DEC                ? BF16_ENC
                                                  : -1;
    memset(b->res, 0, b->n * sizeof(float));
    if (producer >= 0)
        run_case(producer, b);
    run_case(c, b); /* warm */
    for (int rep = 0; rep < 3 || (spent < 0.3 && rep < 1000); rep++) {
        double t0 = now_s(), dt;

        run_case(c, b);
        dt = now_s() - t0;
        spent += dt;
        best = dt < best ? dt : best;
    }
    return (double)b->n * sizeof(float) / best / 1e9;
}

static int buf_init(bench_buf_t *b, size_t n)
{
    uint64_t s = 88172645463325252ULL;

    b->n       = n;
    b->k       = n / 100;
    b->in      = malloc(n * sizeof(float));
    b->res     = malloc(n * sizeof(float));
    b->out     = calloc(n, sizeof(float));
    b->msg     = malloc(n * sizeof(uint16_t) + hc_onebit_bytes(n));
    b->scratch = malloc(hc_topk_scratch_bytes(n));
    b->pairs   = malloc((b->k + 1) * sizeof(*b->pairs));
    if (!b->in || !b->res || !b->out || !b->msg || !b->scratch || !b->pairs)
        return -1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b->in[i] = (float)(uint32_t)(s >> 32) / 2147483648.0f - 1.0f;
    }
    return 0;
}

static void buf_free(bench_buf_t *b)
{
    free(b->in), free(b->res), free(b->out), free(b->msg), free(b->scratch), free(b->pairs);
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {256u << 10, 4u << 20, 64u << 20};
    size_t              max     = SIZE_MAX;
    double              gbs[NCASE][3];
    int                 ns = 0;

    if (argc > 1) {
        char         *end;
        unsigned long mib = strtoul(argv[1], &end, 10);
        if (argv[1][0] == '-' || end == argv[1] || *end != '\0' || mib == 0 || mib > 65536) {
            fprintf(stderr, "usage: bench_codec [MAX_MIB] (1 to 65536)\n");
            return 2;
        }
        max = (size_t)mib << 20;
    }

    for (; ns < 3 && sizes[ns] <= max; ns++) {
        bench_buf_t b;

        if (buf_init(&b, sizes[ns] / sizeof(float)) != 0) {
            fprintf(stderr, "bench_codec: out of memory at %zu bytes\n", sizes[ns]);
            return 1;
        }
        for (int c = 0; c < NCASE; c++)
            gbs[c][ns] = bench_case(c, &b);
        buf_free(&b);
    }
    printf("# GB/s of float32 input, one thread, best of reps; AVX2 path %s\n",
           hc_onebit_avx2_usable() ? "used" : "absent (generic only)");
    printf("%-30s %10s %10s %10s\n", "codec", "256KiB", "4MiB", "64MiB");
    for (int c = 0; c < NCASE; c++) {
        printf("%-30s", case_name[c]);
        for (int j = 0; j < ns; j++)
            printf(" %10.2f", gbs[c][j]);
        printf("\n");
    }
    return 0;
}
