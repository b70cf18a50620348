/*
 * trace_pair.c - what HCOMM_TRACE_FILE costs an 8-byte allreduce, read so that
 * a noisy machine's drift cancels: forks N ranks on this host; each makes two
 * communicators over the same ranks, one traced (into a scratch directory) and
 * one not, and runs float32 sum allreduces of BYTES on them in alternation:
 * CHUNKS rounds of CALLS calls on each, the order turned every round; blocking
 * calls (-z 1), or nonblocking ones 8 in flight (-z 0, as hcomm-perf's). Rank 0
 * prints each variant's median us per call and the median over rounds of the
 * round's traced / untraced ratio, which compares moments a few ms apart.
 *   perf/trace_pair [-N ranks] [-b bytes] [-n calls] [-c chunks] [-z 0|1]
 *   (defaults 2, 8, 5000, 101, 1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/params.h"
#include "hcomm.h"
#include "perf_size.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
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

#define PAIR_WINDOW 8 /* -z 0: calls in flight */

/* calls allreduces of buf on comm, blocking or PAIR_WINDOW in flight. */
static hcomm_status_t run_calls(float *buf, size_t count, hcomm_comm_t comm, int calls,
                                int blocking)
{
    hcomm_request_t req[PAIR_WINDOW];
    hcomm_status_t  st = HCOMM_SUCCESS;
    int             n  = 0;
    for (int c = 0; c < calls && st == HCOMM_SUCCESS; c++) {
        if (blocking) {
            st = hcomm_allreduce(buf, buf, count, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL);
            continue;
        }
        if (n == PAIR_WINDOW) {
            for (int k = 0; k < n && st == HCOMM_SUCCESS; k++)
                st = hcomm_wait(&req[k]);
            n = 0;
        }
        if (st == HCOMM_SUCCESS)
            st = hcomm_iallreduce(buf, buf, count, HCOMM_FLOAT32, HCOMM_SUM, comm, &req[n++]);
    }
    for (int k = 0; k < n && st == HCOMM_SUCCESS; k++)
        st = hcomm_wait(&req[k]);
    return st;
}

/* Rank r: the communicators (untraced, then traced), then the rounds; us
 * per call into us[2 * round + traced]. */
static int run_rank(const hcomm_unique_id_t ids[2], const char *trace, int nranks, int r,
                    size_t count, int calls, int chunks, int blocking, double *us)
{
    hcomm_comm_t comm[2];
    float       *buf = calloc(count, sizeof(float));
    for (int v = 0; v < 2; v++) {
        if (v == 1)
            setenv("HCOMM_TRACE_FILE", trace, 1);
        else
            unsetenv("HCOMM_TRACE_FILE");
        hc_params_reload(); /* each communicator reads it at init */
        if (buf == NULL || hcomm_comm_init(&comm[v], nranks, &ids[v], r) != HCOMM_SUCCESS) {
            fprintf(stderr, "trace_pair: rank %d: init failed\n", r);
            return 1;
        }
    }
    for (int i = 0; i < chunks; i++) {
        for (int k = 0; k < 2; k++) {
            int    v  = (i + k) % 2;
            double t0 = now_us();
            if (run_calls(buf, count, comm[v], calls, blocking) != HCOMM_SUCCESS) {
                fprintf(stderr, "trace_pair: rank %d: allreduce failed\n", r);
                return 1;
            }
            us[2 * i + v] = (now_us() - t0) / calls;
        }
    }
    for (int v = 0; v < 2; v++)
        hcomm_comm_destroy(comm[v]);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int    nranks = 2, calls = 5000, chunks = 101, blocking = 1, opt;
    size_t bytes  = 8;
    while ((opt = getopt(argc, argv, "N:b:n:c:z:")) != -1) {
        if (opt == 'N')
            nranks = atoi(optarg);
        else if (opt == 'b' && perf_parse_size(optarg, &bytes) == 0)
            continue;
        else if (opt == 'n')
            calls = atoi(optarg);
        else if (opt == 'c')
            chunks = atoi(optarg);
        else if (opt == 'z')
            blocking = atoi(optarg);
        else {
            fprintf(stderr, "usage: %s [-N ranks] [-b bytes] [-n calls] [-c chunks] [-z 0|1]\n",
                    argv[0]);
            return 2;
        }
    }
    if (nranks < 2 || calls < 1 || chunks < 1 || bytes < sizeof(float) ||
        (blocking != 0 && blocking != 1)) {
        fprintf(stderr, "trace_pair: need -N >= 2, -n >= 1, -c >= 1, -b >= 4, -z 0 or 1\n");
        return 2;
    }
    char dir[] = "/tmp/trace_pair.XXXXXX", trace[64];
    if (mkdtemp(dir) == NULL) {
        perror("trace_pair: mkdtemp");
        return 1;
    }
    snprintf(trace, sizeof(trace), "%s/t.json", dir);
    hcomm_unique_id_t ids[2];
    size_t            len = 2 * (size_t)chunks * sizeof(double);
    double *us = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (us == MAP_FAILED || hcomm_get_unique_id(&ids[0]) != HCOMM_SUCCESS ||
        hcomm_get_unique_id(&ids[1]) != HCOMM_SUCCESS) {
        fprintf(stderr, "trace_pair: setup failed\n");
        return 1;
    }
    int failed = 0;
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("trace_pair: fork");
            return 1;
        }
        if (pid == 0) /* rank 0's figures land in us; the others' in a private copy */
            _exit(run_rank(ids, trace, nranks, r, bytes / sizeof(float), calls, chunks, blocking,
                           r == 0 ? us : malloc(len)));
    }
    for (int r = 0; r < nranks; r++) {
        int st;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
    }
    struct stat st;
    char        path[96];
    snprintf(path, sizeof(path), "%s/t.0.json", dir);
    long traced_bytes = stat(path, &st) == 0 ? (long)st.st_size : -1;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "trace_pair: could not remove %s\n", dir);
    if (failed)
        return 1;
    double off[chunks], on[chunks], ratio[chunks];
    for (int i = 0; i < chunks; i++)
        off[i] = us[2 * i], on[i] = us[2 * i + 1], ratio[i] = on[i] / off[i];
    printf("# trace_pair: %d ranks, %zu bytes, %s, %d rounds of %d calls each way\n", nranks, bytes,
           blocking ? "blocking" : "nonblocking, 8 in flight", chunks, calls);
    printf("untraced  %.4f us per call (median of rounds)\n", median(off, chunks));
    printf("traced    %.4f us per call\n", median(on, chunks));
    printf("traced / untraced, median of the rounds' ratios: %.4f\n", median(ratio, chunks));
    printf("rank 0's trace file: %ld bytes\n", traced_bytes);
    return 0;
}
