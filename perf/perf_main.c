/*
 * perf_main.c - hcomm-perf's process model: ranks launched by hcomm-run or any
 * launcher hcomm_comm_init_env knows (docs/launchers.md), by Open MPI's mpirun
 * (MPI bootstraps, when built with it), or forked here when started alone.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#include "../tools/launch.h"
#include "perf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HCOMM_PERF_HAVE_MPI
#include "hcomm_mpi.h"
#include <mpi.h>
#endif

/* Runs the benchmark on an initialized communicator and destroys it. */
static int run_rank(const perf_args_t *a, hcomm_comm_t comm)
{
    perf_ctx_t     ctx = {.args = a, .comm = comm};
    hcomm_status_t st;
    int            rc;

    st = hcomm_comm_rank(comm, &ctx.rank);
    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_size(comm, &ctx.nranks);
    if (st != HCOMM_SUCCESS)
        return perf_fail(&ctx, "hcomm_comm_rank/size", st);
    rc = perf_bench_run(&ctx);
    if (ctx.comm != NULL) {
        st = hcomm_comm_destroy(ctx.comm);
        if (st != HCOMM_SUCCESS) {
            fprintf(stderr, PERF_TAG ": rank %d: hcomm_comm_destroy failed: %s\n", ctx.rank,
                    hcomm_status_str(st));
            rc = rc ? rc : 1;
        }
    }
    return rc;
}

static int run_env(const perf_args_t *a)
{
    hcomm_comm_t   comm;
    hcomm_status_t st   = hcomm_comm_init_env(&comm);
    const char    *rank = getenv("HCOMM_RANK");

    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, PERF_TAG ": rank %s: hcomm_comm_init_env failed: %s\n", rank ? rank : "?",
                hcomm_status_str(st));
        return 1;
    }
    return run_rank(a, comm);
}

#ifdef HCOMM_PERF_HAVE_MPI
/* MPI only bootstraps the communicator; hcomm moves all the data. */
static int run_mpi(const perf_args_t *a, int *argc, char ***argv)
{
    hcomm_comm_t   comm;
    hcomm_status_t st;
    int            rc, rank = -1;

    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, PERF_TAG ": MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    st = hcomm_comm_init_mpi(&comm, MPI_COMM_WORLD);
    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, PERF_TAG ": rank %d: hcomm_comm_init_mpi failed: %s\n", rank,
                hcomm_status_str(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    rc = run_rank(a, comm);
    MPI_Finalize();
    return rc;
}
#endif

static int fork_child(const perf_args_t *a, const hcomm_unique_id_t *id, int rank)
{
    hcomm_comm_t   comm;
    hcomm_status_t st = hcomm_comm_init(&comm, a->fork_ranks, id, rank);

    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, PERF_TAG ": rank %d: hcomm_comm_init failed: %s\n", rank,
                hcomm_status_str(st));
        return 1;
    }
    return run_rank(a, comm);
}

/* Alone: the parent holds the rendezvous root (hcomm_get_unique_id) and forks
 * the ranks, then reaps them like hcomm-run. */
static int run_fork(const perf_args_t *a)
{
    hcomm_unique_id_t id;
    sigset_t          oldmask;
    pid_t            *pids;
    hcomm_status_t    st = hcomm_get_unique_id(&id);
    int               rc;

    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, PERF_TAG ": hcomm_get_unique_id failed: %s\n", hcomm_status_str(st));
        return 1;
    }
    pids = calloc((size_t)a->fork_ranks, sizeof(*pids));
    if (pids == NULL || launch_block_signals(&oldmask) != 0) {
        fprintf(stderr, PERF_TAG ": %s\n", pids ? strerror(errno) : "out of memory");
        free(pids);
        return 1;
    }
    fflush(NULL);
    for (int r = 0; r < a->fork_ranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            launch_child_restore(&oldmask);
            rc = fork_child(a, &id, r);
            fflush(NULL);
            _exit(rc); /* not exit(): the parent's threads do not exist here */
        }
        if (pids[r] < 0) {
            fprintf(stderr, PERF_TAG ": fork of rank %d: %s\n", r, strerror(errno));
            launch_abort(pids, r, PERF_TAG);
            free(pids);
            return 1;
        }
    }
    rc = launch_wait(pids, a->fork_ranks, 0, PERF_TAG, 0);
    free(pids);
    return rc;
}

/* Whether a launcher started this process: the sets of variables
 * hcomm_comm_init_env looks for (src/bootstrap/launcher.c), any one whole. */
static int launched(void)
{
    static const char *const sets[][5] = {
        {"PMIX_RANK", "PMIX_NAMESPACE"},
        {"PMI_RANK", "PMI_SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID"},
        {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    };
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        int all = 1;
        for (size_t j = 0; j < 5 && sets[i][j] != NULL; j++)
            all = all && getenv(sets[i][j]) != NULL;
        if (all)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    perf_args_t a;
    int         done, rc = perf_args_parse(argc, argv, &a, &done);

    if (rc != 0 || done)
        return rc;
    if (a.tune_file != NULL)
        return perf_tune(argc, argv, &a);
    int alone =
        getenv("HCOMM_RANK") == NULL && getenv("OMPI_COMM_WORLD_SIZE") == NULL && !launched();
    if (!alone && a.per_proc > 1) {
        fprintf(stderr, PERF_TAG ": under a launcher each process is one rank: -t and -g 1\n");
        return 2;
    }
    if (getenv("HCOMM_RANK") != NULL)
        return run_env(&a);
#ifdef HCOMM_PERF_HAVE_MPI
    /* the MPI linked here is Open MPI's: under another MPI's mpirun its
     * MPI_Init would make each rank a world of one */
    if (getenv("OMPI_COMM_WORLD_SIZE") != NULL)
        return run_mpi(&a, &argc, &argv);
#endif
    if (launched())
        return run_env(&a);
    return run_fork(&a);
}
