/* nccl_check_comm.c - nccl_check's communicators and errors: split, shrink
 * (and after a rank died), revoke, failed calls in groups, hcomm calls on the
 * communicator behind an NCCL one (hcomm_nccl.h), and argument errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_check.h"

void check_split(ncclComm_t comm)
{
    ncclComm_t sub   = NULL;
    int        color = rank % 2, count = 0, srank = -1, v = rank, sum = 0;
    NCCLOK(ncclCommSplit(comm, color, -rank, &sub, NULL));
    if (sub == NULL)
        return;
    int want = (nranks - color + 1) / 2;
    NCCLOK(ncclCommCount(sub, &count));
    NCCLOK(ncclCommUserRank(sub, &srank));
    CHECK(count == want, "split size %d != %d", count, want);
    CHECK(srank == want - 1 - rank / 2, "split rank %d: keys order reversed", srank);
    NCCLOK(ncclAllReduce(&v, &sum, 1, ncclInt, ncclSum, sub, NULL));
    int ref = 0;
    for (int r = color; r < nranks; r += 2)
        ref += r;
    CHECK(sum == ref, "split allreduce %d != %d", sum, ref);
    ncclComm_t none = (ncclComm_t)&sum;
    NCCLOK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &none, NULL));
    CHECK((rank == 0) == (none == NULL), "NOCOLOR split gave %p", (void *)none);
    NCCLOK(ncclCommDestroy(none));
    NCCLOK(ncclCommDestroy(sub));
}

/* Runs an allreduce of the old ranks on the shrunk communicator sub, which
 * lacks the ranks in ex[0..nex). */
static void check_shrunk(ncclComm_t sub, const int *ex, int nex)
{
    int count = 0, srank = -1, below = 0, v = rank, sum = -1, ref = 0;
    for (int i = 0; i < nex; i++)
        below += ex[i] < rank;
    NCCLOK(ncclCommCount(sub, &count));
    NCCLOK(ncclCommUserRank(sub, &srank));
    CHECK(count == nranks - nex && srank == rank - below, "shrunk to %d ranks, rank %d", count,
          srank);
    NCCLOK(ncclAllReduce(&v, &sum, 1, ncclInt, ncclSum, sub, NULL));
    for (int r = 0; r < nranks; r++)
        ref += r;
    for (int i = 0; i < nex; i++)
        ref -= ex[i];
    CHECK(sum == ref, "shrunk allreduce %d != %d", sum, ref);
}

/* Shrink by nothing (everyone calls), then without rank 0, which does not call. */
void check_shrink(ncclComm_t comm)
{
    ncclComm_t sub = NULL;
    int        ex = 0, bad = nranks;
    CHECK(ncclCommShrink(comm, &bad, 1, &sub, NULL, NCCL_SHRINK_DEFAULT) == ncclInvalidArgument,
          "out-of-range exclusion accepted");
    CHECK(ncclCommShrink(comm, &ex, 1, &sub, NULL, 7) == ncclInvalidArgument, "bad flags accepted");
    NCCLOK(ncclCommShrink(comm, NULL, 0, &sub, NULL, NCCL_SHRINK_DEFAULT));
    if (sub != NULL)
        check_shrunk(sub, NULL, 0);
    NCCLOK(ncclCommDestroy(sub));
    if (nranks < 2)
        return;
    if (rank == 0) {
        CHECK(ncclCommShrink(comm, &ex, 1, &sub, NULL, NCCL_SHRINK_DEFAULT) == ncclInvalidUsage,
              "an excluded rank's shrink accepted");
        return;
    }
    sub = NULL;
    NCCLOK(ncclCommShrink(comm, &ex, 1, &sub, NULL, NCCL_SHRINK_DEFAULT));
    if (sub != NULL)
        check_shrunk(sub, &ex, 1);
    NCCLOK(ncclCommDestroy(sub));
}

/* NCCL_CHECK_DEAD_RANK mode: the last rank exits right after init; the others
 * shrink it away (NCCL_SHRINK_ABORT, as after a failure) and go on. */
