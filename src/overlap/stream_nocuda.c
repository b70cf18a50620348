/* stream_nocuda.c - a build without CUDA: hcomm_stream_create_cuda says so. */
#include "overlap/overlap.h"

int hc_stream_cuda_available(const char **why)
{
    *why = "this hcomm was built without CUDA";
    return 0;
}

int hc_stream_cuda_bracket(void *cuda_stream, void (*fn)(void *), void *arg)
{
    (void)cuda_stream, (void)fn, (void)arg;
    return -1;
}

int hc_cuda_stream_id(void *cuda_stream, unsigned long long *id, const char **why)
{
    (void)cuda_stream, (void)id;
    *why = "this hcomm was built without CUDA";
    return -1;
}
