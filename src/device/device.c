/* device.c - what the memory kinds share whatever the build: names, the
 * classification (the test kind first, then the build's own) and copies. */
#include "device/device.h"

#include <string.h>

#include "base/log.h"
#include "base/reduce.h"

const char *hc_mem_kind_name(hc_mem_kind_t kind)
{
    static const char *const names[HC_MEM_KIND_COUNT] = {"host", "cuda", "test"};
    return (unsigned)kind < HC_MEM_KIND_COUNT ? names[kind] : "unknown";
}

hc_mem_kind_t hc_mem_kind(const void *p)
{
    if (p == NULL)
        return HC_MEM_HOST;
    if (hc_mem_test_shadow(p) != NULL)
        return HC_MEM_TEST;
    return hc_mem_kind_native(p);
}

hcomm_status_t hc_mem_copy(void *dst, const void *src, size_t n)
{
    void       *d = hc_mem_test_shadow(dst);
    const void *s = hc_mem_test_shadow(src);
    d             = d != NULL ? d : dst;
    s             = s != NULL ? s : src;
    if (n == 0)
        return HCOMM_SUCCESS;
    if (hc_mem_kind_native(d) == HC_MEM_HOST && hc_mem_kind_native(s) == HC_MEM_HOST) {
        memcpy(d, s, n);
        return HCOMM_SUCCESS;
    }
    return hc_mem_copy_native(d, s, n);
}

hcomm_status_t hc_mem_host_only(const char *call, const void *p, size_t bytes)
{
    hc_mem_kind_t k = bytes != 0 && hc_mem_maybe_other() ? hc_mem_kind(p) : HC_MEM_HOST;
    if (k == HC_MEM_HOST)
        return HCOMM_SUCCESS;
    hc_error(COLL, "%s: buffer %p is %s memory; this call takes host memory only", call, p,
             hc_mem_kind_name(k));
    return HCOMM_ERR_UNSUPPORTED;
}

/* p, or its shadow where it is test memory. */
static void *mem_host_view(const void *p)
{
    void *s = hc_mem_test_shadow(p);
    return s != NULL ? s : (void *)p;
}

hcomm_status_t hc_mem_reduce(void *dst, const void *a, const void *b, size_t count,
                             hcomm_dtype_t dtype, hcomm_op_t op)
{
    void *d = mem_host_view(dst), *x = mem_host_view(a), *y = mem_host_view(b);
    if (hc_mem_kind_native(d) != HC_MEM_HOST)
        return hc_mem_reduce_native(d, x, y, count, dtype, op);
    hc_reduce(d, x, y, count, dtype, op);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_mem_reduce_div(void *buf, size_t count, hcomm_dtype_t dtype, int ranks)
{
    void *b = mem_host_view(buf);
    if (hc_mem_kind_native(b) != HC_MEM_HOST)
        return hc_mem_reduce_div_native(b, count, dtype, ranks);
    hc_reduce_div(b, count, dtype, ranks);
    return HCOMM_SUCCESS;
}
