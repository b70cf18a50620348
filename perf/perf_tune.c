/* perf_tune.c - hcomm-perf --tune: the same sweep, once per candidate algorithm
 * and chunk size (this program re-executed with HCOMM_ALGO and
 * HCOMM_CHUNK_BYTES set), then the fastest choice per size, written as a tuning
 * file that HCOMM_TUNING_FILE makes selection prefer (docs/tuning.md). The
 * candidates are the algorithms the library's table has for the collective
 * (src/algorithms/algo_table.c), the ones its selection pipeline weighs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algorithms/algo.h" /* the table of algorithms */
#include "perf.h"

#define TUNE_MAX_SIZES 64

typedef struct tune_best {
    size_t bytes;
    double time_us;
    int    algo, chunk;
} tune_best_t;

#define TUNE_MAX_ALGOS 8

/* hcomm's name of each benchmark that --tune serves, and its algorithms
 * (filled from the library's table by tune_candidates). */
static struct {
    const char *coll;
    const char *algos[TUNE_MAX_ALGOS];
} tune_cands[PERF_COLL_COUNT] = {
    [PERF_ALL_REDUCE] = {"allreduce"}, [PERF_ALL_GATHER] = {"allgather"},
    [PERF_REDUCE_SCATTER] = {"reduce_scatter"}, [PERF_BROADCAST] = {"broadcast"},
    [PERF_REDUCE] = {"reduce"},
};

/* Fills tune_cands[ci].algos with every algorithm the table has for it. */
static void tune_candidates(int ci)
{
    hc_coll_t coll = hc_coll_parse_n(tune_cands[ci].coll, strlen(tune_cands[ci].coll));
    int       n    = 0;
    for (int a = 1; a < HC_ALGO_COUNT && n < TUNE_MAX_ALGOS; a++)
        if (hc_algo_implements(coll, (hc_algo_t)a))
            tune_cands[ci].algos[n++] = hc_algo_name((hc_algo_t)a);
}
/* HCOMM_CHUNK_BYTES of each run, and the tuning file's word for it; "0" (not
 * pipelined) can win where a wire paces the ranks (perf/netns_chunk.sh) */
static const char *const tune_chunks[]     = {"64K", "256K", "1M", "0"};
static const char *const tune_chunk_file[] = {"65536", "262144", "1048576", "none"};
#define TUNE_NCHUNKS 4

/* Runs argv with the given env; parses (size, out-of-place time) rows. */
static int tune_run(char **argv, const char *algo, const char *chunk, size_t *sizes,
                    double *times, int *n)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setenv("HCOMM_ALGO", algo, 1);
        setenv("HCOMM_CHUNK_BYTES", chunk, 1);
        unsetenv("HCOMM_TUNING_FILE");
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char  line[512];
    *n = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        size_t bytes;
        double t;
        if (line[0] == '#' || *n == TUNE_MAX_SIZES)
            continue;
        if (sscanf(line, " %zu %*s %*s %*s %*s %lf", &bytes, &t) == 2)
            sizes[*n] = bytes, times[(*n)++] = t;
    }
    if (f != NULL)
        fclose(f);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* argv without --tune, with -c 0 (timing only) appended. */
static char **tune_argv(int argc, char **argv)
{
    char **v = calloc((size_t)argc + 3, sizeof(char *));
    int    k = 0;
    if (v == NULL)
        return NULL;
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], "--tune", 6) != 0)
            v[k++] = argv[i];
    v[k++] = "-c";
    v[k++] = "0";
    return v;
}

static int tune_write(const perf_args_t *a, const tune_best_t *best, int nsizes, int ci)
{
    FILE *f = fopen(a->tune_file, "w");
    if (f == NULL) {
        perror(a->tune_file);
        return 1;
    }
    fprintf(f, "# hcomm tuning file, written by hcomm-perf %s --tune on %d ranks\n"
               "# collective nranks min_bytes max_bytes algorithm chunk_bytes\n",
            perf_coll_name(a->coll), a->fork_ranks);
    /* the size column is the whole buffer; selection looks allgather and
     * reduce_scatter up by one rank's block (docs/tuning.md) */
    size_t per = strcmp(tune_cands[ci].coll, "allgather") == 0 ||
                         strcmp(tune_cands[ci].coll, "reduce_scatter") == 0
                     ? (size_t)a->fork_ranks
                     : 1;
    size_t lo  = 0;
    for (int i = 0; i < nsizes; i++) {
        int last = i + 1 == nsizes;
        if (!last && best[i + 1].algo == best[i].algo && best[i + 1].chunk == best[i].chunk)
            continue; /* merged with the next size */
        size_t hi = last ? SIZE_MAX : best[i].bytes / per;
        fprintf(f, "%s %d %zu %zu %s %s\n", tune_cands[ci].coll, a->fork_ranks, lo, hi,
                tune_cands[ci].algos[best[i].algo], tune_chunk_file[best[i].chunk]);
        lo = hi + 1;
    }
    fclose(f);
    return 0;
}

