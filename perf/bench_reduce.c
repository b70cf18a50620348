/* bench_reduce.c - times hc_reduce sum in place (dst == a, b separate) over
 * 64 MiB buffers; reports GB/s of 3 * bytes moved (read a, read b, write a).
 *
 * gcc -std=gnu11 -O2 -Iinclude -Isrc perf/bench_reduce.c src/base/reduce.c \
 *     src/base/reduce_half.c -o bench_reduce && ./bench_reduce [iterations] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/reduce.h"
#include "base/reduce_half.h"

#define BYTES (64u << 20)

typedef void (*bench_fn)(void *a, const void *b, size_t count, hcomm_dtype_t dt);

static void via_reduce(void *a, const void *b, size_t count, hcomm_dtype_t dt)
{
    hc_reduce(a, a, b, count, dt, HCOMM_SUM);
}

static void via_f16_generic(void *a, const void *b, size_t count, hcomm_dtype_t dt)
{
    (void)dt;
    hc_reduce_f16_generic(a, a, b, count, HCOMM_SUM);
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best and mean GB/s over iters runs, after one warm-up run. */
static void bench(const char *name, hcomm_dtype_t dt, size_t esize, bench_fn fn, int iters)
{
    size_t         count = BYTES / esize;
    unsigned char *a     = aligned_alloc(64, BYTES);
    unsigned char *b     = aligned_alloc(64, BYTES);
    double         best = 1e30, total = 0;

    if (!a || !b) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    /* small values (1.0 or 0.5 in each format), so sums stay finite */
    for (size_t i = 0; i < count; i++) {
        float    one = 1.0f, half = 0.5f;
        uint16_t h1 = dt == HCOMM_FLOAT16 ? 0x3c00 : 0x3f80, h2 = dt == HCOMM_FLOAT16 ? 0x3800 : 0x3f00;
        if (esize == 4) {
            memcpy(a + i * 4, &one, 4);
            memcpy(b + i * 4, &half, 4);
        } else {
            memcpy(a + i * 2, &h1, 2);
            memcpy(b + i * 2, &h2, 2);
        }
    }
    fn(a, b, count, dt);
    for (int it = 0; it < iters; it++) {
        double t0 = now();
        fn(a, b, count, dt);
        double t = now() - t0;
        total += t;
        best = t < best ? t : best;
    }
    printf("%-26s best %6.2f GB/s  mean %6.2f GB/s  (%.2f ms)\n", name, 3.0 * BYTES / best / 1e9,
           3.0 * BYTES * iters / total / 1e9, best * 1e3);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 10;

    if (iters < 1)
        iters = 1;
    __builtin_cpu_init();
    printf("cpu: avx2 %s (target_clones take the avx2 clone iff yes), f16c path %s\n",
           __builtin_cpu_supports("avx2") ? "yes" : "no", hc_reduce_f16c_usable() ? "yes" : "no");
    printf("64 MiB per buffer, dst == a, %d iterations\n", iters);
    bench("float32 sum", HCOMM_FLOAT32, 4, via_reduce, iters);
    bench("bfloat16 sum", HCOMM_BFLOAT16, 2, via_reduce, iters);
    bench("float16 sum", HCOMM_FLOAT16, 2, via_reduce, iters);
    bench("float16 sum (generic path)", HCOMM_FLOAT16, 2, via_f16_generic, iters);
    return 0;
}
