/* nccl_names.c - libnccl.so.2: NCCL's function names and nothing else.
 *
 * Each name, and its pncclXxx profiling twin, is a GNU indirect function: the
 * dynamic loader asks its resolver once, at binding, for the address to call
 * and gets hcomm's implementation in libhcomm (hcomm_nccl_Xxx, nccl_shim.c and
 * nccl_coll.c). An application's ncclAllReduce thus calls into hcomm as
 * directly as its hcomm_allreduce does, with no wrapper between; wrappers
 * here made an 8-byte allreduce 2.7-4.3% slower on one rank (perf/RESULTS.md,
 * "No call layer"). The resolvers only read an address the loader
 * already bound (libhcomm is loaded and this library relocated before any
 * reference to these names is), and nothing in this library calls these
 * names itself, so no resolver runs before its own relocation. Its one
 * constructor makes NCCL_* variables stand in for HCOMM_* ones: libhcomm's
 * constructors have run by then, and it reads no parameter before the first
 * call. */
#include "nccl_shim.h"

__attribute__((constructor)) static void nccl_names_env(void)
{
    hcomm_nccl_env_enable();
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* ncclResetDebugInit */
/* A resolver runs while the loader binds, before a sanitizer's runtime is up:
 * it must not be instrumented. */
#define HC_NCCL_API(name)                                                                          \
    __attribute__((                                                                                \
        no_sanitize("thread", "address",                                                           \
                    "undefined"))) static __typeof__(hcomm_nccl_##name) *resolve_##name(void)      \
    {                                                                                              \
        return hcomm_nccl_##name;                                                                  \
    }                                                                                              \
    extern __typeof__(hcomm_nccl_##name) nccl##name __attribute__((ifunc("resolve_" #name)));      \
    extern __typeof__(hcomm_nccl_##name) pnccl##name __attribute__((ifunc("resolve_" #name)));
#include "nccl_api.def"
#pragma GCC diagnostic pop