int run_dead_rank(ncclComm_t comm)
{
    int ex = nranks - 1;
    if (rank == ex) {
        printf("rank %d/%d: exits without finalizing\n", rank, nranks);
        fflush(stdout);
        _exit(0);
    }
    nanosleep(&(struct timespec){0, 200000000}, NULL); /* let it be gone */
    ncclComm_t sub = NULL;
    NCCLOK(ncclCommShrink(comm, &ex, 1, &sub, NULL, NCCL_SHRINK_ABORT));
    if (sub != NULL)
        check_shrunk(sub, &ex, 1);
    NCCLOK(ncclCommDestroy(sub));
    NCCLOK(ncclCommAbort(comm));
    printf("rank %d/%d: %s (%d failures)\n", rank, nranks, failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

/* A revoked communicator refuses every later call; destroy still works. */
void check_revoke(ncclComm_t comm)
{
    ncclComm_t c = NULL;
    int        x = 1, y = 0;
    NCCLOK(ncclCommSplit(comm, 0, rank, &c, NULL));
    if (c == NULL)
        return;
    CHECK(ncclCommRevoke(c, 1) == ncclInvalidArgument, "revoke flags accepted");
    NCCLOK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT));
    CHECK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, c, NULL) == ncclInvalidUsage,
          "allreduce on a revoked communicator");
    CHECK(strstr(ncclGetLastError(c), "revoked") != NULL, "revoke message: %s",
          ncclGetLastError(c));
    /* NCCL's recovery: a revoked communicator is quiescent, is not
     * finalized, and is shrunk or split into a working one */
    ncclResult_t async = ncclInternalError;
    int          n = 0, me = -1;
    NCCLOK(ncclCommGetAsyncError(c, &async));
    CHECK(async == ncclSuccess, "async error %d after revoke", async);
    NCCLOK(ncclCommCount(c, &n));
    NCCLOK(ncclCommUserRank(c, &me));
    CHECK(n == nranks && me == rank, "count %d, rank %d after revoke", n, me);
    CHECK(ncclCommFinalize(c) == ncclInvalidUsage, "finalize after revoke accepted");
    ncclComm_t s = NULL, t = NULL, c2 = NULL;
    NCCLOK(ncclCommShrink(c, NULL, 0, &s, NULL, NCCL_SHRINK_DEFAULT));
    CHECK(ncclCommShrink(c, NULL, 0, &t, NULL, NCCL_SHRINK_DEFAULT) == ncclInvalidUsage,
          "a second shrink of a revoked communicator accepted");
    NCCLOK(ncclCommSplit(comm, 0, rank, &c2, NULL));
    NCCLOK(ncclCommRevoke(c2, NCCL_REVOKE_DEFAULT));
    NCCLOK(ncclCommSplit(c2, rank % 2, -rank, &t, NULL));
    NCCLOK(ncclCommDestroy(c2));
    y = 0;
    if (s != NULL)
        NCCLOK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, s, NULL));
    CHECK(y == nranks, "allreduce on the shrunk revoked communicator gave %d", y);
    n = 0, me = -1;
    if (t != NULL) {
        NCCLOK(ncclCommCount(t, &n));
        NCCLOK(ncclCommUserRank(t, &me));
        y = 0;
        NCCLOK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, t, NULL));
    }
    int want = (nranks + 1 - rank % 2) / 2; /* the ranks of this parity */
    CHECK(n == want && y == want && me == want - 1 - rank / 2,
          "split of a revoked communicator: rank %d of %d, sum %d (want rank %d of %d)", me, n, y,
          want - 1 - rank / 2, want);
    NCCLOK(ncclCommDestroy(t));
    NCCLOK(ncclCommDestroy(s));
    NCCLOK(ncclCommDestroy(c));
}

/* As NCCL's: a call that fails inside a group fails the whole group, and
 * ncclGroupEnd runs none of its calls; ncclGroupSimulateEnd closes it. A
 * refused NCCL_SHRINK_ABORT leaves the parent working. */