#define TUNE_ROUNDS 3 /* every candidate runs once per round: noise hits all alike */
#define TUNE_MAX_CANDS (TUNE_MAX_ALGOS * TUNE_NCHUNKS)

/* Runs every candidate TUNE_ROUNDS times, interleaved, keeping each one's
 * fastest time per size; returns the number of sizes. */
static int tune_measure(char **v, int ci, double best_t[][TUNE_MAX_SIZES], size_t *sizes)
{
    size_t sz[TUNE_MAX_SIZES];
    double tm[TUNE_MAX_SIZES];
    int    nsizes = 0, n;
    for (int round = 0; round < TUNE_ROUNDS; round++)
        for (int al = 0; al < TUNE_MAX_ALGOS && tune_cands[ci].algos[al] != NULL; al++)
            for (int ch = 0; ch < TUNE_NCHUNKS; ch++) {
                char spec[64];
                snprintf(spec, sizeof(spec), "%s:%s", tune_cands[ci].coll, tune_cands[ci].algos[al]);
                if (tune_run(v, spec, tune_chunks[ch], sz, tm, &n) != 0 || n == 0) {
                    fprintf(stderr, PERF_TAG ": --tune: %s chunk %s failed; skipped\n", spec,
                            tune_chunks[ch]);
                    continue;
                }
                for (int i = 0; i < n; i++) {
                    double *b = &best_t[al * TUNE_NCHUNKS + ch][i];
                    if (round == 0 || *b <= 0 || tm[i] < *b)
                        *b = tm[i];
                    sizes[i] = sz[i];
                }
                nsizes = n > nsizes ? n : nsizes;
            }
    return nsizes;
}

int perf_tune(int argc, char **argv, const perf_args_t *a)
{
    int ci = (int)a->coll;
    if (tune_cands[ci].coll == NULL || getenv("HCOMM_RANK") != NULL) {
        fprintf(stderr, PERF_TAG ": --tune runs alone (it forks the ranks) for all_reduce, "
                                 "all_gather, reduce_scatter, broadcast and reduce\n");
        return 2;
    }
    tune_candidates(ci);
    static double times[TUNE_MAX_CANDS][TUNE_MAX_SIZES];
    size_t        sizes[TUNE_MAX_SIZES];
    tune_best_t   best[TUNE_MAX_SIZES];
    char        **v = tune_argv(argc, argv);
    if (v == NULL)
        return 1;
    int nsizes = tune_measure(v, ci, times, sizes);
    free(v);
    if (nsizes == 0) {
        fprintf(stderr, PERF_TAG ": --tune: no run succeeded\n");
        return 1;
    }
    printf("# fastest of %d interleaved runs, out-of-place time (us)\n# %-14s %6s %12s %12s\n",
           TUNE_ROUNDS, "algorithm", "chunk", "size", "time");
    for (int i = 0; i < nsizes; i++) {
        best[i] = (tune_best_t){sizes[i], 0, -1, 0};
        for (int c = 0; c < TUNE_MAX_CANDS; c++) {
            int al = c / TUNE_NCHUNKS, ch = c % TUNE_NCHUNKS;
            if (al >= TUNE_MAX_ALGOS || tune_cands[ci].algos[al] == NULL || times[c][i] <= 0)
                continue;
            printf("  %-14s %6s %12zu %12.2f\n", tune_cands[ci].algos[al], tune_chunks[ch],
                   sizes[i], times[c][i]);
            if (best[i].algo < 0 || times[c][i] < best[i].time_us)
                best[i] = (tune_best_t){sizes[i], times[c][i], al, ch};
        }
    }
    printf("# best per size\n");
    for (int i = 0; i < nsizes; i++)
        printf("  %12zu %-14s %6s %12.2f\n", best[i].bytes, tune_cands[ci].algos[best[i].algo],
               tune_chunks[best[i].chunk], best[i].time_us);
    int rc = tune_write(a, best, nsizes, ci);
    if (rc == 0)
        printf("# wrote %s: use it with HCOMM_TUNING_FILE=%s\n", a->tune_file, a->tune_file);
    return rc;
}
