/* device_cuda.c - memory kinds where the build has CUDA: CUDA's own answer,
 * through the runtime loaded on first use (runtime_cuda.h). A process that finds
 * no runtime or no device asks once, so host buffers cost one load a call. */
#include <pthread.h>

#include "base/log.h"
#include "device/device.h"
#include "device/runtime_cuda.h"

int                   hc_mem_native_devices = -1; /* -1: not asked yet (device.h) */
static pthread_once_t cuda_once             = PTHREAD_ONCE_INIT;

static void cuda_count(void)
{
    const hc_cudart_t *rt = hc_cudart();
    int                n  = 0;
    if (rt != NULL && rt->GetDeviceCount(&n) != cudaSuccess) {
        (void)rt->GetLastError(); /* no device or driver: nothing is device memory */
        n = 0;
    }
    __atomic_store_n(&hc_mem_native_devices, n, __ATOMIC_RELEASE);
}

hc_mem_kind_t hc_mem_kind_native(const void *p)
{
    struct cudaPointerAttributes a;
    if (p == NULL)
        return HC_MEM_HOST;
    if (__atomic_load_n(&hc_mem_native_devices, __ATOMIC_ACQUIRE) < 0)
        pthread_once(&cuda_once, cuda_count);
    if (__atomic_load_n(&hc_mem_native_devices, __ATOMIC_RELAXED) == 0)
        return HC_MEM_HOST;
    const hc_cudart_t *rt = hc_cudart();
    if (rt->PointerGetAttributes(&a, p) != cudaSuccess) {
        (void)rt->GetLastError();
        return HC_MEM_HOST;
    }
    return a.type == cudaMemoryTypeDevice ? HC_MEM_CUDA : HC_MEM_HOST;
}

hcomm_status_t hc_mem_copy_native(void *dst, const void *src, size_t n)
{
    const hc_cudart_t *rt          = hc_cudart(); /* only device memory comes here: loaded */
    cudaStream_t       copy_stream = NULL;
    cudaError_t        e = rt != NULL ? hc_cuda_thread_stream(rt, &copy_stream) : cudaSuccess;
    if (rt != NULL && e == cudaSuccess)
        e = rt->MemcpyAsync(dst, src, n, cudaMemcpyDefault, copy_stream);
    if (rt != NULL && e == cudaSuccess)
        e = rt->StreamSynchronize(copy_stream);
    if (rt == NULL || e != cudaSuccess) {
        hc_error(COLL, "copying %zu bytes between device and host: %s", n,
                 rt != NULL ? rt->GetErrorString(e) : hc_cudart_why());
        return HCOMM_ERR_SYSTEM;
    }
    return HCOMM_SUCCESS;
}

int hc_mem_host_pin(void *p, size_t n)
{
    const hc_cudart_t *rt = hc_cudart();
    if (rt == NULL || __atomic_load_n(&hc_mem_native_devices, __ATOMIC_ACQUIRE) <= 0)
        return 0;
    cudaError_t e = rt->HostRegister(p, n, cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        hc_debug(COLL, "pinning %zu bytes of host copies: %s; they stay pageable", n,
                 rt->GetErrorString(e));
        (void)rt->GetLastError();
        return 0;
    }
    return 1;
}

void hc_mem_host_unpin(void *p)
{
    const hc_cudart_t *rt = hc_cudart();
    if (rt != NULL && rt->HostUnregister(p) != cudaSuccess)
        (void)rt->GetLastError();
}

hcomm_status_t hc_mem_device_alloc(void **p, size_t n)
{
    *p = NULL;
    if (__atomic_load_n(&hc_mem_native_devices, __ATOMIC_ACQUIRE) < 0)
        pthread_once(&cuda_once, cuda_count);
    if (__atomic_load_n(&hc_mem_native_devices, __ATOMIC_RELAXED) == 0)
        return HCOMM_ERR_UNSUPPORTED;
    const hc_cudart_t *rt = hc_cudart();
    cudaError_t        e  = rt->Malloc(p, n);
    if (e != cudaSuccess) {
        hc_error(COLL, "allocating %zu bytes of device memory: %s", n, rt->GetErrorString(e));
        (void)rt->GetLastError();
        *p = NULL;
        return HCOMM_ERR_NO_MEMORY;
    }
    return HCOMM_SUCCESS;
}

void hc_mem_device_free(void *p)
{
    const hc_cudart_t *rt = hc_cudart();
    if (p != NULL && rt != NULL && rt->Free(p) != cudaSuccess)
        (void)rt->GetLastError();
}
