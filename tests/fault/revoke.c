/* revoke.c - hcomm_comm_revoke ends every pending and blocked call on every
 * rank, in every thread. Run under hcomm-run -n N (N >= 3): the last rank
 * never joins; each other rank queues an allreduce on a stream (run by the
 * stream's thread) and then blocks in another allreduce on its own thread.
 * After 1 s the last rank revokes the communicator ("revoke rank"), or a
 * thread of rank 0's own does while the last rank just waits ("revoke
 * thread"). Both calls on every other rank must end with HCOMM_ERR_REVOKED
 * within 3 s of the start (the timeout is 60 s), and so must a later call and
 * hcomm_comm_get_error. Prints "revoke: rank R: OK after S s" or what went
 * wrong.
 * "revoke silent DIR": rank 1 plays a host gone (silent_host.h: stopped, its
 * listeners drop new SYNs); ranks but the last block in an allreduce
 * (timeout 10 s); once rank 1 is silent the last rank revokes. The revoke
 * must reach the others all the same: their allreduce ends revoked within
 * 1.5 s of it ("revoke: rank R: OK, revoked S s after the revoke"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"
#include "hcomm_stream.h"
#include "silent_host.h"

#define N (1 << 16)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *revoker(void *arg)
{
    usleep(1000000);
    hcomm_status_t st = hcomm_comm_revoke(arg);
    printf("revoke: a thread of rank 0 revoked (%s)\n", hcomm_status_str(st));
    fflush(stdout);
    return NULL;
}

/* The revoke time, that the revoker wrote to DIR/revoked, or 0. */
static double revoked_at(const char *dir)
{
    char   path[512];
    double t = 0;
    snprintf(path, sizeof(path), "%s/revoked", dir);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &t) != 1)
            t = 0;
        fclose(f);
    }
    return t;
}

static int silent_main(hcomm_comm_t comm, int rank, int nranks, const char *argv0, const char *dir)
{
    static float a[N];
    char         path[512], tmp[520];
    if (rank == 1) { /* continued once the others are done */
        silent_host_go(argv0, dir, nranks - 1);
        hcomm_comm_abort(comm);
        return 0;
    }
    if (rank == nranks - 1) {
        if (!silent_host_wait_filled(dir, 20)) {
            printf("revoke: rank %d: rank 1 did not go silent\n", rank);
            silent_host_done(dir, rank);
            return 1;
        }
        snprintf(path, sizeof(path), "%s/revoked", dir);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE  *f = fopen(tmp, "w");
        double t = now();
        if (f == NULL || fprintf(f, "%.6f\n", t) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
            return 6;
        hcomm_status_t st = hcomm_comm_revoke(comm);
        printf("revoke: rank %d: revoked (%s) in %.2f s\n", rank, hcomm_status_str(st), now() - t);
        silent_host_done(dir, rank);
        hcomm_comm_abort(comm);
        return st == HCOMM_SUCCESS ? 0 : 1;
    }
    hcomm_status_t st = hcomm_allreduce(a, a, N, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL);
    double         t1 = now(), t0 = revoked_at(dir);
    int            ok = st == HCOMM_ERR_REVOKED && t0 > 0 && t1 - t0 < 1.5;
    printf("revoke: rank %d: %s, %s %.2f s after the revoke\n", rank, ok ? "OK" : "FAILED",
           hcomm_status_str(st), t0 > 0 ? t1 - t0 : -1.0);
    silent_host_done(dir, rank);
    hcomm_comm_abort(comm);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "fill") == 0)
        return silent_host_fill(argc, argv);
    int            by_thread = argc > 1 && strcmp(argv[1], "thread") == 0;
    pthread_t      t;
    hcomm_comm_t   comm;
    hcomm_stream_t s;
    int            rank, nranks;
    static float   a[N], b[N];
    if (hcomm_comm_init_env(&comm) != HCOMM_SUCCESS || hcomm_comm_rank(comm, &rank) ||
        hcomm_comm_size(comm, &nranks) || hcomm_comm_set_timeout(comm, 60))
        return 3;
    if (argc > 2 && strcmp(argv[1], "silent") == 0)
        return hcomm_comm_set_timeout(comm, 10) ? 3
                                                : silent_main(comm, rank, nranks, argv[0], argv[2]);
    double t0 = now();
    if (rank == nranks - 1 && by_thread) { /* never joins; told by rank 0 */
        usleep(3000000);
        int ok = hcomm_comm_get_error(comm) == HCOMM_ERR_REVOKED;
        printf("revoke: rank %d: %s\n", rank, ok ? "told" : "NOT told");
        hcomm_comm_abort(comm);
        return ok ? 0 : 1;
    }
    if (rank == nranks - 1) { /* the one that never joins: it revokes */
        usleep(1000000);
        hcomm_status_t st = hcomm_comm_revoke(comm);
        printf("revoke: rank %d: revoked (%s)\n", rank, hcomm_status_str(st));
        int ok = st == HCOMM_SUCCESS && hcomm_comm_get_error(comm) == HCOMM_ERR_REVOKED;
        hcomm_comm_abort(comm);
        return ok ? 0 : 1;
    }
    if (hcomm_stream_create(&s) != HCOMM_SUCCESS)
        return 4;
    if (by_thread && rank == 0 && pthread_create(&t, NULL, revoker, comm) != 0)
        return 5;
    hcomm_status_t qs = hcomm_allreduce(b, b, N, HCOMM_FLOAT32, HCOMM_SUM, comm, s);
    hcomm_status_t bs = hcomm_allreduce(a, a, N, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL);
    double         t1 = now() - t0;
    hcomm_status_t ss = hcomm_stream_synchronize(s);
    double         t2 = now() - t0;
    hcomm_status_t ns = hcomm_allreduce(a, a, 1, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL);
    hcomm_status_t es = hcomm_comm_get_error(comm);
    int            ok = qs == HCOMM_SUCCESS && bs == HCOMM_ERR_REVOKED && ss == HCOMM_ERR_REVOKED &&
             ns == HCOMM_ERR_REVOKED && es == HCOMM_ERR_REVOKED && t1 < 3 && t2 < 3;
    printf("revoke: rank %d: %s after %.2f s (blocked call: %s; stream: %s after %.2f s; "
           "later call: %s; get_error: %s)\n",
           rank, ok ? "OK" : "FAILED", t1, hcomm_status_str(bs), hcomm_status_str(ss), t2,
           hcomm_status_str(ns), hcomm_status_str(es));
    /* the revoking thread may still be telling the peers: abort waits for it */
    hcomm_stream_destroy(s);
    hcomm_comm_abort(comm);
    if (by_thread && rank == 0)
        pthread_join(t, NULL);
    return ok ? 0 : 1;
}
