/* device_host.c - a build without CUDA: every buffer is host memory. */
#include "device/device.h"

#include <string.h>

hc_mem_kind_t hc_mem_kind_native(const void *p)
{
    (void)p;
    return HC_MEM_HOST;
}

hcomm_status_t hc_mem_copy_native(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
    return HCOMM_SUCCESS;
}
