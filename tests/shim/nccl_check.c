/* nccl_check.c - checks hcomm's libnccl.so.2 through the NCCL API only: every
 * collective x dtype x op against serial references, send/recv rings in a
 * group, PreMulSum, split, shrink, error paths, and hcomm calls on the
 * communicator behind an NCCL one (hcomm_nccl.h). Run under hcomm-run: rank and size
 * come from HCOMM_RANK / HCOMM_NRANKS; rank 0 publishes the ncclUniqueId in
 * the file named by NCCL_CHECK_ID_FILE. Built with NCCL_CHECK_MPI (as
 * nccl_check_mpi) it runs under mpirun instead: rank and size from MPI, the id
 * sent with MPI_Bcast, MPI used for nothing else. Also checks that every NCCL
 * name is bound straight to hcomm's implementation in libhcomm. Built with
 * NCCL_CHECK_CUDA (as nccl_check_cuda, linked to CUDA) it also runs calls on
 * CUDA streams where a GPU is usable, and says SKIP where none is. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT, dladdr */
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcomm_nccl.h"
#include "nccl.h"
#ifdef NCCL_CHECK_MPI
#include <mpi.h>
#endif
#ifdef NCCL_CHECK_CUDA
#include <cuda_runtime.h>
#endif

static int rank, nranks, failures;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__);  \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, " [last error: %s]\n", ncclGetLastError(NULL)); \
            failures++;                                                     \
        }                                                                   \
    } while (0)
#define NCCLOK(call)                                                                     \
    do {                                                                                 \
        ncclResult_t r_ = (call);                                                        \
        CHECK(r_ == ncclSuccess, "%s -> %s", #call, ncclGetErrorString(r_));             \
    } while (0)

static const ncclDataType_t dtypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                        ncclInt64,   ncclUint64,  ncclFloat16, ncclFloat32,
                                        ncclFloat64, ncclBfloat16};
static const char *dtype_names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                    "float16", "float32", "float64", "bfloat16"};
static const size_t dsize[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(m | 0x400, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Exact for the small integers and halves the test stores. */
static uint16_t double_to_half(double d)
{
    uint16_t sign = d < 0 ? 0x8000 : 0;
    d = fabs(d);
    if (d == 0)
        return sign;
    int e;
    double m = frexp(d, &e);
    uint32_t q = (uint32_t)nearbyint(ldexp(m, 11));
    if (q == 2048) {
        q = 1024;
        e++;
    }
    return sign | (uint16_t)(((uint32_t)(e + 14) << 10) | (q & 0x3ff));
}

static double get(ncclDataType_t dt, const void *p, size_t i)
{
    float f;
    uint32_t u;
    switch (dt) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    case ncclInt64: return (double)((const int64_t *)p)[i];
    case ncclUint64: return (double)((const uint64_t *)p)[i];
    case ncclFloat16: return half_to_double(((const uint16_t *)p)[i]);
    case ncclFloat32: return ((const float *)p)[i];
    case ncclFloat64: return ((const double *)p)[i];
    default:
        u = (uint32_t)((const uint16_t *)p)[i] << 16;
        memcpy(&f, &u, 4);
        return f;
    }
}

static void put(ncclDataType_t dt, void *p, size_t i, double v)
{
    float f = (float)v;
    uint32_t u;
    switch (dt) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t *)p)[i] = double_to_half(v); break;
    case ncclFloat32: ((float *)p)[i] = f; break;
    case ncclFloat64: ((double *)p)[i] = v; break;
    default:
        memcpy(&u, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        break;
    }
}

static int is_float(ncclDataType_t dt) { return dt >= ncclFloat16; }

