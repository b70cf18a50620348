/* stream_cuda.c - what a CUDA stream needs (built when configure finds CUDA):
 * a host function on the cudaStream_t brackets each hcomm task, so the task
 * starts after the CUDA work queued before it and the CUDA work queued after
 * it waits until the task has finished (stream.c, stream_cuda_enter). The
 * runtime is loaded on first use (device/runtime_cuda.h). */
#include "base/log.h"
#include "device/runtime_cuda.h"
#include "overlap/overlap.h"

int hc_stream_cuda_available(const char **why)
{
    *why = hc_cudart_why();
    return hc_cudart() != NULL;
}

int hc_stream_cuda_bracket(void *cuda_stream, void (*fn)(void *), void *arg)
{
    const hc_cudart_t *rt = hc_cudart();
    cudaError_t        e  = rt->LaunchHostFunc((cudaStream_t)cuda_stream, fn, arg);
    if (e != cudaSuccess) {
        hc_error(STREAM, "cudaLaunchHostFunc on stream %p: %s", cuda_stream, rt->GetErrorString(e));
        return -1;
    }
    return 0;
}

int hc_cuda_stream_id(void *cuda_stream, unsigned long long *id, const char **why)
{
    const hc_cudart_t *rt = hc_cudart();
    if (rt == NULL) {
        *why = hc_cudart_why();
        return -1;
    }
#if CUDART_VERSION >= 12000
    cudaError_t e = rt->StreamGetId((cudaStream_t)cuda_stream, id);
#else /* no stream ids before CUDA 12: a reused handle goes unnoticed */
    int         prio;
    cudaError_t e = rt->StreamGetPriority((cudaStream_t)cuda_stream, &prio);
    *id           = 0;
#endif
    if (e != cudaSuccess) {
        *why = rt->GetErrorString(e);
        (void)rt->GetLastError();
        return -1;
    }
    return 0;
}
