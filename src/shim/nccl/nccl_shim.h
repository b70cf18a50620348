/* nccl_shim.h - what the files of the NCCL shim share: the communicator
 * wrapper, error recording and the NCCL -> hcomm mappings. */
#ifndef HC_SHIM_NCCL_H
#define HC_SHIM_NCCL_H

#include <stdint.h>

#include "core/comm.h"  /* struct hcomm_comm (an NCCL communicator is one) */
#include "core/group.h" /* groups */
#include "hcomm.h"
#include "nccl.h" /* NVIDIA's where configure found it, else include/nccl/nccl.h */

#ifndef NCCL_CONFIG_MAGIC /* hcomm's header names it; NVIDIA's writes 0xcafebeef */
#define NCCL_CONFIG_MAGIC 0xcafebeef
#endif

/* An NCCL communicator's frontend_state: tells the shim's communicators from
 * hcomm's own, and revoked ones, once the core's registry has vouched for
 * the handle (a destroyed or foreign one is never read). */
#define HC_NCCL_COMM_LIVE    0x6e63636cu /* "nccl" */
#define HC_NCCL_COMM_REVOKED 0x6e637276u /* "ncrv" */
#define HC_NCCL_MAX_PREMUL  64
#define HC_NCCL_MAX_STREAMS 16

/* One ncclRedOpCreatePreMulSum operator: sum after scaling by *scalar. */
typedef struct {
    int used;
    ncclDataType_t dtype;
    ncclScalarResidence_t residence;
    const void *scalar_ptr; /* read at each collective (ncclScalarDevice) */
    /* its bytes, read once (ncclScalarHostImmediate): integers scale in
     * their own type, exactly, which a double could not hold */
    unsigned char scalar[8];
} hc_nccl_premul_t;

/* An NCCL communicator of the shim is the hcomm communicator itself (never a
 * struct ncclComm): the handle converts to hcomm's without a load, which
 * measurably slowed small calls (perf/RESULTS.md, "No call layer"). What NCCL adds hangs off
 * the front-end fields hcomm keeps for it (core/comm.h): frontend_state is
 * HC_NCCL_COMM_LIVE or _REVOKED, frontend points to an hc_nccl_ext_t. */
/* The hcomm stream bound to a CUDA stream that calls named (nccl_stream.c). */
typedef struct {
    void              *cuda; /* the cudaStream_t */
    unsigned long long id;   /* cudaStreamGetId: a destroyed stream's handle is reused */
    hcomm_stream_t     hs;
} hc_nccl_stream_t;

/* One ncclCommRegister: its handle is this, so that a deregistration of an
 * unknown handle is refused, not freed. */
typedef struct hc_nccl_reg {
    struct hc_nccl_reg *next;
} hc_nccl_reg_t;

typedef struct {
    hc_nccl_premul_t     premul[HC_NCCL_MAX_PREMUL];
    hc_nccl_reg_t       *regs; /* the live registrations */
    hc_nccl_stream_t     streams[HC_NCCL_MAX_STREAMS];
    int                  nstreams;
    struct hc_nccl_prof *prof; /* the profiler plugin's context (nccl_profiler.c) */
} hc_nccl_ext_t;

static inline hcomm_comm_t hc_of(ncclComm_t comm)
{
    return (hcomm_comm_t)(void *)comm;
}

static inline hc_nccl_ext_t *hc_nccl_ext(ncclComm_t comm)
{
    return (hc_nccl_ext_t *)hc_of(comm)->frontend;
}

/* hcomm's datatypes and reductions have NCCL's values (hcomm.h), so NCCL's
 * pass to hcomm unchanged; the fp8 types (10, 11) have no hcomm type. */
