/* device_host.c - a build without CUDA: every buffer is host memory. */
#include "device/device.h"

hc_mem_kind_t hc_mem_kind(const void *p)
{
    (void)p;
    return HC_MEM_HOST;
}
