/* bench_memcpy.c - single-core memcpy bandwidth, the physical reference that
 * perf/RESULTS.md divides bus bandwidths by. Prints the best of 20 copies of
 * 64 MiB (bytes copied / time). Build: make perf/bench_memcpy */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void)
{
    size_t n = (size_t)64 << 20;
    char  *a = malloc(n), *b = malloc(n);
    if (a == NULL || b == NULL)
        return 1;
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 1e9;
    for (int i = 0; i < 20; i++) {
        double t = now();
        memcpy(b, a, n);
        t = now() - t;
        best = t < best ? t : best;
    }
    printf("memcpy 64 MiB, one core: %.2f GB/s (best of 20)\n", (double)n / best / 1e9);
    int rc = b[n / 2] != 1;
    free(a);
    free(b);
    return rc;
}
