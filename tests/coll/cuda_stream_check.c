/*
 * cuda_stream_check - streams ordered with a CUDA stream (hcomm_stream_create_cuda),
 * one rank of a run under hcomm-run (or alone). On the CUDA stream: a memset
 * of device memory and a copy to pinned host memory; then, on the hcomm
 * stream bound to it, an allreduce of that host buffer; then on the CUDA
 * stream again a copy back to the device and to a second host buffer. The
 * result must be the sum over ranks: the allreduce ran after the first copy
 * and the second copy after the allreduce. Exits 77 (skip) with the reason
 * when no GPU is usable.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "hcomm.h"
#include "hcomm_stream.h"

#define N (1 << 20)

static int fail(const char *what, int rc)
{
    fprintf(stderr, "cuda_stream_check: %s\n", what);
    return rc;
}

int main(void)
{
    int            ndev = 0, rank, nranks, bad = 0;
    cudaError_t    e    = cudaGetDeviceCount(&ndev);
    hcomm_comm_t   comm;
    hcomm_stream_t hs;
    cudaStream_t   cs;
    unsigned char *dev, *h1, *h2;

    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    if (hcomm_comm_init_env(&comm) != HCOMM_SUCCESS)
        return fail("init failed", 2);
    hcomm_comm_rank(comm, &rank);
    hcomm_comm_size(comm, &nranks);
    cudaSetDevice(rank % ndev);
    if (cudaStreamCreate(&cs) != cudaSuccess || cudaMalloc((void **)&dev, N) != cudaSuccess ||
        cudaMallocHost((void **)&h1, N) != cudaSuccess ||
        cudaMallocHost((void **)&h2, N) != cudaSuccess)
        return fail("CUDA allocation failed", 1);
    if (hcomm_stream_create_cuda(cs, &hs) != HCOMM_SUCCESS)
        return fail("hcomm_stream_create_cuda failed", 1);
    for (int round = 0; round < 3; round++) {
        cudaMemsetAsync(dev, rank + 1 + round, N, cs);
        cudaMemcpyAsync(h1, dev, N, cudaMemcpyDeviceToHost, cs);
        hcomm_allreduce(h1, h1, N, HCOMM_UINT8, HCOMM_SUM, comm, hs);
        cudaMemcpyAsync(dev, h1, N, cudaMemcpyHostToDevice, cs);
        cudaMemcpyAsync(h2, dev, N, cudaMemcpyDeviceToHost, cs);
        if (cudaStreamSynchronize(cs) != cudaSuccess || hcomm_stream_synchronize(hs) != 0)
            return fail("synchronize failed", 1);
        unsigned want = 0;
        for (int r = 0; r < nranks; r++)
            want += (unsigned)(r + 1 + round);
        for (int i = 0; i < N; i++)
            bad += h2[i] != (unsigned char)want;
    }
    printf("cuda_stream_check rank %d: %d wrong bytes over 3 rounds\n", rank, bad);
    hcomm_stream_destroy(hs);
    cudaStreamDestroy(cs);
    hcomm_comm_destroy(comm);
    return bad != 0;
}
