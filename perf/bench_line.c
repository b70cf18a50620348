/*
 * bench_line.c - the floor under a 2-rank small allreduce over shm: two
 * processes exchanging one cache line each step, no library in between. Each
 * step both write the step's number into their own line and spin until the
 * peer's line shows it, as two ranks exchanging 8 bytes do. Prints ns per step
 * (the best of 7 runs of STEPS), unpinned (where the scheduler puts them, as
 * hcomm-perf runs) and pinned to the first two CPUs of the process's mask.
 *   make perf/bench_line && perf/bench_line [STEPS]
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE 64
#define SPIN_LIMIT (1L << 33) /* a peer that vanished: give up, never hang */

typedef struct {
    _Alignas(LINE) volatile uint64_t step[2][LINE / 8]; /* one line per side */
} lines_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The n-th CPU of mask (from 0), or -1. */
static int nth_cpu(const cpu_set_t *mask, int n)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, mask) && n-- == 0)
            return c;
    return -1;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        perror("bench_line: sched_setaffinity");
}

/* Waits until *p reaches v; 0, or -1 when the peer never gets there. */
static int wait_for(volatile uint64_t *p, uint64_t v)
{
    for (long spins = 0; *p < v; spins++)
        if (spins > SPIN_LIMIT)
            return -1;
    return 0;
}

/* One side's run of n steps, numbered from base + 1; ns per step. */
static double side_run(lines_t *l, int me, uint64_t base, long n)
{
    volatile uint64_t *mine = l->step[me], *peer = l->step[!me];
    uint64_t           t0   = now_ns();
    for (uint64_t s = base + 1; s <= base + (uint64_t)n; s++) {
        __atomic_store_n(mine, s, __ATOMIC_RELEASE);
        if (wait_for(peer, s) != 0)
            return -1;
    }
    return (double)(now_ns() - t0) / (double)n;
}

/* The best of 7 runs; -1 when a side failed. pinned: each side on its CPU
 * of mask (the parent's mask is given back after). */
static double measure(lines_t *l, long n, int pinned, const cpu_set_t *mask)
{
    l->step[0][0] = l->step[1][0] = 0;
    pid_t pid     = fork();
    if (pid < 0) {
        perror("bench_line: fork");
        return -1;
    }
    int    me   = pid == 0;
    double best = 1e30;
    if (pinned)
        pin(nth_cpu(mask, me));
    for (int r = 0; r < 7; r++) {
        double ns = side_run(l, me, (uint64_t)r * (uint64_t)n, n);
        if (ns < 0) {
            best = -1;
            break;
        }
        best = ns < best ? ns : best;
    }
    if (me)
        _exit(best < 0 ? 1 : 0);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    if (pinned && sched_setaffinity(0, sizeof(*mask), mask) != 0)
        perror("bench_line: giving the mask back");
    return best;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (n <= 0) {
        fprintf(stderr, "bench_line: STEPS must be a positive count, not '%s'\n", argv[1]);
        return 2;
    }
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0 || CPU_COUNT(&mask) < 2) {
        fprintf(stderr, "bench_line: needs 2 CPUs in this process's mask\n");
        return 2;
    }
    lines_t *l = mmap(NULL, sizeof(*l), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED) {
        perror("bench_line: mmap");
        return 1;
    }
    printf("# bench_line: ns per step of a one-line exchange between 2 processes, best of 7 x "
           "%ld\n",
           n);
    int rc = 0;
    for (int pinned = 0; pinned < 2; pinned++) {
        double ns = measure(l, n, pinned, &mask);
        if (ns < 0) {
            fprintf(stderr, "bench_line: a side failed (%s)\n", pinned ? "pinned" : "unpinned");
            rc = 1;
            continue;
        }
        printf("%-9s %8.1f\n", pinned ? "pinned" : "unpinned", ns);
    }
    munmap(l, sizeof(*l));
    return rc;
}