static int close_to(ncclDataType_t dt, double got, double want)
{
    double tol = dt == ncclFloat16 || dt == ncclBfloat16 ? 1e-2 : dt == ncclFloat32 ? 1e-6 : 0;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* Inputs small enough to be exact in every dtype, products within int8. */
static double in_red(int r, size_t i) { return (double)((r + (int)(i % 5)) % 3 + 1); }
static double in_mov(int r, size_t i) { return (double)((r * 7 + (int)(i % 97)) % 50); }

static double ref_red(ncclRedOp_t op, ncclDataType_t dt, size_t i)
{
    double acc = in_red(0, i);
    for (int r = 1; r < nranks; r++) {
        double v = in_red(r, i);
        acc = op == ncclProd ? acc * v : op == ncclMax ? fmax(acc, v)
              : op == ncclMin ? fmin(acc, v) : acc + v;
    }
    if (op == ncclAvg)
        acc = is_float(dt) ? acc / nranks : trunc(acc / nranks);
    return acc;
}

static void *fill(ncclDataType_t dt, size_t n, int red)
{
    void *p = calloc(n ? n : 1, 8);
    for (size_t i = 0; p != NULL && i < n; i++)
        put(dt, p, i, red ? in_red(rank, i) : in_mov(rank, i));
    return p;
}

static void check_reductions(ncclComm_t comm, ncclDataType_t dt, const char *dn, size_t n)
{
    for (int op = ncclSum; op < ncclNumOps; op++) {
        void *s = fill(dt, n * nranks, 1), *r = calloc(n * nranks + 1, 8);
        int root = nranks - 1;
        NCCLOK(ncclAllReduce(s, r, n, dt, op, comm, NULL));
        for (size_t i = 0; i < n; i++)
            CHECK(close_to(dt, get(dt, r, i), ref_red(op, dt, i)), "allreduce %s op %d [%zu]: %g != %g",
                  dn, op, i, get(dt, r, i), ref_red(op, dt, i));
        memset(r, 0, n * 8);
        NCCLOK(ncclReduce(s, r, n, dt, op, root, comm, NULL));
        for (size_t i = 0; rank == root && i < n; i++)
            CHECK(close_to(dt, get(dt, r, i), ref_red(op, dt, i)), "reduce %s op %d [%zu]", dn, op, i);
        NCCLOK(ncclReduceScatter(s, r, n, dt, op, comm, NULL));
        for (size_t i = 0; i < n; i++) {
            size_t g = (size_t)rank * n + i;
            CHECK(close_to(dt, get(dt, r, i), ref_red(op, dt, g)), "reducescatter %s op %d [%zu]",
                  dn, op, i);
        }
        NCCLOK(ncclAllReduce(s, s, n, dt, op, comm, NULL)); /* in place */
        for (size_t i = 0; i < n; i++)
            CHECK(close_to(dt, get(dt, s, i), ref_red(op, dt, i)), "allreduce in place %s op %d", dn, op);
        free(s);
        free(r);
    }
}

static void check_movement(ncclComm_t comm, ncclDataType_t dt, const char *dn, size_t n)
{
    size_t es = dsize[dt];
    void *s = fill(dt, n * nranks, 0), *r = calloc(n * nranks + 1, 8);
    int root = nranks > 1 ? 1 : 0;
    NCCLOK(ncclBroadcast(s, r, n, dt, root, comm, NULL));
    for (size_t i = 0; i < n; i++)
        CHECK(get(dt, r, i) == in_mov(root, i), "broadcast %s [%zu]", dn, i);
    NCCLOK(ncclBcast(s, n, dt, 0, comm, NULL));
    for (size_t i = 0; i < n; i++)
        CHECK(get(dt, s, i) == in_mov(0, i), "bcast %s [%zu]", dn, i);
    free(s);
    s = fill(dt, n * nranks, 0);
    NCCLOK(ncclAllGather(s, r, n, dt, comm, NULL));
    for (int p = 0; p < nranks; p++)
        for (size_t i = 0; i < n; i++)
            CHECK(get(dt, r, p * n + i) == in_mov(p, i), "allgather %s from %d [%zu]", dn, p, i);
    NCCLOK(ncclAlltoAll(s, r, n, dt, comm, NULL));
    for (int p = 0; p < nranks; p++)
        for (size_t i = 0; i < n; i++)
            CHECK(get(dt, r, p * n + i) == in_mov(p, rank * n + i), "alltoall %s from %d", dn, p);
    memset(r, 0, n * nranks * es);
    NCCLOK(ncclGather(s, r, n, dt, root, comm, NULL));
    for (int p = 0; rank == root && p < nranks; p++)
        for (size_t i = 0; i < n; i++)
            CHECK(get(dt, r, p * n + i) == in_mov(p, i), "gather %s from %d [%zu]", dn, p, i);
    NCCLOK(ncclScatter(s, r, n, dt, root, comm, NULL));
    for (size_t i = 0; i < n; i++)
        CHECK(get(dt, r, i) == in_mov(root, rank * n + i), "scatter %s [%zu]", dn, i);
    free(s);
    free(r);
}

static void check_ring(ncclComm_t comm, size_t n)
{
    float *s = malloc(n * 4 + 4), *r = calloc(n + 1, 4);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (size_t i = 0; i < n; i++)
        s[i] = (float)(rank * 1000 + (int)i);
    NCCLOK(ncclGroupStart());
    NCCLOK(ncclSend(s, n, ncclFloat, next, comm, NULL));
    NCCLOK(ncclRecv(r, n, ncclFloat, prev, comm, NULL));
    NCCLOK(ncclGroupEnd());
    for (size_t i = 0; i < n; i++)
        CHECK(r[i] == (float)(prev * 1000 + (int)i), "ring recv [%zu] = %g", i, r[i]);
    free(s);
    free(r);
}

static void check_premul(ncclComm_t comm)
{
    double scalar = 0.5;
    float scalar_f = 2.0f, s[8], r[8];
    ncclRedOp_t op, op2;
    NCCLOK(ncclRedOpCreatePreMulSum(&op, &scalar_f, ncclFloat, ncclScalarHostImmediate, comm));
    for (int i = 0; i < 8; i++)
        s[i] = (float)(rank + i);
    NCCLOK(ncclAllReduce(s, r, 8, ncclFloat, op, comm, NULL));
    for (int i = 0; i < 8; i++)
        CHECK(r[i] == 2.0f * (float)(nranks * i + nranks * (nranks - 1) / 2), "premulsum [%d]", i);
    CHECK(ncclAllReduce(s, r, 8, ncclDouble, op, comm, NULL) == ncclInvalidArgument,
          "premulsum with another dtype accepted");
    NCCLOK(ncclRedOpCreatePreMulSum(&op2, &scalar, ncclDouble, ncclScalarDevice, comm));
    CHECK(op2 != op, "two operators share a handle");
    /* a device-resident scalar is read at each call */
    double ds[8], dr[8], sum = 0;
    for (int p = 0; p < nranks; p++)
        sum += p;
    for (int i = 0; i < 8; i++)
        ds[i] = (double)rank;
    NCCLOK(ncclAllReduce(ds, dr, 8, ncclDouble, op2, comm, NULL));
    CHECK(dr[0] == 0.5 * sum && dr[7] == 0.5 * sum, "device scalar 0.5: %g", dr[0]);
    scalar = 3;
    NCCLOK(ncclAllReduce(ds, dr, 8, ncclDouble, op2, comm, NULL));
    CHECK(dr[0] == 3 * sum && dr[7] == 3 * sum, "device scalar changed to 3: %g", dr[0]);
    /* scaled copies outlive the call inside a group, NCCL's or hcomm's own */
    float r2[8];
    NCCLOK(ncclGroupStart());
    NCCLOK(ncclAllReduce(s, r, 8, ncclFloat, op, comm, NULL));
    NCCLOK(ncclAllReduce(s, r2, 8, ncclFloat, op, comm, NULL));
    NCCLOK(ncclGroupEnd());
    for (int i = 0; i < 8; i++)
        CHECK(r[i] == r2[i] && r[i] == 2.0f * (float)(nranks * i + nranks * (nranks - 1) / 2),
              "premulsum in a group [%d]: %g %g", i, r[i], r2[i]);
    /* two hcomm groups of two each, a plain call between: the second group
     * frees the first one's copies, never its own */
    for (int g = 0; g < 2; g++) {
        memset(r, 0, sizeof(r));
        memset(r2, 0, sizeof(r2));
        CHECK(hcomm_group_start() == HCOMM_SUCCESS, "hcomm_group_start");
        NCCLOK(ncclAllReduce(s, r, 8, ncclFloat, op, comm, NULL));
        NCCLOK(ncclAllReduce(s, r2, 8, ncclFloat, op, comm, NULL));
        CHECK(hcomm_group_end() == HCOMM_SUCCESS, "hcomm_group_end");
        for (int i = 0; i < 8; i++)
            CHECK(r[i] == r2[i] && r[i] == 2.0f * (float)(nranks * i + nranks * (nranks - 1) / 2),
                  "premulsum in hcomm group %d [%d]: %g %g", g, i, r[i], r2[i]);
        NCCLOK(ncclAllReduce(s, r, 8, ncclFloat, ncclSum, comm, NULL));
    }
    NCCLOK(ncclRedOpDestroy(op, comm));
    NCCLOK(ncclRedOpDestroy(op2, comm));
    CHECK(ncclRedOpDestroy(op, comm) == ncclInvalidArgument, "double destroy accepted");
}

static void check_split(ncclComm_t comm)
{
    ncclComm_t sub = NULL;
    int color = rank % 2, count = 0, srank = -1, v = rank, sum = 0;
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
static void check_shrink(ncclComm_t comm)
{
    ncclComm_t sub = NULL;
    int        ex  = 0, bad = nranks;
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
static int run_dead_rank(ncclComm_t comm)
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
static void check_revoke(ncclComm_t comm)
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
static void check_group_errors(ncclComm_t comm)
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
static void check_bridge(ncclComm_t comm)
{
    hcomm_comm_t hc = NULL;
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

#ifdef NCCL_CHECK_CUDA
/* On a CUDA stream, host buffers (pinned): the device fills the send buffer
 * before the allreduce and reads the result after it, in stream order. */
static void check_cuda_allreduce(ncclComm_t comm, cudaStream_t cs)
{
    enum { N = 1 << 16 };
    unsigned char *dev = NULL, *s = NULL, *r = NULL, *back = NULL;
    if (cudaMalloc((void **)&dev, N) != cudaSuccess || cudaMallocHost((void **)&s, N) ||
        cudaMallocHost((void **)&r, N) || cudaMallocHost((void **)&back, N)) {
        CHECK(0, "CUDA allocation failed");
        return;
    }
    for (int round = 0; round < 3; round++) {
        cudaMemsetAsync(dev, rank + 1 + round, N, cs);
        cudaMemcpyAsync(s, dev, N, cudaMemcpyDeviceToHost, cs);
        NCCLOK(ncclAllReduce(s, r, N, ncclUint8, ncclSum, comm, cs));
        cudaMemcpyAsync(dev, r, N, cudaMemcpyHostToDevice, cs);
        cudaMemcpyAsync(back, dev, N, cudaMemcpyDeviceToHost, cs);
        CHECK(cudaStreamSynchronize(cs) == cudaSuccess, "cudaStreamSynchronize");
        unsigned want = 0;
        for (int q = 0; q < nranks; q++)
            want += (unsigned)(q + 1 + round);
        for (int i = 0; i < N; i += 4093)
            CHECK(back[i] == (unsigned char)want, "stream allreduce round %d [%d]: %u != %u",
                  round, i, back[i], want);
    }
    CHECK(ncclAllReduce(dev, dev, N, ncclUint8, ncclSum, comm, cs) == ncclInvalidUsage,
          "device buffer accepted");
    CHECK(strstr(ncclGetLastError(comm), "device buffers") != NULL, "device buffer message");
    cudaFree(dev);
    cudaFreeHost(s);
    cudaFreeHost(r);
    cudaFreeHost(back);
}

/* A send/recv ring in a group, a gather and a broadcast on the stream. */
static void check_cuda_group(ncclComm_t comm, cudaStream_t cs)
{
    int *s = NULL, *r = NULL, *g = NULL;
    if (cudaMallocHost((void **)&s, 4 * sizeof(int)) ||
        cudaMallocHost((void **)&r, 4 * sizeof(int)) ||
        cudaMallocHost((void **)&g, 4 * (size_t)nranks * sizeof(int))) {
        CHECK(0, "CUDA allocation failed");
        return;
    }
    for (int i = 0; i < 4; i++)
        s[i] = rank * 10 + i;
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    NCCLOK(ncclGroupStart());
    NCCLOK(ncclSend(s, 4, ncclInt, next, comm, cs));
    NCCLOK(ncclRecv(r, 4, ncclInt, prev, comm, cs));
    NCCLOK(ncclGroupEnd());
    NCCLOK(ncclGather(s, g, 4, ncclInt, 0, comm, cs));
    CHECK(cudaStreamSynchronize(cs) == cudaSuccess, "cudaStreamSynchronize");
    for (int i = 0; i < 4; i++)
        CHECK(r[i] == prev * 10 + i, "stream ring [%d]: %d", i, r[i]);
    for (int q = 0; rank == 0 && q < nranks; q++)
        for (int i = 0; i < 4; i++)
            CHECK(g[q * 4 + i] == q * 10 + i, "stream gather from %d [%d]: %d", q, i, g[q * 4 + i]);
    cudaFreeHost(s);
    cudaFreeHost(r);
    cudaFreeHost(g);
}
#endif

/* Calls on a CUDA stream. With a usable GPU (nccl_check_cuda) they run;
 * otherwise they fail with a reason. A made-up stream handle is passed only
 * where no CUDA driver can read it: builds without CUDA, or no GPU. */
static void check_streams(ncclComm_t comm)
{
#ifdef NCCL_CHECK_CUDA
    int         ndev = 0;
    cudaError_t e    = cudaGetDeviceCount(&ndev);
    if (e == cudaSuccess && ndev > 0) {
        cudaStream_t cs;
        cudaSetDevice(rank % ndev);
        if (cudaStreamCreate(&cs) != cudaSuccess) {
            CHECK(0, "cudaStreamCreate failed");
            return;
        }
        check_cuda_allreduce(comm, cs);
        check_cuda_group(comm, cs);
        cudaStreamDestroy(cs);
        return;
    }
    if (rank == 0)
        printf("SKIP: calls on CUDA streams: no usable GPU (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
#elif !defined(NCCL_CHECK_NO_CUDA)
    return; /* this build has CUDA: nccl_check_cuda checks streams */
#endif
    int x = 1, y = 0;
    CHECK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, comm, (cudaStream_t)&x) == ncclInvalidUsage,
          "stream accepted");
    CHECK(strstr(ncclGetLastError(comm), "CUDA stream") != NULL, "stream message: %s",
          ncclGetLastError(comm));
    CHECK(ncclSend(&x, 1, ncclInt, 0, comm, (cudaStream_t)&x) == ncclInvalidUsage,
          "stream send accepted");
}

static void check_errors(ncclComm_t comm)
{
    int x = 0, y;
    ncclComm_t c2;
    CHECK(ncclAllReduce(&x, &y, 1, ncclInt, ncclSum, NULL, NULL) == ncclInvalidArgument, "NULL comm");
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
    CHECK(ncclCommInitAll(&c2, 2, NULL) == ncclInvalidUsage, "InitAll(2)");
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "unmatched GroupEnd");
    ncclWindow_t w;
    CHECK(ncclCommWindowRegister(comm, &x, 4, &w, 0) == ncclInvalidUsage, "window register");
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
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

#ifdef NCCL_CHECK_MPI
static int get_id(ncclUniqueId *id)
{
    int ok = rank != 0 || ncclGetUniqueId(id) == ncclSuccess;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (ok)
        MPI_Bcast(id, sizeof(*id), MPI_BYTE, 0, MPI_COMM_WORLD);
    return ok ? 0 : -1;
}
#else
/* The id in the file at path: made and written there when mine, else read. */
static int id_file(ncclUniqueId *id, const char *path, int mine)
{
    if (mine) {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (ncclGetUniqueId(id) != ncclSuccess || f == NULL || fwrite(id, sizeof(*id), 1, f) != 1 ||
            fclose(f) != 0 || rename(tmp, path) != 0)
            return -1;
        return 0;
    }
    for (int tries = 0; tries < 3000; tries++) { /* 30 s */
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            size_t got = fread(id, sizeof(*id), 1, f);
            fclose(f);
            if (got == 1)
                return 0;
        }
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    fprintf(stderr, "rank %d: no unique id in %s after 30 s\n", rank, path);
    return -1;
}

static int get_id(ncclUniqueId *id)
{
    const char *path = getenv("NCCL_CHECK_ID_FILE");
    if (path == NULL) {
        fprintf(stderr, "NCCL_CHECK_ID_FILE not set\n");
        return -1;
    }
    return id_file(id, path, rank == 0);
}

/* NCCL_CHECK_SCALABLE=S: ncclCommInitRankScalable with an id from every rank
 * (each calls ncclGetUniqueId, as NCCL asks), an allreduce, then S seconds
 * idle (run_shim.sh: past HCOMM_TIMEOUT, for the roots of the ids not used). */
static int run_scalable(double idle)
{
    const char *path = getenv("NCCL_CHECK_ID_FILE");
    ncclUniqueId *ids = calloc((size_t)nranks, sizeof(*ids));
    ncclComm_t comm = NULL;
    char name[4200];
    int v = 1, sum = 0;
    if (path == NULL || ids == NULL) {
        free(ids);
        return 1;
    }
    for (int r = 0; r < nranks; r++) {
        snprintf(name, sizeof(name), "%s.%d", path, r);
        if (id_file(&ids[r], name, r == rank) != 0) {
            free(ids);
            return 1;
        }
    }
    NCCLOK(ncclCommInitRankScalable(&comm, nranks, rank, nranks, ids, NULL));
    free(ids);
    if (comm == NULL)
        return 1;
    NCCLOK(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, NULL));
    CHECK(sum == nranks, "allreduce on a scalable-init communicator gave %d", sum);
    nanosleep(&(struct timespec){(time_t)idle, (long)((idle - (time_t)idle) * 1e9)}, NULL);
    NCCLOK(ncclCommDestroy(comm));
    printf("rank %d/%d: scalable %s (%d failures)\n", rank, nranks, failures ? "FAIL" : "PASS",
           failures);
    return failures ? 1 : 0;
}
#endif

/* Each NCCL name and its pncclXxx twin resolve to hcomm_nccl_Xxx in libhcomm:
 * a call goes straight into hcomm, with no wrapper in libnccl.so.2 between
 * (src/shim/nccl/nccl_names.c). A wrapper would give libnccl's address. */
static void check_binding(void)
{
    static const char *const names[] = {
#define HC_NCCL_API(name) #name,
#include "shim/nccl/nccl_api.def"
#undef HC_NCCL_API
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char nccl[64], pnccl[64], impl[64];
        snprintf(nccl, sizeof(nccl), "nccl%s", names[i]);
        snprintf(pnccl, sizeof(pnccl), "pnccl%s", names[i]);
        snprintf(impl, sizeof(impl), "hcomm_nccl_%s", names[i]);
        void   *f = dlsym(RTLD_DEFAULT, nccl), *p = dlsym(RTLD_DEFAULT, pnccl);
        void   *h = dlsym(RTLD_DEFAULT, impl);
        Dl_info info;
        CHECK(f != NULL && f == p && f == h, "%s at %p, %s at %p, %s at %p", nccl, f, pnccl, p,
              impl, h);
        CHECK(f != NULL && dladdr(f, &info) != 0 && info.dli_fname != NULL &&
                  strstr(info.dli_fname, "libhcomm.so") != NULL,
              "%s lives in %s, not libhcomm", nccl, f && info.dli_fname ? info.dli_fname : "?");
    }
}

static int run_checks(void)
{
    int version = 0;
    NCCLOK(ncclGetVersion(&version));
    CHECK(version / 10000 == 2 && version % 10000 / 100 == 28, "version %d", version);
    if (rank == 0)
        check_binding();
    ncclUniqueId id;
    if (get_id(&id) != 0)
        return 1;
    ncclComm_t comm = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.minCTAs = 4; /* ignored, with an info line */
    ncclResult_t res = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
    if (res != ncclSuccess) {
        fprintf(stderr, "rank %d: init: %s: %s\n", rank, ncclGetErrorString(res), ncclGetLastError(NULL));
        return 1;
    }
    if (getenv("NCCL_CHECK_DEAD_RANK") != NULL && nranks > 1)
        return run_dead_rank(comm);
    int c = 0, u = -1;
    NCCLOK(ncclCommCount(comm, &c));
    NCCLOK(ncclCommUserRank(comm, &u));
    CHECK(c == nranks && u == rank, "count %d rank %d", c, u);
    static const size_t counts[] = {1, 37, 1031};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
        for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
            check_reductions(comm, dtypes[d], dtype_names[d], counts[k]);
            check_movement(comm, dtypes[d], dtype_names[d], counts[k]);
        }
    check_ring(comm, 1031);
    check_premul(comm);
    check_split(comm);
    check_streams(comm);
    check_shrink(comm);
    check_bridge(comm);
    check_revoke(comm);
    check_group_errors(comm);
    check_errors(comm);
    NCCLOK(ncclCommFinalize(comm));
    NCCLOK(ncclCommDestroy(comm));
    printf("rank %d/%d: %s (%d failures)\n", rank, nranks, failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
#ifdef NCCL_CHECK_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int rc = run_checks();
    MPI_Finalize();
    return rc;
#else
    (void)argc;
    (void)argv;
    const char *r = getenv("HCOMM_RANK"), *n = getenv("HCOMM_NRANKS");
    rank   = r ? atoi(r) : 0;
    nranks = n ? atoi(n) : 1;
    if (getenv("NCCL_CHECK_SCALABLE") != NULL)
        return run_scalable(atof(getenv("NCCL_CHECK_SCALABLE")));
    return run_checks();
#endif
}
