/* late_peer.c - hcomm_comm_set_timeout bounds every wait of a communicator,
 * the connection its transports make on first use included. Run under
 * hcomm-run -n 2: each rank sets the timeout to SET seconds after init; rank
 * LATE_RANK sleeps LATE seconds before its first allreduce (LATE < 0: never
 * calls it), and the other must see EXPECT ("ok", or "timeout": failed within
 * SET + 5 s). EXPECT "gone": LATE_RANK aborts its communicator at once and
 * lives on for LATE seconds; the other, starting 0.5 s later, must fail within
 * 4.5 s, long before SET.
 * Which rank is late matters: tcp's higher rank waits for the lower one's
 * dial, shm's opener for its creator.
 * run_late_peer.sh runs it with HCOMM_TIMEOUT far from SET both ways. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: late_peer SET LATE_RANK LATE ok|timeout|gone\n");
        return 2;
    }
    double       set = atof(argv[1]), late = atof(argv[3]);
    int          late_rank = atoi(argv[2]), want_ok = strcmp(argv[4], "ok") == 0;
    int          gone = strcmp(argv[4], "gone") == 0;
    hcomm_comm_t comm;
    int          rank;
    float        x[1024];
    if (hcomm_comm_init_env(&comm) != HCOMM_SUCCESS || hcomm_comm_rank(comm, &rank) != HCOMM_SUCCESS)
        return 3;
    if (hcomm_comm_set_timeout(comm, set) != HCOMM_SUCCESS)
        return 4;
    for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
        x[i] = (float)rank;
    if (rank == late_rank && gone) { /* its process stays while the other waits */
        hcomm_comm_abort(comm);
        usleep((useconds_t)(late * 1e6));
        return 0;
    }
    if (gone) /* starts after the abort: nothing of the pair exists yet to mark closed */
        usleep(500000);
    if (rank == late_rank && late != 0)
        usleep((useconds_t)((late < 0 ? set + 3 : late) * 1e6));
    if (rank == late_rank && late < 0) {
        hcomm_comm_abort(comm);
        return 0;
    }
    double         t0 = now();
    hcomm_status_t st = hcomm_allreduce(x, x, 1024, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL);
    double         waited = now() - t0;
    printf("late_peer: rank %d: %s after %.2f s\n", rank, hcomm_status_str(st), waited);
    int good = want_ok ? st == HCOMM_SUCCESS && x[0] == 1.0f
               : gone  ? st != HCOMM_SUCCESS && waited < 4.5
                       : rank == late_rank || (st != HCOMM_SUCCESS && waited < set + 5);
    if (st == HCOMM_SUCCESS)
        hcomm_comm_destroy(comm);
    else
        hcomm_comm_abort(comm);
    return good ? 0 : 1;
}
