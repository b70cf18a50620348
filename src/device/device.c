/* device.c - what the memory kinds share whatever the build. */
#include "device/device.h"

const char *hc_mem_kind_name(hc_mem_kind_t kind)
{
    static const char *const names[HC_MEM_KIND_COUNT] = {"host", "cuda"};
    return (unsigned)kind < HC_MEM_KIND_COUNT ? names[kind] : "unknown";
}
