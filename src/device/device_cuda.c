/* device_cuda.c - memory kinds where the build has CUDA: CUDA's own answer
 * (built into libhcomm_cuda with CUDA's headers). */
#include <cuda_runtime.h>

#include "device/device.h"

hc_mem_kind_t hc_mem_kind(const void *p)
{
    struct cudaPointerAttributes a;
    if (p == NULL)
        return HC_MEM_HOST;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* no device or driver: nothing is device memory */
        return HC_MEM_HOST;
    }
    return a.type == cudaMemoryTypeDevice ? HC_MEM_CUDA : HC_MEM_HOST;
}
