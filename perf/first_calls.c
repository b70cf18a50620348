/*
 * first_calls.c - what the first collectives after init cost: forks N ranks on
 * this host, each initialises a communicator and times every one of CALLS
 * float32 sum allreduces of BYTES from the first on, with no warm-up of its
 * own. A call's time runs from the last rank's entry to the last rank's return
 * (one host, one clock): what the collective itself took, without the ranks'
 * skew in leaving init, which on an oversubscribed host is a scheduler's time
 * slice. Prints the first calls one by one, then the mean over windows of
 * calls, and the first call's ratio to the steady state (the mean of the last
 * half).
 *   perf/first_calls [-N ranks] [-b bytes] [-n calls] [-p]  (defaults 2, 8, 20000)
 * -p also prints every call: its number and time, one per line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"
#include "perf_size.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Rank r's part: init, then when call i began and ended (t[2i], t[2i+1]). */
static int run_rank(const hcomm_unique_id_t *id, int nranks, int r, size_t bytes, int calls,
                    double *times, double *init_us)
{
    hcomm_comm_t comm;
    size_t       count = bytes / sizeof(float);
    float       *buf   = calloc(count ? count : 1, sizeof(float));
    double       t0;

    /* the record's pages touched now, not inside the calls they time */
    memset(times, 0, 2 * (size_t)calls * sizeof(double));
    t0 = now_us();
    if (buf == NULL || hcomm_comm_init(&comm, nranks, id, r) != HCOMM_SUCCESS) {
        fprintf(stderr, "first_calls: rank %d: init failed\n", r);
        return 1;
    }
    *init_us = now_us() - t0;
    for (int i = 0; i < calls; i++) {
        times[2 * i] = now_us();
        if (hcomm_allreduce(buf, buf, count, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL) !=
            HCOMM_SUCCESS) {
            fprintf(stderr, "first_calls: rank %d: allreduce %d failed\n", r, i);
            return 1;
        }
        times[2 * i + 1] = now_us();
    }
    hcomm_comm_destroy(comm);
    free(buf);
    return 0;
}

static double window_mean(const double *t, int from, int to)
{
    double sum = 0;
    for (int i = from; i < to; i++)
        sum += t[i];
    return to > from ? sum / (to - from) : 0;
}

int main(int argc, char **argv)
{
    int               nranks = 2, calls = 20000, opt, failed = 0, every = 0;
    size_t            bytes = 8;
    hcomm_unique_id_t id;

    while ((opt = getopt(argc, argv, "N:b:n:p")) != -1) {
        if (opt == 'N')
            nranks = atoi(optarg);
        else if (opt == 'b' && perf_parse_size(optarg, &bytes) != 0)
            return 2;
        else if (opt == 'n')
            calls = atoi(optarg);
        else if (opt == 'p')
            every = 1;
        else if (opt != 'b') {
            fprintf(stderr, "usage: %s [-N ranks] [-b bytes] [-n calls] [-p]\n", argv[0]);
            return 2;
        }
    }
    if (nranks < 1 || nranks > 1024 || calls < 2) {
        fprintf(stderr, "first_calls: -N 1..1024 and -n 2 or more\n");
        return 2;
    }
    /* every rank's times, shared with the parent */
    size_t  per   = 2 * (size_t)calls + 1;
    double *times = mmap(NULL, (size_t)nranks * per * sizeof(double), PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (times == MAP_FAILED || hcomm_get_unique_id(&id) != HCOMM_SUCCESS) {
        fprintf(stderr, "first_calls: setting up failed\n");
        return 1;
    }
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(run_rank(&id, nranks, r, bytes, calls, times + (size_t)r * per + 1,
                           times + (size_t)r * per));
        if (pid < 0) {
            perror("first_calls: fork");
            return 1;
        }
    }
    for (int r = 0, st; r < nranks; r++)
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
    if (failed)
        return 1;

    double *slow = calloc((size_t)calls, sizeof(double)), init = 0;
    for (int i = 0; i < calls; i++) {
        double last_in = 0, last_out = 0;
        for (int r = 0; r < nranks; r++) {
            const double *t = times + (size_t)r * per + 1 + 2 * (size_t)i;
            last_in         = t[0] > last_in ? t[0] : last_in;
            last_out        = t[1] > last_out ? t[1] : last_out;
        }
        slow[i] = last_out - last_in;
    }
    for (int r = 0; r < nranks; r++)
        init = times[(size_t)r * per] > init ? times[(size_t)r * per] : init;
    double steady = window_mean(slow, calls / 2, calls);
    printf("# %d ranks, float32 sum allreduce of %zu bytes, %d calls from the first after init\n"
           "# init (slowest rank) %.1f ms; per call, last rank's entry to last rank's return, us\n",
           nranks, bytes, calls, init / 1e3);
    printf("# first calls:");
    for (int i = 0; i < 10 && i < calls; i++)
        printf(" %.1f", slow[i]);
    printf("\n# calls        mean us\n");
    for (int lo = 0, hi = 1; lo < calls; lo = hi, hi = hi * 10 > calls ? calls : hi * 10)
        printf("%6d-%-6d  %8.2f\n", lo + 1, hi, window_mean(slow, lo, hi));
    printf("# steady state (mean of calls %d-%d): %.2f us; first call / steady: %.2f\n",
           calls / 2 + 1, calls, steady, steady > 0 ? slow[0] / steady : 0);
    for (int i = 0; every && i < calls; i++)
        printf("%d %.2f\n", i + 1, slow[i]);
    free(slow);
    return 0;
}
