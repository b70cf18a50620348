/* slow_link.c - a rank whose link is slowed (tc tbf, run_slow_link.sh) is
 * named by rank 0's slow-link test; on even links no one is. Run one rank
 * per network namespace (N >= 3):
 *   slow_link STEPS BYTES SLOW_SRC
 * Each step allreduces BYTES of floats. Rank 0 reads hcomm_comm_get_health
 * after every step and prints
 *   slow_link: named S->D (...)... first at step K; J links judged
 * (or "named none"), and exits 0 when that is what SLOW_SRC (-1: none)
 * says. None: no link named at the end (a flag still up after the last step
 * gets up to SETTLE more to clear), and links named in one run of steps at
 * most (the accuracy bound of docs/resilience.md: a clean trial flags no one
 * more than once; a noisy machine slows a link for a moment). Otherwise:
 * some step named a link from SLOW_SRC, and every link named, at any
 * step, sends from or to SLOW_SRC (the first that does neither is printed
 * as "slow_link: step K named S->D"): the links into a node whose outgoing
 * link is slowed are slower too, their acknowledgements queued behind its
 * data, and may read below half the median (seen: 0.41x). The last step
 * need not name it: once the slow link paces the whole ring (a CPU-bound
 * run, sanitizers), the median falls to its rate and rank 0 rightly clears
 * it. */
#include <stdio.h>
#include <stdlib.h>

#include "hcomm.h"

#define SETTLE 50 /* steps: 2 s at 300 Mbit/s, 10 judgements at 0.2 s */

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: slow_link STEPS BYTES SLOW_SRC\n");
        return 2;
    }
    int steps = atoi(argv[1]), slow = atoi(argv[3]), rank, first = -1, wrong = 0,
        from = 0,             /* some step named a link from SLOW_SRC */
        runs = 0, before = 0; /* runs of steps that named links */
    size_t         count = (size_t)atol(argv[2]) / sizeof(float);
    float         *x     = calloc(count ? count : 1, sizeof(float));
    hcomm_comm_t   comm;
    hcomm_health_t h = {0};
    if (x == NULL || hcomm_comm_init_env(&comm) != HCOMM_SUCCESS ||
        hcomm_comm_rank(comm, &rank) != HCOMM_SUCCESS)
        return 3;
    for (int s = 1; s <= steps; s++) {
        if (hcomm_allreduce(x, x, count, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL) != HCOMM_SUCCESS)
            return 4;
        if (rank != 0 || hcomm_comm_get_health(comm, &h) != HCOMM_SUCCESS)
            continue;
        for (int i = 0; i < h.nslow_links; i++) {
            from |= h.slow_link_src[i] == slow;
            if (h.slow_link_src[i] != slow && h.slow_link_dst[i] != slow && !wrong) {
                wrong = 1;
                printf("slow_link: step %d named %d->%d\n", s, h.slow_link_src[i],
                       h.slow_link_dst[i]);
            }
        }
        if (h.nslow_links > 0 && first < 0)
            first = s;
        runs += h.nslow_links > 0 && !before;
        before = h.nslow_links > 0;
    }
    /* even links: a flag raised in the last steps (a noisy moment) has had no
     * time to clear; while rank 0 names one, up to SETTLE more steps */
    for (int s = steps + 1; slow < 0 && s <= steps + SETTLE; s++) {
        int named = rank == 0 && h.nslow_links > 0;
        if (hcomm_broadcast(&named, &named, 1, HCOMM_INT32, 0, comm, NULL) != HCOMM_SUCCESS)
            return 4;
        if (!named)
            break;
        if (hcomm_allreduce(x, x, count, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL) != HCOMM_SUCCESS)
            return 4;
        if (rank == 0 && hcomm_comm_get_health(comm, &h) != HCOMM_SUCCESS)
            return 5;
    }
    int good = 1;
    if (rank == 0) {
        char line[1024];
        int  len = snprintf(line, sizeof(line), "slow_link: named");
        for (int i = 0; i < h.nslow_links && len < (int)sizeof(line); i++)
            len += snprintf(line + len, sizeof(line) - (size_t)len,
                            " %d->%d (%.1f MB/s, median %.1f MB/s, score %.2f)",
                            h.slow_link_src[i], h.slow_link_dst[i], h.slow_link_gbps[i] * 1e3,
                            h.slow_link_median_gbps[i] * 1e3, h.slow_link_score[i]);
        if (len < (int)sizeof(line) && first < 0)
            snprintf(line + len, sizeof(line) - (size_t)len, " none; %d links judged\n", h.nlinks);
        else if (len < (int)sizeof(line))
            snprintf(line + len, sizeof(line) - (size_t)len,
                     "%s first at step %d, in %d run(s) of steps; %d links judged\n",
                     h.nslow_links == 0 ? " none at the end, some" : "", first, runs, h.nlinks);
        fputs(line, stdout);
        good = slow < 0 ? h.nslow_links == 0 && runs <= 1 : from && !wrong;
    }
    hcomm_comm_destroy(comm);
    free(x);
    return good ? 0 : 1;
}
