/* torch_shim.c - faults for torch_shim.py, preloaded (LD_PRELOAD) into the
 * Python that runs it, in front of libhcomm; armed through ctypes:
 *  shim_fail_host_func(n): the calling thread's next n hcomm_launch_host_func
 *    calls fail with HCOMM_ERR_NO_MEMORY, as they do out of memory;
 *  shim_revoke_after_test(): the next hcomm_test that finds a request done
 *    (in any thread) then revokes the communicator of the last
 *    hcomm_allreduce_compressed: as if another operation had failed it just
 *    after that request ended.
 * libhcomm's own functions are looked up at the call, in the libhcomm
 * already loaded: Python loads it with hcomm_torch's _C.so, in a local scope
 * that RTLD_NEXT does not search. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT, RTLD_NOLOAD */
#endif
#include <dlfcn.h>

#include "hcomm.h"
#include "hcomm_compress.h"
#include "hcomm_stream.h"

static __thread int fail_host_func;
static int          revoke_armed;
static hcomm_comm_t compressed_comm;

void shim_fail_host_func(int n);
void shim_revoke_after_test(void);

void shim_fail_host_func(int n)
{
    fail_host_func = n;
}

void shim_revoke_after_test(void)
{
    __atomic_store_n(&revoke_armed, 1, __ATOMIC_SEQ_CST);
}

static void *next(const char *name)
{
    void *lib = dlopen("libhcomm.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *fn  = lib != NULL ? dlsym(lib, name) : dlsym(RTLD_NEXT, name);
    if (lib != NULL)
        dlclose(lib);
    return fn;
}

hcomm_status_t hcomm_launch_host_func(hcomm_stream_t stream, hcomm_host_fn_t fn, void *arg)
{
    if (fail_host_func > 0) {
        fail_host_func--;
        return HCOMM_ERR_NO_MEMORY;
    }
    hcomm_status_t (*real)(hcomm_stream_t, hcomm_host_fn_t, void *) =
        (hcomm_status_t(*)(hcomm_stream_t, hcomm_host_fn_t, void *))next("hcomm_launch_host_func");
    return real(stream, fn, arg);
}

hcomm_status_t hcomm_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count,
                                          hcomm_dtype_t dtype, hcomm_compress_t state,
                                          hcomm_comm_t comm, hcomm_stream_t stream)
{
    hcomm_status_t (*real)(const void *, void *, size_t, hcomm_dtype_t, hcomm_compress_t,
                           hcomm_comm_t, hcomm_stream_t) =
        (hcomm_status_t(*)(const void *, void *, size_t, hcomm_dtype_t, hcomm_compress_t,
                           hcomm_comm_t, hcomm_stream_t))next("hcomm_allreduce_compressed");
    __atomic_store_n(&compressed_comm, comm, __ATOMIC_SEQ_CST);
    return real(sendbuf, recvbuf, count, dtype, state, comm, stream);
}

hcomm_status_t hcomm_test(hcomm_request_t *req, int *done)
{
    hcomm_status_t (*real)(hcomm_request_t *, int *) =
        (hcomm_status_t(*)(hcomm_request_t *, int *))next("hcomm_test");
    hcomm_status_t st = real(req, done);
    if (*done && __atomic_exchange_n(&revoke_armed, 0, __ATOMIC_SEQ_CST)) {
        hcomm_status_t (*revoke)(hcomm_comm_t) =
            (hcomm_status_t(*)(hcomm_comm_t))next("hcomm_comm_revoke");
        revoke(__atomic_load_n(&compressed_comm, __ATOMIC_SEQ_CST));
    }
    return st;
}
