/* device_check_cuda.c - device_check's buffers in CUDA device memory
 * (device_check_cuda): every collective stages them through host memory with
 * CUDA's copies, and hc_mem_reduce runs the device's kernels on them. Also:
 * how pointers are classified, calls on device buffers ordered on a CUDA
 * stream, and (--copies) the rates of cudaMemcpy the staging is read against.
 * Skips where no GPU answers. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "device_check.h"
#include "hcomm_stream.h"
#include "test_comm.h"

const char *const dc_kind_name = "cuda";

const char *dc_unusable(void)
{
    static char why[200];
    int         n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0)
        return NULL;
    snprintf(why, sizeof(why), "no usable GPU (%s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return why;
}

void dc_bind(int rank)
{
    int n = 1;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
        cudaSetDevice(rank % n);
}

void *dc_alloc(size_t len)
{
    void *p = NULL;
    return cudaMalloc(&p, len) == cudaSuccess ? p : NULL;
}

void dc_free(void *p)
{
    cudaFree(p);
}

/* Device memory, inside too, is the cuda kind; pinned, managed and malloc'd
 * memory are host memory (the transports read them directly). */
static void classified(void)
{
    char *d = dc_alloc(1 << 20), *pinned = NULL, *managed = NULL, *plain = malloc(64);
    cudaMallocHost((void **)&pinned, 4096);
    cudaMallocManaged((void **)&managed, 4096, cudaMemAttachGlobal);
    CHECK(d != NULL && hc_mem_kind(d) == HC_MEM_CUDA && hc_mem_kind(d + 12345) == HC_MEM_CUDA,
          "device memory classified as %s", hc_mem_kind_name(hc_mem_kind(d)));
    CHECK(pinned != NULL && hc_mem_kind(pinned) == HC_MEM_HOST, "pinned memory classified as %s",
          hc_mem_kind_name(hc_mem_kind(pinned)));
    CHECK(managed != NULL && hc_mem_kind(managed) == HC_MEM_HOST, "managed memory classified as %s",
          hc_mem_kind_name(hc_mem_kind(managed)));
    CHECK(hc_mem_kind(plain) == HC_MEM_HOST, "malloc'd memory classified as %s",
          hc_mem_kind_name(hc_mem_kind(plain)));
    dc_free(d);
    cudaFreeHost(pinned);
    cudaFree(managed);
    free(plain);
}

#define ORDER_N ((size_t)3 << 20) /* int32s: several staging chunks */
#define DELAY_BYTES ((size_t)256 << 20)

/* An allreduce of device buffers on an hcomm stream bound to a CUDA stream,
 * between CUDA work on that stream: the input is copied in after a delay of
 * memsets, the result copied out after the call. Run out of order, the call
 * would read the garbage written before, or the copy out read its input. */
static void cuda_stream_order(hcomm_comm_t comm)
{
    cudaStream_t   cs = NULL;
    hcomm_stream_t hs = NULL;
    int32_t       *d = dc_alloc(ORDER_N * sizeof(int32_t)), *in = NULL, *out = NULL;
    void          *slow = dc_alloc(DELAY_BYTES);
    if (d == NULL || slow == NULL || cudaStreamCreate(&cs) != cudaSuccess ||
        cudaMallocHost((void **)&in, ORDER_N * sizeof(int32_t)) != cudaSuccess ||
        cudaMallocHost((void **)&out, ORDER_N * sizeof(int32_t)) != cudaSuccess) {
        CHECK(0, "CUDA allocations for the stream order check failed");
        return;
    }
    hcomm_status_t st = hcomm_stream_create_cuda(cs, &hs);
    CHECK(st == HCOMM_SUCCESS, "hcomm_stream_create_cuda: %s", hcomm_status_str(st));
    for (int round = 0; round < 3 && st == HCOMM_SUCCESS; round++) {
        for (size_t i = 0; i < ORDER_N; i++)
            in[i] = (int32_t)(g_rank * 7 + round + (int)(i % 1009));
        cudaMemset(d, 0xff, ORDER_N * sizeof(int32_t));
        cudaDeviceSynchronize();
        for (int k = 0; k < 8; k++)
            cudaMemsetAsync(slow, k, DELAY_BYTES, cs);
        cudaMemcpyAsync(d, in, ORDER_N * sizeof(int32_t), cudaMemcpyHostToDevice, cs);
        st = hcomm_allreduce(d, d, ORDER_N, HCOMM_INT32, HCOMM_SUM, comm, hs);
        cudaMemcpyAsync(out, d, ORDER_N * sizeof(int32_t), cudaMemcpyDeviceToHost, cs);
        cudaError_t e = cudaStreamSynchronize(cs);
        if (st == HCOMM_SUCCESS)
            st = hcomm_stream_synchronize(hs);
        size_t bad = 0, first = 0;
        for (size_t i = 0; st == HCOMM_SUCCESS && i < ORDER_N; i++) {
            int64_t want = 0;
            for (int q = 0; q < g_nranks; q++)
                want += q * 7 + round + (int)(i % 1009);
            if (out[i] != (int32_t)want && bad++ == 0)
                first = i;
        }
        CHECK(st == HCOMM_SUCCESS && e == cudaSuccess && bad == 0,
              "allreduce of device memory on a CUDA stream, round %d: %s, CUDA %s, %zu wrong "
              "(first [%zu] = %d)",
              round, hcomm_status_str(st), cudaGetErrorString(e), bad, first, out[first]);
    }
    if (hs != NULL)
        hcomm_stream_destroy(hs);
    cudaStreamDestroy(cs);
    cudaFreeHost(in);
    cudaFreeHost(out);
    dc_free(d);
    dc_free(slow);
}

void dc_kind_checks(hcomm_comm_t comm)
{
    classified();
    cuda_stream_order(comm);
}

/* GB/s of one cudaMemcpyAsync of bytes from src to dst, 10 timed after 2. */
static double rate(void *dst, const void *src, size_t bytes, cudaStream_t s)
{
    cudaEvent_t a, b;
    float       ms = 0;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 12; i++) {
        if (i == 2)
            cudaEventRecord(a, s);
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
    }
    cudaEventRecord(b, s);
    if (cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
        ms = 0;
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms > 0 ? 10.0 * (double)bytes / (ms * 1e-3) * 1e-9 : 0;
}

void dc_copy_rates(size_t bytes)
{
    void        *d1 = dc_alloc(bytes), *d2 = dc_alloc(bytes), *pin = NULL, *page = malloc(bytes);
    cudaStream_t s = NULL;
    if (d1 == NULL || d2 == NULL || page == NULL || cudaStreamCreate(&s) != cudaSuccess ||
        cudaMallocHost(&pin, bytes) != cudaSuccess) {
        printf("copies of %zu bytes: allocation failed\n", bytes);
        return;
    }
    memset(page, 1, bytes);
    printf("cudaMemcpy of %zu bytes, GB/s (bytes copied per second): device-to-device %.1f, "
           "pinned host-to-device %.1f, pinned device-to-host %.1f, pageable host-to-device "
           "%.1f\n",
           bytes, rate(d2, d1, bytes, s), rate(d1, pin, bytes, s), rate(pin, d1, bytes, s),
           rate(d1, page, bytes, s));
    cudaStreamDestroy(s);
    cudaFreeHost(pin);
    free(page);
    dc_free(d1);
    dc_free(d2);
}