_Static_assert(HCOMM_INT8 == (int)ncclInt8 && HCOMM_UINT8 == (int)ncclUint8 &&
                   HCOMM_INT32 == (int)ncclInt32 && HCOMM_UINT32 == (int)ncclUint32 &&
                   HCOMM_INT64 == (int)ncclInt64 && HCOMM_UINT64 == (int)ncclUint64 &&
                   HCOMM_FLOAT16 == (int)ncclFloat16 && HCOMM_FLOAT32 == (int)ncclFloat32 &&
                   HCOMM_FLOAT64 == (int)ncclFloat64 && HCOMM_BFLOAT16 == (int)ncclBfloat16 &&
                   HCOMM_DTYPE_COUNT == (int)ncclBfloat16 + 1,
               "hcomm_dtype_t must have ncclDataType_t's values");
_Static_assert(HCOMM_SUM == (int)ncclSum && HCOMM_PROD == (int)ncclProd &&
                   HCOMM_MAX == (int)ncclMax && HCOMM_MIN == (int)ncclMin &&
                   HCOMM_AVG == (int)ncclAvg && HCOMM_OP_COUNT == (int)ncclNumOps,
               "hcomm_op_t must have ncclRedOp_t's built-in values");

/* hcomm's implementation of each NCCL function (nccl_api.def), with NCCL's
 * exact type: libhcomm exports them, libnccl.so.2 binds NCCL's names to them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* ncclResetDebugInit */
#define HC_NCCL_API(name) extern __typeof__(nccl##name) hcomm_nccl_##name;
#include "nccl_api.def"
#undef HC_NCCL_API
#pragma GCC diagnostic pop

/* Records msg as the thread's last error and logs it; returns res. */
ncclResult_t hc_nccl_fail(ncclResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* As NCCL's, only a failed enqueue (collective, send, receive) or
 * communicator creation fails the thread's open group (ncclGroupEnd then
 * runs none of its calls); a failed query leaves it be. Returns res. */
ncclResult_t hc_nccl_group_fail(ncclResult_t res);
/* The failure paths of the checks below: record why, return the NCCL code. */
ncclResult_t hc_nccl_status_fail(hcomm_status_t st, const char *what);
ncclResult_t hc_nccl_bad_comm(ncclComm_t comm, const char *what);
ncclResult_t hc_nccl_bad_dtype(ncclDataType_t dt);
/* Why a call on comm with datatype dt is invalid (never ncclSuccess). */
ncclResult_t hc_nccl_check_failed(ncclComm_t comm, ncclDataType_t dt, const char *what);

/* ncclCommInitRank(Config) outside a group (nccl_shim.c). */
ncclResult_t hc_nccl_init_rank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                               const ncclConfig_t *config);
/* Inside one: queued (nccl_group_init.c) and run, one thread each, by the
 * outermost ncclGroupEnd (hc_nccl_init_run: the first failure, every
 * communicator of the group aborted then), or dropped with the group. */
ncclResult_t hc_nccl_init_defer(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                const ncclConfig_t *config);
ncclResult_t hc_nccl_init_run(void);
void         hc_nccl_init_drop(void);

/* The hcomm stream for a call on a CUDA stream, made at the first call that
 * names it (nccl_stream.c). */
ncclResult_t hc_nccl_stream(ncclComm_t comm, cudaStream_t stream, hcomm_stream_t *hs,
                            const char *what);
/* Destroys those streams, after their queued work (before the communicator). */
void hc_nccl_streams_destroy(ncclComm_t comm);
/* The profiler plugin (nccl_profiler.c): loaded at the first communicator;
 * its context for comm (name: the config's commName, or NULL); its finalize,
 * once the communicator is drained and destroyed. */
void hc_nccl_prof_comm_init(ncclComm_t comm, const char *name);
void hc_nccl_prof_comm_fini(hc_nccl_ext_t *ext);

/* The checks every call makes are inline, so that a valid call costs the shim
 * a few compares (perf/shim_overhead) and only failures leave the fast path. */

/* Maps an hcomm status, recording what failed in `what` when it is an error. */
static inline ncclResult_t hc_nccl_status(hcomm_status_t st, const char *what)
{
    if (__builtin_expect(st != HCOMM_SUCCESS, 0))
        return hc_nccl_status_fail(st, what);
    return (ncclResult_t)st; /* ncclSuccess, and already in the return register */
}