void check_group_errors(ncclComm_t comm)
{
    int x = 1, y = 0;
    NCCLOK(ncclGroupStart());
    CHECK(ncclAllReduce(&x, &y, 1, (ncclDataType_t)99, ncclSum, comm, NULL) == ncclInvalidArgument,
          "bad dtype in a group");
    NCCLOK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, comm, NULL));
    CHECK(ncclGroupEnd() == ncclInvalidArgument, "a group with a failed call ended well");
    CHECK(y == 0, "a failed group's call ran (y = %d)", y);
    CHECK(strstr(ncclGetLastError(comm), "none of the group's calls ran") != NULL,
          "group error message: %s", ncclGetLastError(comm));
    NCCLOK(ncclGroupStart());
    NCCLOK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, comm, NULL));
    CHECK(ncclGroupSimulateEnd(NULL) == ncclInvalidUsage, "simulate end");
    NCCLOK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, comm, NULL)); /* not in a group */
    CHECK(y == nranks, "after ncclGroupSimulateEnd: %d (want %d)", y, nranks);
    ncclComm_t s   = NULL;
    int        bad = nranks;
    CHECK(ncclCommShrink(comm, &bad, 1, &s, NULL, NCCL_SHRINK_ABORT) == ncclInvalidArgument,
          "shrink excluding rank %d accepted", bad);
    y = 0;
    NCCLOK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, comm, NULL));
    CHECK(y == nranks, "after a refused NCCL_SHRINK_ABORT: %d (want %d)", y, nranks);
}

/* A send and a receive on a ring that run at once (the receive starts behind
 * the send: comm_queue.c): a profiler plugin sees each one's events apart. */
static void check_bridge_overlap(hcomm_comm_t hc)
{
    size_t n = 4 << 20;
    char  *s = malloc(n), *r = malloc(n);
    if (nranks < 2 || s == NULL || r == NULL) {
        free(s), free(r);
        return;
    }
    memset(s, rank + 1, n);
    for (int it = 0; it < 4; it++) {
        hcomm_request_t rq[2] = {NULL, NULL};
        memset(r, 0, n);
        CHECK(hcomm_isend(s, n, HCOMM_UINT8, (rank + 1) % nranks, hc, &rq[0]) == HCOMM_SUCCESS &&
                  hcomm_irecv(r, n, HCOMM_UINT8, (rank + nranks - 1) % nranks, hc, &rq[1]) ==
                      HCOMM_SUCCESS,
              "hcomm_isend/hcomm_irecv");
        CHECK(rq[0] == NULL || hcomm_wait(&rq[0]) == HCOMM_SUCCESS, "hcomm_wait(send)");
        CHECK(rq[1] == NULL || hcomm_wait(&rq[1]) == HCOMM_SUCCESS, "hcomm_wait(recv)");
        CHECK(r[0] == (char)((rank + nranks - 1) % nranks + 1) && r[n - 1] == r[0],
              "overlapped exchange %d got %d", it, r[0]);
    }
    free(s), free(r);
}

/* hcomm's own calls on the communicator behind the NCCL one. */
void check_bridge(ncclComm_t comm)
{
    hcomm_comm_t hc   = NULL;
    int          size = 0, v = rank + 1, sum = 0;
    CHECK(hcomm_comm_from_nccl(comm, &hc) == HCOMM_SUCCESS && hc != NULL, "no hcomm comm");
    if (hc == NULL)
        return;
    CHECK(hcomm_comm_size(hc, &size) == HCOMM_SUCCESS && size == nranks, "hcomm size %d", size);
    CHECK(hcomm_allreduce(&v, &sum, 1, HCOMM_INT32, HCOMM_SUM, hc, NULL) == HCOMM_SUCCESS &&
              sum == nranks * (nranks + 1) / 2,
          "hcomm allreduce on the NCCL comm gave %d", sum);
    check_bridge_overlap(hc);
    CHECK(hcomm_comm_from_nccl((ncclComm_t)&v, &hc) == HCOMM_ERR_INVALID_COMM,
          "a foreign handle accepted");
    CHECK(hcomm_comm_from_nccl(comm, NULL) == HCOMM_ERR_INVALID_COMM, "NULL out accepted");
}

