/* shrink_fail.c - hcomm_comm_shrink on a communicator that failed: the
 * survivors agree over the watch channel and get a working communicator
 * without the dead. Run under hcomm-run -n N (N >= 3):
 *   shrink_fail coll|stream|agree|late|tardy VICTIM
 * VICTIM is killed (SIGKILL, by a child of its own) 200 ms into a loop of 4
 * MiB allreduces, blocking (coll) or on a stream (stream). In agree, rank 0
 * (the first the survivors ask to coordinate) dies too, 300 ms after its
 * own operation failed, while the others wait in the agreement; they list
 * no one as excluded and must find both dead. In late, VICTIM revokes the
 * communicator and stays alive without ever shrinking, and rank 0 (the
 * coordinator) enters the agreement 0.5 s after the others: it waits its
 * timeout (4 s here) for VICTIM, and the others must still be there to take
 * its decision. In tardy (timeout 3 s), rank 1 enters the agreement 6 s late,
 * after the others decided without it and aborted the failed communicator
 * (keeping the new one): its shrink must fail, not coordinate alone (it
 * found every lower rank gone, and made itself a communicator of one). It
 * prints "shrink_fail: rank 1: left out: STATUS". Each survivor prints
 *   shrink_fail: rank R: now rank r of n, sum right, ready T ms after the kill
 * and exits 0 when the new communicator's allreduce is right. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"
#include "hcomm_stream.h"

#define COUNT (1 << 20) /* 4 MiB of float32 */

static double realtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A child that kills its parent after ms, and prints when. */
static void die_in(int ms)
{
    pid_t parent = getpid();
    if (fork() != 0)
        return;
    usleep((useconds_t)ms * 1000);
    printf("shrink_fail: killed at %.6f\n", realtime());
    fflush(stdout);
    kill(parent, SIGKILL);
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: shrink_fail coll|stream|agree|late|tardy VICTIM\n");
        return 2;
    }
    const char    *mode   = argv[1];
    int            victim = atoi(argv[2]), stream = strcmp(mode, "stream") == 0;
    int            agree = strcmp(mode, "agree") == 0, late = strcmp(mode, "late") == 0;
    int            tardy = strcmp(mode, "tardy") == 0;
    int            rank, nranks;
    hcomm_comm_t   comm, nc = NULL;
    hcomm_stream_t s = NULL;
    float         *x = calloc(COUNT, sizeof(float));
    if (x == NULL || hcomm_comm_init_env(&comm) != HCOMM_SUCCESS || hcomm_comm_rank(comm, &rank) ||
        hcomm_comm_size(comm, &nranks) ||
        hcomm_comm_set_timeout(comm, late    ? 4
                                     : tardy ? 3
                                             : 30) ||
        (stream && hcomm_stream_create(&s)))
        return 3;
    if (rank == victim && late) { /* alive, never in the agreement */
        usleep(200000);
        hcomm_comm_revoke(comm);
        sleep(12);
        hcomm_comm_abort(comm);
        return 0;
    }
    if (rank == victim)
        die_in(200);
    hcomm_status_t st = HCOMM_SUCCESS;
    for (int i = 0; i < 100000 && st == HCOMM_SUCCESS; i++) {
        st = hcomm_allreduce(x, x, COUNT, HCOMM_FLOAT32, HCOMM_SUM, comm, s);
        if (stream && st == HCOMM_SUCCESS)
            st = hcomm_stream_synchronize(s);
    }
    if (rank == victim) /* its operations cannot all succeed while it is killed */
        pause();
    if (agree && rank == 0) {
        usleep(300000);
        raise(SIGKILL);
    }
    if (late && rank == 0)
        usleep(500000);
    if (tardy && rank == 1)
        sleep(6);
    int excl[1] = {victim}, nexcl = agree || late || tardy ? 0 : 1;
    st = hcomm_comm_shrink(comm, excl, nexcl, &nc);
    if (tardy && rank == 1) {
        printf("shrink_fail: rank 1: %s: %s\n", st == HCOMM_SUCCESS ? "JOINED LATE" : "left out",
               hcomm_status_str(st));
        return st == HCOMM_SUCCESS;
    }
    if (st != HCOMM_SUCCESS) {
        printf("shrink_fail: rank %d: shrink failed: %s\n", rank, hcomm_status_str(st));
        return 1;
    }
    int nrank, nsize;
    hcomm_comm_rank(nc, &nrank);
    hcomm_comm_size(nc, &nsize);
    float v = (float)(nrank + 1), want = (float)(nsize * (nsize + 1) / 2);
    st        = hcomm_allreduce(&v, &v, 1, HCOMM_FLOAT32, HCOMM_SUM, nc, NULL);
    double t  = realtime();
    int    ok = st == HCOMM_SUCCESS && v == want && nsize == nranks - 1 - agree - tardy;
    printf("shrink_fail: rank %d: now rank %d of %d, sum %s, ready at %.6f\n", rank, nrank, nsize,
           ok ? "right" : "WRONG", t);
    fflush(stdout);
    if (tardy) { /* the failed one goes; the new one lives on while rank 1 asks */
        hcomm_comm_abort(comm);
        comm = NULL;
        sleep(8);
    }
    hcomm_comm_destroy(nc);
    if (s != NULL)
        hcomm_stream_destroy(s);
    if (comm != NULL)
        hcomm_comm_abort(comm);
    free(x);
    return ok ? 0 : 1;
}
