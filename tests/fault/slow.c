/* slow.c - a rank slowed by a SIGSTOP/SIGCONT duty cycle is named slow by
 * rank 0; a clean run names no one. Run under hcomm-run -n N (N >= 3):
 *   slow STEPS COMPUTE_MS SLOW_RANK FACTOR
 * Each step "computes" for COMPUTE_MS (1 ms sleeps, so that a stop delays
 * it) and allreduces 4 KiB. SLOW_RANK (-1: none) gets a child that stops it
 * for (1 - 1/FACTOR) of every 50 ms, so it runs FACTOR times slower. Rank 0
 * reads hcomm_comm_get_health after every step and prints
 *   slow: named R... first at step S
 * (or "slow: named none"), and exits 0 when that is what SLOW_RANK says. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hcomm.h"

#define N 1024
#define PERIOD_US 50000

/* The child that slows its parent down; it ends with the parent. */
static void duty_cycle(double factor)
{
    pid_t parent = getpid();
    if (fork() != 0)
        return;
    useconds_t stop = (useconds_t)(PERIOD_US * (1 - 1 / factor));
    while (getppid() == parent) {
        usleep(PERIOD_US - stop);
        kill(parent, SIGSTOP);
        usleep(stop);
        kill(parent, SIGCONT);
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: slow STEPS COMPUTE_MS SLOW_RANK FACTOR\n");
        return 2;
    }
    int            steps = atoi(argv[1]), compute = atoi(argv[2]), slow = atoi(argv[3]);
    double         factor = atof(argv[4]);
    hcomm_comm_t   comm;
    hcomm_health_t h = {0};
    int            rank, first = -1;
    static float   x[N];
    if (hcomm_comm_init_env(&comm) != HCOMM_SUCCESS ||
        hcomm_comm_rank(comm, &rank) != HCOMM_SUCCESS)
        return 3;
    if (rank == slow && factor > 1)
        duty_cycle(factor);
    for (int s = 1; s <= steps; s++) {
        for (int i = 0; i < compute; i++)
            usleep(1000);
        if (hcomm_allreduce(x, x, N, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL) != HCOMM_SUCCESS)
            return 4;
        if (rank == 0 && hcomm_comm_get_health(comm, &h) == HCOMM_SUCCESS && h.nslow > 0 &&
            first < 0)
            first = s;
    }
    int good = 1;
    if (rank == 0) {
        hcomm_comm_get_health(comm, &h);
        printf("slow: named");
        for (int i = 0; i < h.nslow; i++)
            printf(" %d (%.1f ms late, score %.2f)", h.slow_rank[i], h.slow_late_ms[i],
                   h.slow_score[i]);
        printf(h.nslow == 0 && first < 0 ? " none" : " first at step %d", first);
        printf("; last window #%llu-#%llu, %.1f ms between collectives\n",
               (unsigned long long)h.window_first, (unsigned long long)h.window_last,
               h.interval_ms);
        good = slow < 0 ? first < 0 : h.nslow == 1 && h.slow_rank[0] == slow;
    }
    hcomm_comm_destroy(comm);
    return good ? 0 : 1;
}
