/*
 * bench_touch.c - what a page's first touch costs here, after the kernel has
 * already populated it: maps 2 MiB of shared memory with MAP_POPULATE (as the
 * shm transport maps a pair's rings), then times a read pass, a write pass and
 * a second read pass over its pages, and the same two passes through a second
 * mapping of the same memory; then private anonymous memory. On bare metal the
 * passes after MAP_POPULATE cost next to nothing; under a paravirtual
 * hypervisor (PVM) each page's first touch in a mapping is a trip to it.
 *   make perf/bench_touch && perf/bench_touch
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BYTES ((size_t)2 << 20)
#define PAGE 4096

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double read_pass(volatile const char *p)
{
    double t0  = now_us();
    char   sum = 0;
    for (size_t off = 0; off < BYTES; off += PAGE)
        sum += p[off];
    (void)sum;
    return now_us() - t0;
}

static double write_pass(volatile char *p)
{
    double t0 = now_us();
    for (size_t off = 0; off < BYTES; off += PAGE)
        p[off] = 1;
    return now_us() - t0;
}

int main(void)
{
    int fd = memfd_create("bench_touch", 0);
    if (fd < 0 || ftruncate(fd, BYTES) != 0) {
        perror("bench_touch: memfd");
        return 1;
    }
    char *a = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    char *b = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *c = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED || c == MAP_FAILED) {
        perror("bench_touch: mmap");
        return 1;
    }
    double r1 = read_pass(a), w1 = write_pass(a), r2 = read_pass(a);
    double r3 = read_pass(b), w3 = write_pass(b);
    double w4 = write_pass(c), w5 = write_pass(c);
    int    pages = (int)(BYTES / PAGE);
    printf("# us per page over %d pages\n", pages);
    printf("shared, MAP_POPULATE: first read %.2f, first write %.2f, second read %.2f\n",
           r1 / pages, w1 / pages, r2 / pages);
    printf("shared, second mapping: first read %.2f, first write %.2f\n", r3 / pages, w3 / pages);
    printf("private anonymous, MAP_POPULATE: first write %.2f, second write %.2f\n", w4 / pages,
           w5 / pages);
    return 0;
}
