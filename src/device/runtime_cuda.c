/* runtime_cuda.c - loading the CUDA runtime (runtime_cuda.h): the toolkit's
 * copy that configure found first, then whatever the loader finds under the
 * soname of the headers' major version. */
#include "device/runtime_cuda.h"

#include <pthread.h>
#include <stdio.h>

#include "base/dl.h"
#include "base/log.h"

static hc_cudart_t    rt;
static int            rt_ok;
static char           rt_why[512];
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

static void cudart_load(void)
{
    static const char *const names[] = {
        "cudaGetDeviceCount",
        "cudaGetErrorString",
        "cudaGetLastError",
        "cudaLaunchHostFunc",
        "cudaMemcpyAsync",
        "cudaPointerGetAttributes",
        "cudaStreamGetPriority",
        "cudaStreamCreateWithFlags",
        "cudaStreamSynchronize",
        "cudaHostRegister",
        "cudaHostUnregister",
        "cudaMalloc",
        "cudaFree",
#if CUDART_VERSION >= 12000
        "cudaStreamGetId",
        "cudaLibraryLoadData",
        "cudaLibraryGetKernel",
        "cudaLaunchKernel",
#endif
    };
    void **const slots[] = {
        (void **)&rt.GetDeviceCount,
        (void **)&rt.GetErrorString,
        (void **)&rt.GetLastError,
        (void **)&rt.LaunchHostFunc,
        (void **)&rt.MemcpyAsync,
        (void **)&rt.PointerGetAttributes,
        (void **)&rt.StreamGetPriority,
        (void **)&rt.StreamCreateWithFlags,
        (void **)&rt.StreamSynchronize,
        (void **)&rt.HostRegister,
        (void **)&rt.HostUnregister,
        (void **)&rt.Malloc,
        (void **)&rt.Free,
#if CUDART_VERSION >= 12000
        (void **)&rt.StreamGetId,
        (void **)&rt.LibraryLoadData,
        (void **)&rt.LibraryGetKernel,
        (void **)&rt.LaunchKernel,
#endif
    };
    char soname[64], path[512];
    snprintf(soname, sizeof(soname), "libcudart.so.%d", CUDART_VERSION / 1000);
    snprintf(path, sizeof(path), "%s/lib64/%s", HC_CUDA_DIR, soname);
    const char *tries[] = {path, soname};
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]) && !rt_ok; i++)
        rt_ok = hc_dl_load(tries[i], names, slots, sizeof(names) / sizeof(names[0]), rt_why,
                           sizeof(rt_why)) == 0;
    if (!rt_ok)
        hc_info(INIT, "CUDA runtime: %s; CUDA memory and streams are not available", rt_why);
}

const hc_cudart_t *hc_cudart(void)
{
    pthread_once(&rt_once, cudart_load);
    return rt_ok ? &rt : NULL;
}

const char *hc_cudart_why(void)
{
    pthread_once(&rt_once, cudart_load);
    return rt_ok ? "" : rt_why;
}

cudaError_t hc_cuda_thread_stream(const hc_cudart_t *r, cudaStream_t *s)
{
    static __thread cudaStream_t mine;
    cudaError_t                  e = cudaSuccess;
    if (mine == NULL)
        e = r->StreamCreateWithFlags(&mine, cudaStreamNonBlocking);
    *s = mine;
    return e;
}
