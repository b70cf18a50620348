/* unstack_check.c - local ranks started on one CPU: where a CPU of their
 * mask is free, one moves there (transport/shm/shm_cpu.c). With "pin", each
 * rank pins itself to the first CPU of its mask before init and gives its
 * mask back after, so all poll on that CPU in their first calls; with "as-is" it runs as started
 * (under a one-CPU mask hcomm must leave it there). Then CALLS 8-byte allreduces, and each rank
 * prints its CPU, whether its mask is the one it started with (a move must not keep a pin), how
 * many ranks the fullest CPU has, and the time per call over the second half of the calls:
 *   hcomm-run -n N unstack_check pin|as-is CALLS        (N <= 64)
 * Exits 77 for "pin" when the mask has one CPU. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcomm.h"

int main(int argc, char **argv)
{
    cpu_set_t mask, one, after;
    int       pin = argc == 3 && strcmp(argv[1], "pin") == 0, rank, nranks, cpus[64];
    if (argc != 3 || (!pin && strcmp(argv[1], "as-is") != 0)) {
        fprintf(stderr, "usage: unstack_check pin|as-is CALLS\n");
        return 2;
    }
    long         calls = atol(argv[2]);
    float        x     = 1.0f;
    hcomm_comm_t comm;
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0)
        return 3;
    if (pin) {
        if (CPU_COUNT(&mask) < 2) {
            printf("SKIP: this process may use one CPU only\n");
            return 77;
        }
        int first = 0;
        while (!CPU_ISSET(first, &mask))
            first++;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0)
            return 3;
    }
    if (hcomm_comm_init_env(&comm) != HCOMM_SUCCESS ||
        hcomm_comm_rank(comm, &rank) != HCOMM_SUCCESS ||
        hcomm_comm_size(comm, &nranks) != HCOMM_SUCCESS || nranks > 64)
        return 4;
    if (pin && sched_setaffinity(0, sizeof(mask), &mask) != 0)
        return 3;
    struct timespec t0 = {0, 0}, t1;
    for (long i = 0; i < calls; i++) {
        if (i == calls / 2)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        if (hcomm_allreduce(&x, &x, 1, HCOMM_FLOAT32, HCOMM_MAX, comm, NULL) != HCOMM_SUCCESS)
            return 5;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) /
                (double)(calls - calls / 2 > 0 ? calls - calls / 2 : 1);
    int cpu = sched_getcpu();
    if (hcomm_allgather(&cpu, cpus, 1, HCOMM_INT32, comm, NULL) != HCOMM_SUCCESS)
        return 5;
    int kept = sched_getaffinity(0, sizeof(after), &after) == 0 && CPU_EQUAL(&after, &mask);
    int most = 0; /* ranks on the CPU with the most */
    for (int i = 0; i < nranks; i++) {
        int n = 0;
        for (int j = 0; j < nranks; j++)
            n += cpus[j] == cpus[i];
        most = n > most ? n : most;
    }
    printf("unstack_check: rank %d on CPU %d, mask %s; at most %d ranks on one CPU; %.2f us per "
           "call\n",
           rank, cpus[rank], kept ? "kept" : "changed", most, us);
    hcomm_comm_destroy(comm);
    return kept ? 0 : 1;
}
