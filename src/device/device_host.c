/* device_host.c - a build without CUDA: every buffer is host memory. */
#include "device/device.h"

#include <string.h>

int hc_mem_native_devices = 0; /* device.h */

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

int hc_mem_host_pin(void *p, size_t n)
{
    (void)p, (void)n;
    return 0;
}

void hc_mem_host_unpin(void *p)
{
    (void)p;
}

hcomm_status_t hc_mem_reduce_native(void *dst, const void *a, const void *b, size_t count,
                                    hcomm_dtype_t dtype, hcomm_op_t op)
{
    (void)dst, (void)a, (void)b, (void)count, (void)dtype, (void)op;
    return HCOMM_ERR_UNSUPPORTED; /* no kind but host here: never reached */
}

hcomm_status_t hc_mem_reduce_div_native(void *buf, size_t count, hcomm_dtype_t dtype, int ranks)
{
    (void)buf, (void)count, (void)dtype, (void)ranks;
    return HCOMM_ERR_UNSUPPORTED;
}

hcomm_status_t hc_mem_device_alloc(void **p, size_t n)
{
    (void)n;
    *p = NULL;
    return HCOMM_ERR_UNSUPPORTED;
}

void hc_mem_device_free(void *p)
{
    (void)p;
}
