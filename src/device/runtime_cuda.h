/* runtime_cuda.h - the CUDA runtime, loaded on first use (dlopen) rather than
 * linked: a build with CUDA then runs where libcudart or the driver is
 * missing, and processes that never meet CUDA memory or streams do not pay
 * for loading it. Only files built with CUDA's headers include this. */
#ifndef HC_DEVICE_RUNTIME_CUDA_H
#define HC_DEVICE_RUNTIME_CUDA_H

#include <cuda_runtime.h>

typedef struct hc_cudart {
    cudaError_t (*GetDeviceCount)(int *count);
    const char *(*GetErrorString)(cudaError_t e);
    cudaError_t (*GetLastError)(void);
    cudaError_t (*LaunchHostFunc)(cudaStream_t s, cudaHostFn_t fn, void *arg);
    cudaError_t (*MemcpyAsync)(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                               cudaStream_t s);
    cudaError_t (*PointerGetAttributes)(struct cudaPointerAttributes *a, const void *p);
    cudaError_t (*StreamGetPriority)(cudaStream_t s, int *prio);
    cudaError_t (*StreamCreateWithFlags)(cudaStream_t *s, unsigned flags);
    cudaError_t (*StreamSynchronize)(cudaStream_t s);
    cudaError_t (*HostRegister)(void *p, size_t n, unsigned flags);
    cudaError_t (*HostUnregister)(void *p);
    cudaError_t (*Malloc)(void **p, size_t n);
    cudaError_t (*Free)(void *p);
#if CUDART_VERSION >= 12000
    cudaError_t (*StreamGetId)(cudaStream_t s, unsigned long long *id);
    cudaError_t (*LibraryLoadData)(cudaLibrary_t *lib, const void *code, enum cudaJitOption *jo,
                                   void **jv, unsigned njo, enum cudaLibraryOption *lo, void **lv,
                                   unsigned nlo);
    cudaError_t (*LibraryGetKernel)(cudaKernel_t *k, cudaLibrary_t lib, const char *name);
    cudaError_t (*LaunchKernel)(const void *fn, dim3 grid, dim3 block, void **args, size_t shmem,
                                cudaStream_t s);
#endif
} hc_cudart_t;

/* The runtime's functions; NULL when it cannot be loaded (said once, at
 * info level: a host without CUDA is not an error until CUDA is asked for). */
const hc_cudart_t *hc_cudart(void);

/* Why hc_cudart() is NULL. */
const char *hc_cudart_why(void);

/* The calling thread's stream for hcomm's copies and kernels: never the
 * legacy default stream, which waits for every blocking stream, among them a
 * CUDA stream that an hcomm stream holds in a host function while this work
 * runs (overlap/stream.c). Made on first use; cudaSuccess or CUDA's error. */
cudaError_t hc_cuda_thread_stream(const hc_cudart_t *rt, cudaStream_t *s);

#endif