/* The result of a call on the enqueue path (hc_nccl_group_fail). */
static inline ncclResult_t hc_nccl_enq(ncclResult_t res)
{
    if (__builtin_expect(res != ncclSuccess, 0))
        return hc_nccl_group_fail(res);
    return res;
}

static inline ncclResult_t hc_nccl_enq_status(hcomm_status_t st, const char *what)
{
    if (__builtin_expect(st != HCOMM_SUCCESS, 0))
        return hc_nccl_group_fail(hc_nccl_status_fail(st, what));
    return (ncclResult_t)st;
}

/* A communicator made by the shim and not revoked. The core's registry
 * first, so that a destroyed or foreign handle is never read: inline, a
 * thread-local compare and a load while no communicator was made or
 * destroyed since this thread last found it (core/handles.h). */
static inline int hc_nccl_comm_live(ncclComm_t comm)
{
    return hc_comm_is_live(hc_of(comm)) &&
           __atomic_load_n(&hc_of(comm)->frontend_state, __ATOMIC_RELAXED) == HC_NCCL_COMM_LIVE;
}

/* A communicator made by the shim, revoked or not. */
static inline int hc_nccl_comm_ours(ncclComm_t comm)
{
    if (!hc_comm_is_live(hc_of(comm)))
        return 0;
    uint32_t state = __atomic_load_n(&hc_of(comm)->frontend_state, __ATOMIC_RELAXED);
    return state == HC_NCCL_COMM_LIVE || state == HC_NCCL_COMM_REVOKED;
}

/* Validates a communicator handle (not revoked). */
static inline ncclResult_t hc_nccl_check_comm(ncclComm_t comm, const char *what)
{
    if (__builtin_expect(hc_nccl_comm_live(comm), 1))
        return ncclSuccess;
    return hc_nccl_bad_comm(comm, what);
}

/* A live communicator and a datatype hcomm has: what every call checks. */
static inline int hc_nccl_args_ok(ncclComm_t comm, ncclDataType_t dt)
{
    return hc_nccl_comm_live(comm) && (unsigned)dt < HCOMM_DTYPE_COUNT;
}

/* The same for the plain calls (nccl_coll.c) with the registry's inline half
 * only: comm is the communicator this thread last found live, and none was
 * made or destroyed since (a NULL comm never is: the cache is only set to a
 * live one). Tested without calls, so that the shim's path to hcomm needs no
 * frame (the search's call, even off that path, cost 25 instructions of
 * saved registers); a miss takes the checked path, whose search fills the
 * cache for the next call. */
static inline int hc_nccl_args_fast(ncclComm_t comm, ncclDataType_t dt)
{
    return hc_of(comm) == hc_registry_last &&
           __atomic_load_n(&hc_registry_gen, __ATOMIC_SEQ_CST) == hc_registry_last_gen &&
           __atomic_load_n(&hc_of(comm)->frontend_state, __ATOMIC_RELAXED) == HC_NCCL_COMM_LIVE &&
           (unsigned)dt < HCOMM_DTYPE_COUNT;
}

static inline ncclResult_t hc_nccl_dtype(ncclDataType_t dt, hcomm_dtype_t *out)
{
    if (__builtin_expect((unsigned)dt >= HCOMM_DTYPE_COUNT, 0))
        return hc_nccl_bad_dtype(dt);
    *out = (hcomm_dtype_t)dt;
    return ncclSuccess;
}

/* Frees the calling thread's temporaries once its outermost group ended. */
void hc_nccl_temps_release(void);

/* Makes NCCL_* variables stand in for HCOMM_* ones (nccl_params.c): called by
 * libnccl.so.2 when it is loaded, so that only programs on the NCCL API get
 * them. */
void hcomm_nccl_env_enable(void);

#endif
