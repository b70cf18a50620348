/*
 * bench_ops.c - what recording an operation costs (core/ops.h): its number,
 * its stamps at issue, start and end and its record in the ring, as issue,
 * the executor and the queue make them, on a communicator of no transport,
 * in one thread. Prints ns per operation (the best of 7 runs of OPS): the
 * loop without the records (the executor's own coarse clock reading only),
 * with records and nothing on, with a trace file (HCOMM_TRACE_FILE, into a
 * scratch directory) and with a profiler of empty callbacks.
 *   make perf/bench_ops && perf/bench_ops [OPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/params.h"
#include "core/ops.h"
#include "hcomm_profiler.h"

static void nop_start(void *u, const hcomm_prof_op_t *op, void **d)
{
    (void)u, (void)op, (void)d;
}

static void nop_end(void *u, const hcomm_prof_op_t *op, void *d)
{
    (void)u, (void)op, (void)d;
}

/* ns per operation, the best of 7 runs of n; bare: without the records */
static double run(struct hcomm_comm *c, hcomm_request_t req, long n, int bare)
{
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        uint64_t t0 = hc_clock_now_ns();
        for (long i = 0; i < n; i++) {
            uint64_t coarse = hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE); /* the executor's */
            c->ops_coarse   = coarse;
            c->bytes_sent += 8;
            req->status = HCOMM_SUCCESS;
            if (bare) {
                __asm__ __volatile__("" ::: "memory");
                continue;
            }
            hc_ops_issue(c, req, 1); /* a blocking call: it starts at once */
            hc_ops_start(req, coarse);
            hc_ops_end(c, req);
        }
        double ns = (double)(hc_clock_now_ns() - t0) / (double)n;
        best      = ns < best ? ns : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    long                 n     = argc > 1 ? atol(argv[1]) : 1000000;
    char                 dir[] = "/tmp/bench_ops.XXXXXX", path[64];
    struct hcomm_comm    comm  = {.rank = 0, .nranks = 2};
    hc_sched_t           sched = {.nsteps = 3,
                                  .algo   = HC_ALGO_RD,
                                  .coll   = HC_COLL_ALLREDUCE,
                                  .dtype  = HCOMM_FLOAT32,
                                  .peer   = -1,
                                  .count  = 2,
                                  .bytes  = 8};
    struct hcomm_request req   = {.comm = &comm, .sched = &sched};

    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(path, sizeof(path), "%s/t.json", dir);
    setenv("HCOMM_TRACE_FILE", path, 1);
    if (hc_ops_init(&comm) != HCOMM_SUCCESS)
        return 1;
    printf("bare:     %.1f ns per operation\n", run(&comm, &req, n, 1));
    printf("off:      %.1f ns per operation\n", run(&comm, &req, n, 0));
    hc_trace_open(&comm);
    if (comm.trace == NULL)
        return 1;
    printf("trace:    %.1f ns per operation\n", run(&comm, &req, n, 0));
    hc_trace_close(&comm);
    hcomm_profiler_t p = {nop_start, nop_end, NULL};
    int              id;
    hcomm_profiler_register(&p, &id);
    printf("profiler: %.1f ns per operation\n", run(&comm, &req, n, 0));
    hcomm_profiler_unregister(id);
    hc_ops_fini(&comm);
    snprintf(path, sizeof(path), "%s/t.0.json", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}
