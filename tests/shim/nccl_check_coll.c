/* nccl_check_coll.c - nccl_check's collectives: each one x dtype x op
 * against serial references, send/recv rings in a group, PreMulSum
 * operators, and calls on CUDA streams (nccl_check_cuda, or their errors
 * without CUDA). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_check.h"
#ifdef NCCL_CHECK_CUDA
#include <cuda_runtime.h>
#endif

static const ncclDataType_t dtypes[]      = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                             ncclInt64,   ncclUint64,  ncclFloat16, ncclFloat32,
                                             ncclFloat64, ncclBfloat16};
static const char          *dtype_names[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                             "uint64", "float16", "float32", "float64", "bfloat16"};
static const size_t         dsize[]       = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

static double half_to_double(uint16_t h)
{
    int    e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(m | 0x400, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Exact for the small integers and halves the test stores. */
static uint16_t double_to_half(double d)
{
    uint16_t sign = d < 0 ? 0x8000 : 0;
    d             = fabs(d);
    if (d == 0)
        return sign;
    int      e;
    double   m = frexp(d, &e);
    uint32_t q = (uint32_t)nearbyint(ldexp(m, 11));
    if (q == 2048) {
        q = 1024;
        e++;
    }
    return sign | (uint16_t)(((uint32_t)(e + 14) << 10) | (q & 0x3ff));
}

static double get(ncclDataType_t dt, const void *p, size_t i)
{
    float    f;
    uint32_t u;
    switch (dt) {
    case ncclInt8:
        return ((const int8_t *)p)[i];
    case ncclUint8:
        return ((const uint8_t *)p)[i];
    case ncclInt32:
        return ((const int32_t *)p)[i];
    case ncclUint32:
        return ((const uint32_t *)p)[i];
    case ncclInt64:
        return (double)((const int64_t *)p)[i];
    case ncclUint64:
        return (double)((const uint64_t *)p)[i];
    case ncclFloat16:
        return half_to_double(((const uint16_t *)p)[i]);
    case ncclFloat32:
        return ((const float *)p)[i];
    case ncclFloat64:
        return ((const double *)p)[i];
    default:
        u = (uint32_t)((const uint16_t *)p)[i] << 16;
        memcpy(&f, &u, 4);
        return f;
    }
}

