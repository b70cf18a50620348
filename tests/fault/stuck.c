/* stuck.c - one rank does not reach a collective; the others' errors must
 * name it. Run under hcomm-run -n N: every rank sets the communicator's
 * timeout to SET seconds, runs 5 allreduces and a broadcast (#1-#6), then
 * allreduce #7, except rank STUCK, which first
 *   sleep: sleeps SET + 3 s (its watch thread still answers: "is at #6"),
 *   stop:  stops itself with SIGSTOP (nothing answers: "does not answer");
 *          a child of its own sends SIGCONT SET + 4 s later;
 *   silent: stops, and its listeners drop new SYNs (silent_host.h: a host
 *          gone); the others start #7 once they do (args: ... SET DIR), and
 *          stay 1 s after theirs failed (each verdict sees them waiting).
 * The others must fail #7 with HCOMM_ERR_TIMEOUT within SET + 5 s; the warn
 * line that names the rank is checked by run_stuck.sh, which also merges the
 * flight recorder files (HCOMM_TRACE_DIR) with tools/hcomm-trace. With
 * "dump" as a last argument every rank calls hcomm_comm_dump_state after #6. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"
#include "silent_host.h"

#define N 1024

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The stuck rank's misstep before #7. */
static void misstep(const char *mode, double set, const char *argv0, const char *dir, int nranks)
{
    if (strcmp(mode, "sleep") == 0) { /* through signals (the dump signal's) */
        for (double end = now() + set + 3; now() < end;)
            usleep(100000);
        return;
    }
    if (strcmp(mode, "silent") == 0) {
        silent_host_go(argv0, dir, nranks - 1);
        return;
    }
    pid_t self = getpid();
    if (fork() == 0) {
        usleep((useconds_t)((set + 4) * 1e6));
        kill(self, SIGCONT);
        _exit(0);
    }
    raise(SIGSTOP);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "fill") == 0)
        return silent_host_fill(argc, argv);
    if (argc < 4 || (strcmp(argv[1], "silent") == 0 && argc < 5)) {
        fprintf(stderr,
                "usage: stuck sleep|stop STUCK_RANK SET [dump] | silent STUCK_RANK SET DIR\n");
        return 2;
    }
    const char  *mode = argv[1], *dir = argc > 4 ? argv[4] : "";
    int          silent = strcmp(mode, "silent") == 0, nranks;
    int          stuck = atoi(argv[2]), dump = argc > 4 && strcmp(argv[4], "dump") == 0;
    double       set = atof(argv[3]);
    hcomm_comm_t comm;
    int          rank;
    static float x[N];
    if (hcomm_comm_init_env(&comm) != HCOMM_SUCCESS ||
        hcomm_comm_rank(comm, &rank) != HCOMM_SUCCESS ||
        hcomm_comm_size(comm, &nranks) != HCOMM_SUCCESS)
        return 3;
    if (hcomm_comm_set_timeout(comm, set) != HCOMM_SUCCESS)
        return 4;
    for (int i = 0; i < 5; i++)
        if (hcomm_allreduce(x, x, N, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL) != HCOMM_SUCCESS)
            return 5;
    if (hcomm_broadcast(x, x, 16, HCOMM_FLOAT32, 0, comm, NULL) != HCOMM_SUCCESS)
        return 6;
    if (dump && hcomm_comm_dump_state(comm) != HCOMM_SUCCESS)
        return 7;
    printf("stuck: rank %d is pid %d\n", rank, (int)getpid()); /* for the dump signal */
    fflush(stdout);
    if (rank == stuck)
        misstep(mode, set, argv[0], dir, nranks);
    if (rank == stuck && silent) { /* continued once the others are done */
        hcomm_comm_abort(comm);
        return 0;
    }
    if (silent && !silent_host_wait_filled(dir, 20))
        return 8;
    double         t0     = now();
    hcomm_status_t st     = hcomm_allreduce(x, x, N, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL);
    double         waited = now() - t0;
    printf("stuck: rank %d: %s after %.2f s\n", rank, hcomm_status_str(st), waited);
    fflush(stdout);
    int good = rank == stuck || (st == HCOMM_ERR_TIMEOUT && waited < set + 5);
    /* the other waiting ranks time out on their own, not on this one leaving
     * (one that began waiting some ms later, under ASan, saw it leave first) */
    if (rank != stuck)
        usleep(1000000);
    if (silent && rank != stuck)
        silent_host_done(dir, rank);
    hcomm_comm_abort(comm);
    return good ? 0 : 1;
}
