/* stream_cuda.c - what a CUDA stream needs (built when configure finds CUDA):
 * a host function on the cudaStream_t brackets each hcomm task, so the task
 * starts after the CUDA work queued before it and the CUDA work queued after
 * it waits until the task has finished (stream.c, stream_cuda_enter). */
#include <cuda_runtime.h>

#include "base/log.h"
#include "overlap/overlap.h"

int hc_stream_cuda_available(void)
{
    return 1;
}

int hc_stream_cuda_bracket(void *cuda_stream, void (*fn)(void *), void *arg)
{
    cudaError_t e = cudaLaunchHostFunc((cudaStream_t)cuda_stream, fn, arg);
    if (e != cudaSuccess) {
        hc_error(STREAM, "cudaLaunchHostFunc on stream %p: %s", cuda_stream, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int hc_cuda_stream_id(void *cuda_stream, unsigned long long *id, const char **why)
{
#if CUDART_VERSION >= 12000
    cudaError_t e = cudaStreamGetId((cudaStream_t)cuda_stream, id);
#else /* no stream ids before CUDA 12: a reused handle goes unnoticed */
    int         prio;
    cudaError_t e = cudaStreamGetPriority((cudaStream_t)cuda_stream, &prio);
    *id           = 0;
#endif
    if (e != cudaSuccess) {
        *why = cudaGetErrorString(e);
        (void)cudaGetLastError();
        return -1;
    }
    return 0;
}