void check_errors(ncclComm_t comm)
{
    int        x = 0, y;
    ncclComm_t c2;
    CHECK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, NULL, NULL) == ncclInvalidArgument,
          "NULL comm");
    CHECK(ncclAllReduce(&x, &y, 1, ncclFloat8e4m3, ncclSum, comm, NULL) == ncclInvalidArgument,
          "fp8 accepted");
    CHECK(strstr(ncclGetLastError(comm), "fp8") != NULL, "fp8 message: %s", ncclGetLastError(comm));
    CHECK(ncclAllReduce(&x, &y, 1, (ncclDataType_t)99, ncclSum, comm, NULL) == ncclInvalidArgument,
          "bad dtype");
    CHECK(ncclAllReduce(&x, &y, 1, ncclInt, (ncclRedOp_t)77, comm, NULL) == ncclInvalidArgument,
          "bad op");
    CHECK(ncclBroadcast(&x, &y, 1, ncclInt, nranks, comm, NULL) == ncclInvalidArgument, "bad root");
    if (nranks == 1) { /* refused on the root alone: elsewhere the peers would wait */
        int g[5] = {0};
        CHECK(ncclGather(g + 1, g, 4, ncclInt, 0, comm, NULL) == ncclInvalidArgument,
              "overlapping gather accepted");
        CHECK(ncclScatter(g, g + 1, 4, ncclInt, 0, comm, NULL) == ncclInvalidArgument,
              "overlapping scatter accepted");
        CHECK(ncclAllReduce(g, g + 1, 4, ncclInt, ncclSum, comm, NULL) == ncclInvalidArgument,
              "overlapping allreduce accepted");
        NCCLOK(ncclGather(g, g, 4, ncclInt, 0, comm, NULL)); /* in place */
    }
    /* the same checks on the other calls' fast paths */
    CHECK(ncclAllGather(&x, &y, 1, ncclFloat8e5m2, comm, NULL) == ncclInvalidArgument,
          "fp8 allgather accepted");
    CHECK(ncclSend(&x, 1, ncclInt, 0, NULL, NULL) == ncclInvalidArgument, "NULL comm send");
    CHECK(ncclReduce(&x, &y, 1, ncclInt, (ncclRedOp_t)77, 0, comm, NULL) == ncclInvalidArgument,
          "bad op reduce");
    CHECK(ncclReduceScatter(&x, &y, 1, (ncclDataType_t)99, ncclSum, comm, NULL) ==
              ncclInvalidArgument,
          "bad dtype reduce_scatter");
    /* recvcount x ranks overflows: hcomm's own checks catch it on the fast path */
    CHECK(ncclReduceScatter(&x, &y, SIZE_MAX / 2, ncclInt, ncclSum, comm, NULL) ==
              ncclInvalidArgument,
          "overflowing reduce_scatter accepted");
    CHECK(ncclCommCuDevice(comm, &y) == ncclInvalidUsage, "CuDevice without CUDA");
    /* two ranks of this process, and an allreduce over them from this thread */
    ncclComm_t all[2] = {NULL, NULL};
    int        ax[2] = {1, 2}, ay[2] = {0, 0};
    NCCLOK(ncclCommInitAll(all, 2, NULL));
    NCCLOK(ncclGroupStart());
    for (int i = 0; i < 2; i++)
        NCCLOK(ncclAllReduce(&ax[i], &ay[i], 1, ncclInt, ncclSum, all[i], NULL));
    NCCLOK(ncclGroupEnd());
    CHECK(ay[0] == 3 && ay[1] == 3, "allreduce over InitAll(2)'s ranks: %d %d", ay[0], ay[1]);
    for (int i = 0; i < 2; i++)
        NCCLOK(ncclCommDestroy(all[i]));
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "unmatched GroupEnd");
    ncclWindow_t w;
    CHECK(ncclCommWindowRegister(comm, &x, 4, &w, 0) == ncclInvalidUsage, "window register");
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic        = 0;
    CHECK(ncclCommSplit(comm, 0, 0, &c2, &bad) == ncclInvalidArgument, "uninitialised config");
    CHECK(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0, "error string");
    ncclResult_t async = ncclInternalError;
    NCCLOK(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclSuccess, "async error %d", async);
    void *h = NULL, *mem = NULL;
    NCCLOK(ncclMemAlloc(&mem, 4096));
    NCCLOK(ncclCommRegister(comm, mem, 4096, &h));
    NCCLOK(ncclCommDeregister(comm, h));
    NCCLOK(ncclMemFree(mem));
}