static void put(ncclDataType_t dt, void *p, size_t i, double v)
{
    float    f = (float)v;
    uint32_t u;
    switch (dt) {
    case ncclInt8:
        ((int8_t *)p)[i] = (int8_t)v;
        break;
    case ncclUint8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case ncclInt32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case ncclUint32:
        ((uint32_t *)p)[i] = (uint32_t)v;
        break;
    case ncclInt64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case ncclUint64:
        ((uint64_t *)p)[i] = (uint64_t)v;
        break;
    case ncclFloat16:
        ((uint16_t *)p)[i] = double_to_half(v);
        break;
    case ncclFloat32:
        ((float *)p)[i] = f;
        break;
    case ncclFloat64:
        ((double *)p)[i] = v;
        break;
    default:
        memcpy(&u, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        break;
    }
}

static int is_float(ncclDataType_t dt)
{
    return dt >= ncclFloat16;
}

static int close_to(ncclDataType_t dt, double got, double want)
{
    double tol = dt == ncclFloat16 || dt == ncclBfloat16 ? 1e-2 : dt == ncclFloat32 ? 1e-6 : 0;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* Inputs small enough to be exact in every dtype, products within int8. */
static double in_red(int r, size_t i)
{
    return (double)((r + (int)(i % 5)) % 3 + 1);
}
static double in_mov(int r, size_t i)
{
    return (double)((r * 7 + (int)(i % 97)) % 50);
}

static double ref_red(ncclRedOp_t op, ncclDataType_t dt, size_t i)
{
    double acc = in_red(0, i);
    for (int r = 1; r < nranks; r++) {
        double v = in_red(r, i);
        acc      = op == ncclProd  ? acc * v
                   : op == ncclMax ? fmax(acc, v)
                   : op == ncclMin ? fmin(acc, v)
                                   : acc + v;
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
        int   root = nranks - 1;
        NCCLOK(ncclAllReduce(s, r, n, dt, op, comm, NULL));
        for (size_t i = 0; i < n; i++)
            CHECK(close_to(dt, get(dt, r, i), ref_red(op, dt, i)),
                  "allreduce %s op %d [%zu]: %g != %g", dn, op, i, get(dt, r, i),
                  ref_red(op, dt, i));
        memset(r, 0, n * 8);
        NCCLOK(ncclReduce(s, r, n, dt, op, root, comm, NULL));
        for (size_t i = 0; rank == root && i < n; i++)
            CHECK(close_to(dt, get(dt, r, i), ref_red(op, dt, i)), "reduce %s op %d [%zu]", dn, op,
                  i);
        NCCLOK(ncclReduceScatter(s, r, n, dt, op, comm, NULL));
        for (size_t i = 0; i < n; i++) {
            size_t g = (size_t)rank * n + i;
            CHECK(close_to(dt, get(dt, r, i), ref_red(op, dt, g)), "reducescatter %s op %d [%zu]",
                  dn, op, i);
        }
        NCCLOK(ncclAllReduce(s, s, n, dt, op, comm, NULL)); /* in place */
        for (size_t i = 0; i < n; i++)
            CHECK(close_to(dt, get(dt, s, i), ref_red(op, dt, i)), "allreduce in place %s op %d",
                  dn, op);
        free(s);
        free(r);
    }
}

static void check_movement(ncclComm_t comm, ncclDataType_t dt, const char *dn, size_t n)
{
    size_t es = dsize[dt];
    void  *s = fill(dt, n * nranks, 0), *r = calloc(n * nranks + 1, 8);
    int    root = nranks > 1 ? 1 : 0;
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

void check_ring(ncclComm_t comm, size_t n)
{
    float *s = malloc(n * 4 + 4), *r = calloc(n + 1, 4);
    int    next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
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

void check_premul(ncclComm_t comm)
{
    double      scalar   = 0.5;
    float       scalar_f = 2.0f, s[8], r[8];
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

#ifdef NCCL_CHECK_CUDA
/* On a CUDA stream, host buffers (pinned): the device fills the send buffer
 * before the allreduce and reads the result after it, in stream order; then
 * device buffers, in place. */
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
            CHECK(back[i] == (unsigned char)want, "stream allreduce round %d [%d]: %u != %u", round,
                  i, back[i], want);
    }
    /* device buffers on the stream: staged through host memory */
    cudaMemsetAsync(dev, rank + 1, N, cs);
    NCCLOK(ncclAllReduce(dev, dev, N, ncclUint8, ncclSum, comm, cs));
    cudaMemcpyAsync(back, dev, N, cudaMemcpyDeviceToHost, cs);
    CHECK(cudaStreamSynchronize(cs) == cudaSuccess, "cudaStreamSynchronize");
    unsigned want = 0;
    for (int q = 0; q < nranks; q++)
        want += (unsigned)(q + 1);
    for (int i = 0; i < N; i += 4093)
        CHECK(back[i] == (unsigned char)want, "device allreduce on the stream [%d]: %u != %u", i,
              back[i], want);
    cudaFree(dev);
    cudaFreeHost(s);
    cudaFreeHost(r);
    cudaFreeHost(back);
}

/* A send/recv ring in a group and a gather on the stream; the ring again on
 * device buffers. */
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
    /* the ring again on device buffers: a group's calls staged together */
    int *ds = NULL, *dr = NULL;
    if (cudaMalloc((void **)&ds, 4 * sizeof(int)) || cudaMalloc((void **)&dr, 4 * sizeof(int))) {
        CHECK(0, "CUDA allocation failed");
    } else {
        cudaMemcpyAsync(ds, s, 4 * sizeof(int), cudaMemcpyHostToDevice, cs);
        cudaMemsetAsync(dr, 0, 4 * sizeof(int), cs);
        NCCLOK(ncclGroupStart());
        NCCLOK(ncclSend(ds, 4, ncclInt, next, comm, cs));
        NCCLOK(ncclRecv(dr, 4, ncclInt, prev, comm, cs));
        NCCLOK(ncclGroupEnd());
        cudaMemcpyAsync(r, dr, 4 * sizeof(int), cudaMemcpyDeviceToHost, cs);
        CHECK(cudaStreamSynchronize(cs) == cudaSuccess, "cudaStreamSynchronize");
        for (int i = 0; i < 4; i++)
            CHECK(r[i] == prev * 10 + i, "device ring in a group [%d]: %d", i, r[i]);
    }
    cudaFree(ds);
    cudaFree(dr);
    cudaFreeHost(s);
    cudaFreeHost(r);
    cudaFreeHost(g);
}
#endif

/* Calls on a CUDA stream. With a usable GPU (nccl_check_cuda) they run;
 * otherwise they fail with a reason. A made-up stream handle is passed only
 * where no CUDA driver can read it: builds without CUDA, or no GPU. */
void check_streams(ncclComm_t comm)
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

void check_collectives(ncclComm_t comm, size_t n)
{
    for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
        check_reductions(comm, dtypes[d], dtype_names[d], n);
        check_movement(comm, dtypes[d], dtype_names[d], n);
    }
}
