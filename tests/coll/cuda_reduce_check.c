/*
 * cuda_reduce_check - the device reductions (src/device/reduce_cuda.cu)
 * against the host kernels (base/reduce.c) for every dtype and op and the
 * avg's division, on random bit patterns (NaNs, infinities and wrapping
 * integers included) at an odd count. Where no GPU answers, prints "SKIP:"
 * and why and exits 77. Exit: 0 all equal, 1 a difference, 2 setup failure.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/reduce.h"
#include "device/device.h"

#define COUNT 100003

/* Whether element i of x and y (es bytes each) agree: equal bits, or both a
 * NaN of the float dtype (their payloads may differ). */
static int same(hcomm_dtype_t dt, const unsigned char *x, const unsigned char *y, size_t i,
                size_t es)
{
    if (memcmp(x + i * es, y + i * es, es) == 0)
        return 1;
    if (dt == HCOMM_FLOAT32) {
        float a, b;
        memcpy(&a, x + i * es, 4), memcpy(&b, y + i * es, 4);
        return a != a && b != b;
    }
    if (dt == HCOMM_FLOAT64) {
        double a, b;
        memcpy(&a, x + i * es, 8), memcpy(&b, y + i * es, 8);
        return a != a && b != b;
    }
    if (dt == HCOMM_FLOAT16 || dt == HCOMM_BFLOAT16) {
        uint16_t a, b;
        memcpy(&a, x + i * es, 2), memcpy(&b, y + i * es, 2);
        float fa = dt == HCOMM_FLOAT16 ? hc_half_to_float(a) : hc_bf16_to_float(a);
        float fb = dt == HCOMM_FLOAT16 ? hc_half_to_float(b) : hc_bf16_to_float(b);
        return fa != fa && fb != fb;
    }
    return 0;
}

int main(void)
{
    int         ndev = 0;
    cudaError_t e    = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable GPU (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    size_t         max = COUNT * 8;
    unsigned char *a = malloc(max), *b = malloc(max), *want = malloc(max), *got = malloc(max);
    void          *da, *db, *dd;
    if (a == NULL || b == NULL || want == NULL || got == NULL ||
        cudaMalloc(&da, max) != cudaSuccess || cudaMalloc(&db, max) != cudaSuccess ||
        cudaMalloc(&dd, max) != cudaSuccess) {
        printf("cuda_reduce_check: out of memory\n");
        return 2;
    }
    srand(7);
    for (size_t i = 0; i < max; i++)
        a[i] = (unsigned char)rand(), b[i] = (unsigned char)rand();
    int bad = 0, checks = 0;
    for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++) {
        size_t es = hcomm_dtype_size((hcomm_dtype_t)dt);
        for (int op = 0; op <= HCOMM_OP_COUNT; op++) { /* HCOMM_OP_COUNT: the division */
            hcomm_status_t st;
            cudaMemcpy(da, a, COUNT * es, cudaMemcpyHostToDevice);
            cudaMemcpy(db, b, COUNT * es, cudaMemcpyHostToDevice);
            memcpy(want, a, COUNT * es);
            if (op == HCOMM_OP_COUNT) {
                hc_reduce_div(want, COUNT, (hcomm_dtype_t)dt, 3);
                st = hc_mem_reduce_div(da, COUNT, (hcomm_dtype_t)dt, 3);
                cudaMemcpy(got, da, COUNT * es, cudaMemcpyDeviceToHost);
            } else {
                hc_reduce(want, a, b, COUNT, (hcomm_dtype_t)dt, (hcomm_op_t)op);
                st = hc_mem_reduce(dd, da, db, COUNT, (hcomm_dtype_t)dt, (hcomm_op_t)op);
                cudaMemcpy(got, dd, COUNT * es, cudaMemcpyDeviceToHost);
            }
            size_t diff = 0, first = 0;
            for (size_t i = 0; st == HCOMM_SUCCESS && i < COUNT; i++)
                if (!same((hcomm_dtype_t)dt, want, got, i, es) && diff++ == 0)
                    first = i;
            checks++;
            if (st != HCOMM_SUCCESS || diff != 0) {
                bad++;
                printf("FAIL dtype %d op %d: %s, %zu of %d differ (first %zu)\n", dt, op,
                       hcomm_status_str(st), diff, COUNT, first);
            }
        }
    }
    printf("cuda_reduce_check: %d of %d dtype/op pairs agree with the host kernels\n", checks - bad,
           checks);
    return bad != 0;
}
