/* nccl_shim.c - the NCCL 2.28 API on hcomm: errors, versions, communicators,
 * groups and memory. Collectives are in nccl_coll.c. The shim maps calls and
 * codes; it adds no behaviour of its own. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api_split.h"
#include "base/clock.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "device/device.h"
#include "hcomm_nccl.h"
#include "hcomm_stream.h"
#include "nccl_shim.h"
#include "overlap/overlap.h" /* hc_stream_forget_comm */

static __thread char last_error[512];
/* The first failed enqueue inside the thread's open group, and its message
 * (a later query's failure replaces last_error): as NCCL's, ncclGroupEnd then
 * returns it and runs none of the group's calls. */
static __thread ncclResult_t group_error;
static __thread char         group_why[sizeof(last_error)];

ncclResult_t hc_nccl_fail(ncclResult_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    hc_warn(INIT, "nccl shim: %s", last_error);
    return res;
}

ncclResult_t hc_nccl_group_fail(ncclResult_t res)
{
    if (res != ncclSuccess && hc_group_active() && group_error == ncclSuccess) {
        group_error = res;
        memcpy(group_why, last_error, sizeof(group_why));
    }
    return res;
}

static ncclResult_t map_status(hcomm_status_t st)
{
    switch (st) {
    case HCOMM_SUCCESS: return ncclSuccess;
    case HCOMM_IN_PROGRESS: return ncclInProgress;
    case HCOMM_ERR_INVALID_USAGE:
    case HCOMM_ERR_REVOKED:
    case HCOMM_ERR_UNSUPPORTED: return ncclInvalidUsage;
    case HCOMM_ERR_NO_MEMORY:
    case HCOMM_ERR_SYSTEM:
    case HCOMM_ERR_IO:
    case HCOMM_ERR_TIMEOUT: return ncclSystemError;
    case HCOMM_ERR_REMOTE:
    case HCOMM_ERR_UNREACHABLE:
    case HCOMM_ERR_AUTH:
    case HCOMM_ERR_ABORTED:
    case HCOMM_ERR_PROTOCOL: return ncclRemoteError;
    case HCOMM_ERR_INVALID_ARG:
    case HCOMM_ERR_NULL_BUFFER:
    case HCOMM_ERR_INVALID_DTYPE:
    case HCOMM_ERR_INVALID_OP:
    case HCOMM_ERR_INVALID_RANK:
    case HCOMM_ERR_OVERFLOW:
    case HCOMM_ERR_INVALID_COMM: return ncclInvalidArgument;
    default: return ncclInternalError;
    }
}

ncclResult_t hc_nccl_status_fail(hcomm_status_t st, const char *what)
{
    return hc_nccl_fail(map_status(st), "%s: %s (%s)", what, hcomm_status_str(st),
                        hcomm_status_name(st));
}

ncclResult_t hc_nccl_bad_comm(ncclComm_t comm, const char *what)
{
    if (!hc_nccl_comm_ours(comm))
        return hc_nccl_fail(ncclInvalidArgument, "%s: invalid communicator", what);
    return hc_nccl_fail(ncclInvalidUsage, "%s: communicator was revoked", what);
}

ncclResult_t hc_nccl_bad_dtype(ncclDataType_t dt)
{
    if (dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2)
        return hc_nccl_fail(ncclInvalidArgument, "fp8 datatypes (%d) are not supported by hcomm",
                            (int)dt);
    return hc_nccl_fail(ncclInvalidArgument, "invalid datatype %d", (int)dt);
}

ncclResult_t hc_nccl_check_failed(ncclComm_t comm, ncclDataType_t dt, const char *what)
{
    ncclResult_t res = hc_nccl_check_comm(comm, what);
    if (res != ncclSuccess)
        return res;
    return hc_nccl_bad_dtype(dt);
}

const char *hcomm_nccl_GetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error (run with HCOMM_LOG_LEVEL=warn for details)";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *hcomm_nccl_GetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_error;
}

void hcomm_nccl_ResetDebugInit(void)
{
    /* hcomm reads its log settings once; there is nothing to reset. */
}

ncclResult_t hcomm_nccl_GetVersion(int *version)
{
    if (version == NULL)
        return hc_nccl_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION(2, 28, 0); /* the API implemented, whichever header built it */
    return ncclSuccess;
}

ncclResult_t hcomm_nccl_GetUniqueId(ncclUniqueId *uniqueId)
{
    hcomm_unique_id_t id;
    _Static_assert(sizeof(id) == sizeof(*uniqueId), "unique id sizes differ");
    if (uniqueId == NULL)
        return hc_nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    ncclResult_t res = hc_nccl_status(hcomm_get_unique_id(&id), "ncclGetUniqueId");
    if (res != ncclSuccess)
        return res;
    memcpy(uniqueId, &id, sizeof(id));
    return ncclSuccess;
}

/* Reads a config by its size/magic/version; reports each field it ignores. */
static ncclResult_t read_config(const ncclConfig_t *cfg, const char *what)
{
    if (cfg == NULL)
        return ncclSuccess;
    if (cfg->magic != NCCL_CONFIG_MAGIC || cfg->size < offsetof(ncclConfig_t, blocking))
        return hc_nccl_fail(ncclInvalidArgument,
                            "%s: config not initialised with NCCL_CONFIG_INITIALIZER", what);
#define HC_NCCL_CFG_INT_(f)                                                                  \
    if (cfg->size >= offsetof(ncclConfig_t, f) + sizeof(cfg->f) && cfg->f != NCCL_CONFIG_UNDEF_INT) \
        hc_info(INIT, "nccl shim: %s: config.%s = %d ignored (no meaning on hcomm)", what, #f,  \
                cfg->f);
    HC_NCCL_CFG_INT_(cgaClusterSize) HC_NCCL_CFG_INT_(minCTAs) HC_NCCL_CFG_INT_(maxCTAs)
    HC_NCCL_CFG_INT_(splitShare) HC_NCCL_CFG_INT_(trafficClass) HC_NCCL_CFG_INT_(collnetEnable)
    HC_NCCL_CFG_INT_(CTAPolicy) HC_NCCL_CFG_INT_(shrinkShare) HC_NCCL_CFG_INT_(nvlsCTAs)
    HC_NCCL_CFG_INT_(nChannelsPerNetPeer) HC_NCCL_CFG_INT_(nvlinkCentricSched)
#undef HC_NCCL_CFG_INT_
    if (cfg->size >= offsetof(ncclConfig_t, blocking) + sizeof(int) && cfg->blocking == 0)
        hc_info(INIT, "nccl shim: %s: nonblocking config: calls complete before returning", what);
    if (cfg->size >= offsetof(ncclConfig_t, netName) + sizeof(char *) && cfg->netName != NULL)
        hc_info(INIT, "nccl shim: %s: config.netName '%s' ignored", what, cfg->netName);
    return ncclSuccess;
}

/* The config's commName, where it has one. */
static const char *config_name(const ncclConfig_t *cfg)
{
    if (cfg == NULL || cfg->size < offsetof(ncclConfig_t, commName) + sizeof(char *) ||
        cfg->commName == NCCL_CONFIG_UNDEF_PTR)
        return NULL;
    return cfg->commName;
}

/* Makes a new hcomm communicator an NCCL one (nccl_shim.h) and gives it to
 * the profiler plugin; destroys it on failure. */
static ncclResult_t wrap_comm(hcomm_comm_t hc, ncclComm_t *out, const ncclConfig_t *cfg,
                              const char *what)
{
    hc_nccl_ext_t *ext = calloc(1, sizeof(*ext));
    if (ext == NULL) {
        if (hc_group_active()) /* destroy is refused in a group */
            hcomm_comm_abort(hc);
        else
            hcomm_comm_destroy(hc);
        return hc_nccl_fail(ncclSystemError, "%s: %s", what, strerror(ENOMEM));
    }
    hc->frontend = ext;
    __atomic_store_n(&hc->frontend_state, HC_NCCL_COMM_LIVE, __ATOMIC_RELEASE);
    *out = (ncclComm_t)(void *)hc;
    hc_nccl_prof_comm_init(*out, config_name(cfg));
    return ncclSuccess;
}

/* ncclCommInitRank's checks, done at the call also inside a group. */
static ncclResult_t init_check(ncclComm_t *comm, int nranks, int rank, const ncclConfig_t *config)
{
    const char *what = "ncclCommInitRank";
    if (comm == NULL)
        return hc_nccl_fail(ncclInvalidArgument, "%s: comm is NULL", what);
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return hc_nccl_fail(ncclInvalidArgument, "%s: rank %d of %d is invalid", what, rank, nranks);
    return read_config(config, what);
}

ncclResult_t hc_nccl_init_rank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                               const ncclConfig_t *config)
{
    ncclResult_t res = init_check(comm, nranks, rank, config);
    if (res != ncclSuccess)
        return res;
    hcomm_unique_id_t id;
    hcomm_comm_t hc;
    memcpy(&id, &commId, sizeof(id));
    res = hc_nccl_status(hcomm_comm_init(&hc, nranks, &id, rank), "ncclCommInitRank");
    if (res != ncclSuccess)
        return res;
    return wrap_comm(hc, comm, config, "ncclCommInitRank");
}

/* Inside a group the init is queued for the group's end (nccl_group_init.c):
 * one thread may create several ranks' communicators there. */
static ncclResult_t init_rank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                              const ncclConfig_t *config)
{
    if (!hc_group_active())
        return hc_nccl_init_rank(comm, nranks, commId, rank, config);
    ncclResult_t res = init_check(comm, nranks, rank, config);
    return res != ncclSuccess ? res : hc_nccl_init_defer(comm, nranks, commId, rank, config);
}

/* Creating a communicator is on the enqueue path (hc_nccl_group_fail). */
ncclResult_t hcomm_nccl_CommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                           int rank, ncclConfig_t *config)
{
    return hc_nccl_enq(init_rank(comm, nranks, commId, rank, config));
}

ncclResult_t hcomm_nccl_CommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return hc_nccl_enq(init_rank(comm, nranks, commId, rank, NULL));
}

/* Every rank is given all nId ids; the first belongs to rank 0, hcomm's root.
 * The roots of the others, those this process made, are let go: no rank
 * joins them, and each would otherwise wait out HCOMM_TIMEOUT. */
ncclResult_t hcomm_nccl_CommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                             ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId < 1 || commIds == NULL)
        return hc_nccl_enq(
            hc_nccl_fail(ncclInvalidArgument, "ncclCommInitRankScalable: no unique ids"));
    for (int i = 1; i < nId; i++) {
        hcomm_unique_id_t id;
        memcpy(&id, &commIds[i], sizeof(id));
        if (memcmp(&commIds[i], &commIds[0], sizeof(id)) != 0) /* the one used: kept */
            hc_bootstrap_root_release(&id);
    }
    return hc_nccl_enq(init_rank(newcomm, nranks, commIds[0], myrank, config));
}

/* ndev ranks of this process, created together in a group (nccl_group_init.c). */
ncclResult_t hcomm_nccl_CommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    (void)devlist; /* hcomm's communicators hold no device */
    if (comm == NULL || ndev < 1)
        return hc_nccl_enq(hc_nccl_fail(ncclInvalidArgument, "ncclCommInitAll: invalid arguments"));
    ncclUniqueId id;
    ncclResult_t res = hcomm_nccl_GetUniqueId(&id);
    if (res == ncclSuccess && ndev == 1)
        return hc_nccl_enq(init_rank(comm, 1, id, 0, NULL));
    if (res == ncclSuccess)
        res = hcomm_nccl_GroupStart();
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    for (int i = 0; i < ndev && res == ncclSuccess; i++)
        res = hc_nccl_enq(init_rank(&comm[i], ndev, id, i, NULL));
    ncclResult_t end = hcomm_nccl_GroupEnd();
    return res != ncclSuccess ? res : end;
}

/* ncclCommDestroy and ncclCommAbort. A communicator that a stuck hcomm
 * stream still holds after its timeout is not destroyed: hcomm returns
 * HCOMM_ERR_TIMEOUT and keeps it registered, and the shim keeps it its own,
 * for a later destroy or abort (as NCCL, whose destroy leaves a
 * communicator it refuses valid). */
static ncclResult_t comm_end(ncclComm_t comm, int abort, const char *what)
{
    hcomm_comm_t hc = hc_of(comm);
    if (comm == NULL)
        return ncclSuccess; /* as NCCL: a no-op */
    if (!hc_nccl_comm_ours(comm))
        return hc_nccl_fail(ncclInvalidArgument, "%s: invalid communicator", what);
    if (abort) /* first, so that work queued on its streams ends now, not at a timeout */
        hc_comm_set_failed(hc, HCOMM_ERR_ABORTED);
    hc_nccl_streams_destroy(comm);
    hc_nccl_ext_t *ext   = hc->frontend;
    uint32_t       state = __atomic_load_n(&hc->frontend_state, __ATOMIC_RELAXED);
    __atomic_store_n(&hc->frontend_state, 0, __ATOMIC_RELEASE);
    hcomm_status_t st = abort ? hcomm_comm_abort(hc) : hcomm_comm_destroy(hc);
    if (st == HCOMM_ERR_TIMEOUT) { /* hcomm logged what held it */
        __atomic_store_n(&hc->frontend_state, state, __ATOMIC_RELEASE);
        return hc_nccl_fail(ncclSystemError,
                            "%s: a stuck hcomm stream still holds the communicator; it is not "
                            "destroyed and stays valid: call %s or ncclCommAbort again once the "
                            "stream moved",
                            what, what);
    }
    if (st == HCOMM_SUCCESS) {
        hc_nccl_prof_comm_fini(ext);
        while (ext->regs != NULL) { /* those the program left registered */
            hc_nccl_reg_t *r = ext->regs;
            ext->regs        = r->next;
            free(r);
        }
        free(ext);
    }
    return hc_nccl_status(st, what);
}

/* A call without a CUDA stream completed before it returned; those on one
 * are waited for here. */
ncclResult_t hcomm_nccl_CommFinalize(ncclComm_t comm)
{
    ncclResult_t res = hc_nccl_check_comm(comm, "ncclCommFinalize"); /* revoked: invalid */
    if (res != ncclSuccess)
        return res;
    hc_nccl_ext_t *ext = hc_nccl_ext(comm);
    for (int i = 0; i < ext->nstreams && res == ncclSuccess; i++)
        res = hc_nccl_status(hcomm_stream_synchronize(ext->streams[i].hs), "ncclCommFinalize");
    return res;
}

ncclResult_t hcomm_nccl_CommDestroy(ncclComm_t comm)
{
    /* refused before anything changes: the communicator stays usable */
    if (comm != NULL && hc_nccl_comm_ours(comm) && hc_group_active())
        return hc_nccl_fail(ncclInvalidUsage, "ncclCommDestroy: not allowed inside a group");
    return comm_end(comm, 0, "ncclCommDestroy");
}

ncclResult_t hcomm_nccl_CommAbort(ncclComm_t comm)
{
    return comm_end(comm, 1, "ncclCommAbort");
}

/* NCCL's revoke is local: each rank revokes its own (the peers are not told,
 * unlike hcomm_comm_revoke). Later operations end with ncclInvalidUsage;
 * destroy, abort, split and shrink proceed (shrink and split agree over the
 * watch channel, as after a failure). */
ncclResult_t hcomm_nccl_CommRevoke(ncclComm_t comm, int revokeFlags)
{
    ncclResult_t res = hc_nccl_check_comm(comm, "ncclCommRevoke");
    if (res != ncclSuccess)
        return res;
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
        return hc_nccl_fail(ncclInvalidArgument, "ncclCommRevoke: flags must be 0");
    __atomic_store_n(&hc_of(comm)->frontend_state, HC_NCCL_COMM_REVOKED,
                     __ATOMIC_RELEASE); /* read by calls on other threads */
    __atomic_store_n(&hc_of(comm)->revoked, 1, __ATOMIC_RELAXED);
    return ncclSuccess;
}

static ncclResult_t comm_split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                               ncclConfig_t *config)
{
    const char *what = "ncclCommSplit";
    if (!hc_nccl_comm_ours(comm))
        return hc_nccl_bad_comm(comm, what);
    ncclResult_t res = ncclSuccess;
    if (newcomm == NULL)
        return hc_nccl_fail(ncclInvalidArgument, "%s: newcomm is NULL", what);
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return hc_nccl_fail(ncclInvalidArgument, "%s: negative color %d", what, color);
    if ((res = read_config(config, what)) != ncclSuccess)
        return res;
    hcomm_comm_t hc = NULL, from = hc_of(comm), whole = NULL;
    int hcolor = color == NCCL_SPLIT_NOCOLOR ? HCOMM_SPLIT_NOCOLOR : color;
    /* a revoked one's data path is closed: the living ranks first agree on a
     * new communicator of them all, which the split then runs on */
    if (!hc_nccl_comm_live(comm) &&
        (res = hc_nccl_status(hcomm_comm_shrink(from, NULL, 0, &whole), what)) != ncclSuccess)
        return res;
    res = hc_nccl_status(hcomm_comm_split(whole != NULL ? whole : from, hcolor, key, &hc), what);
    if (whole != NULL)
        hcomm_comm_destroy(whole);
    if (res != ncclSuccess)
        return res;
    if (hc == NULL) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    return wrap_comm(hc, newcomm, config, what);
}

ncclResult_t hcomm_nccl_CommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                  ncclConfig_t *config)
{
    return hc_nccl_enq(comm_split(comm, color, key, newcomm, config));
}

/* The excluded ranks do not call; survivors keep their order (hcomm_comm_shrink).
 * NCCL_SHRINK_ABORT, once the arguments are known good, first fails the
 * parent (the peers' operations end), so that the survivors agree over the
 * watch channel, as after a failure; a revoked parent does so anyway. */
static ncclResult_t comm_shrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    const char  *what = "ncclCommShrink";
    ncclResult_t res  = ncclSuccess;
    if (!hc_nccl_comm_ours(comm))
        return hc_nccl_bad_comm(comm, what);
    if (newcomm == NULL)
        return hc_nccl_fail(ncclInvalidArgument, "%s: newcomm is NULL", what);
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
        return hc_nccl_fail(ncclInvalidArgument, "%s: unknown flags %d", what, shrinkFlags);
    if ((res = read_config(config, what)) != ncclSuccess)
        return res;
    hcomm_comm_t hc = NULL;
    res             = hc_nccl_status(
                    hc_comm_shrink_check(hc_of(comm), excludeRanksList, excludeRanksCount, &hc), what);
    if (res != ncclSuccess)
        return res;
    if (shrinkFlags == NCCL_SHRINK_ABORT)
        hc_comm_set_failed(hc_of(comm), HCOMM_ERR_ABORTED);
    res = hc_nccl_status(hcomm_comm_shrink(hc_of(comm), excludeRanksList, excludeRanksCount, &hc),
                         what);
    return res != ncclSuccess ? res : wrap_comm(hc, newcomm, config, what);
}

ncclResult_t hcomm_nccl_CommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                   ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    return hc_nccl_enq(
        comm_shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
}

hcomm_status_t hcomm_comm_from_nccl(struct ncclComm *comm, hcomm_comm_t *hc)
{
    if (!hc_nccl_comm_ours(comm) || hc == NULL) {
        hc_nccl_fail(ncclInvalidArgument, "hcomm_comm_from_nccl: %s",
                     hc == NULL ? "hc is NULL" : "not a live communicator of this libnccl");
        return HCOMM_ERR_INVALID_COMM;
    }
    *hc = hc_of(comm); /* the same object (nccl_shim.h) */
    return HCOMM_SUCCESS;
}

ncclResult_t hcomm_nccl_CommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!hc_nccl_comm_ours(comm) || asyncError == NULL)
        return hc_nccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError: invalid arguments");
    /* polled in a loop by watchdogs: maps without logging or touching the last error */
    hcomm_status_t st = hcomm_comm_get_error(hc_of(comm));
    /* revoked and not failed: quiescent (NCCL's ncclSuccess after a revoke),
     * since each call returned its work done or queued on a stream that
     * then fails it */
    if (st == HCOMM_ERR_REVOKED && !hc_nccl_comm_live(comm))
        st = HCOMM_SUCCESS;
    *asyncError = map_status(st);
    return ncclSuccess;
}

ncclResult_t hcomm_nccl_CommCount(const ncclComm_t comm, int *count)
{
    ncclResult_t res =
        hc_nccl_comm_ours(comm) ? ncclSuccess : hc_nccl_bad_comm(comm, "ncclCommCount");
    if (res == ncclSuccess && count == NULL)
        res = hc_nccl_fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
    if (res == ncclSuccess)
        *count = hc_of(comm)->nranks;
    return res;
}

ncclResult_t hcomm_nccl_CommUserRank(const ncclComm_t comm, int *rank)
{
    ncclResult_t res =
        hc_nccl_comm_ours(comm) ? ncclSuccess : hc_nccl_bad_comm(comm, "ncclCommUserRank");
    if (res == ncclSuccess && rank == NULL)
        res = hc_nccl_fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
    if (res == ncclSuccess)
        *rank = hc_of(comm)->rank;
    return res;
}

ncclResult_t hcomm_nccl_CommCuDevice(const ncclComm_t comm, int *device)
{
    ncclResult_t res = hc_nccl_check_comm(comm, "ncclCommCuDevice");
    if (res != ncclSuccess)
        return res;
    (void)device;
    return hc_nccl_fail(ncclInvalidUsage,
                        "ncclCommCuDevice: hcomm communicators run on host memory, no CUDA device");
}

/* Host buffers need no registration; the handle only pairs the two calls,
 * kept on the communicator so that a stray handle is refused (as NCCL's). */
ncclResult_t hcomm_nccl_CommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    ncclResult_t res = hc_nccl_check_comm(comm, "ncclCommRegister");
    if (res != ncclSuccess)
        return res;
    if (handle == NULL || (buff == NULL && size > 0))
        return hc_nccl_fail(ncclInvalidArgument, "ncclCommRegister: invalid arguments");
    hc_nccl_reg_t *r = malloc(sizeof(*r));
    if (r == NULL)
        return hc_nccl_fail(ncclSystemError, "ncclCommRegister: %s", strerror(ENOMEM));
    hc_nccl_ext_t *ext = hc_nccl_ext(comm);
    r->next            = ext->regs;
    ext->regs          = r;
    *handle            = r;
    return ncclSuccess;
}

/* NULL is a no-op, as NCCL's; a handle not registered here is refused. */
ncclResult_t hcomm_nccl_CommDeregister(const ncclComm_t comm, void *handle)
{
    if (!hc_nccl_comm_ours(comm))
        return hc_nccl_bad_comm(comm, "ncclCommDeregister");
    if (handle == NULL)
        return ncclSuccess;
    for (hc_nccl_reg_t **p = &hc_nccl_ext(comm)->regs; *p != NULL; p = &(*p)->next)
        if (*p == handle) {
            *p = (*p)->next;
            free(handle);
            return ncclSuccess;
        }
    return hc_nccl_fail(ncclInvalidUsage,
                        "ncclCommDeregister: handle %p is not a registration of this "
                        "communicator (deregistered already, or not returned by "
                        "ncclCommRegister)",
                        handle);
}

ncclResult_t hcomm_nccl_CommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                           ncclWindow_t *win, int winFlags)
{
    (void)comm, (void)buff, (void)size, (void)win, (void)winFlags;
    return hc_nccl_fail(ncclInvalidUsage, "ncclCommWindowRegister: symmetric memory windows "
                                          "need hcomm's device support");
}

ncclResult_t hcomm_nccl_CommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    (void)comm, (void)win;
    return hc_nccl_fail(ncclInvalidUsage, "ncclCommWindowDeregister: symmetric memory windows "
                                          "need hcomm's device support");
}

/* Device memory on the current device, as NCCL's, where a GPU answers (the
 * collectives stage it, core/stage.h); aligned host memory elsewhere. */
ncclResult_t hcomm_nccl_MemAlloc(void **ptr, size_t size)
{
    if (ptr == NULL || size == 0)
        return hc_nccl_fail(ncclInvalidArgument, "ncclMemAlloc: invalid arguments");
    void          *p;
    hcomm_status_t st = hc_mem_device_alloc(&p, size);
    if (st == HCOMM_ERR_NO_MEMORY)
        return hc_nccl_fail(ncclSystemError, "ncclMemAlloc: %zu bytes of device memory refused",
                            size);
    if (st != HCOMM_SUCCESS) {
        int err = posix_memalign(&p, NCCL_WIN_REQUIRED_ALIGNMENT, size);
        if (err != 0)
            return hc_nccl_fail(ncclSystemError, "ncclMemAlloc: %zu bytes: %s", size,
                                strerror(err));
    }
    *ptr = p;
    return ncclSuccess;
}

ncclResult_t hcomm_nccl_MemFree(void *ptr)
{
    if (hc_mem_kind(ptr) == HC_MEM_CUDA)
        hc_mem_device_free(ptr);
    else
        free(ptr);
    return ncclSuccess;
}

ncclResult_t hcomm_nccl_GroupStart(void)
{
    if (!hc_group_active())
        group_error = ncclSuccess;
    return hc_nccl_status(hcomm_group_start(), "ncclGroupStart");
}

/* Closes the outermost group without running its calls; its error. */
static ncclResult_t group_drop(ncclResult_t res, const char *what)
{
    char why[sizeof(last_error)];
    snprintf(why, sizeof(why), "%s", group_error != ncclSuccess ? group_why : last_error);
    group_error = ncclSuccess;
    hc_group_leave();
    hc_group_reset();
    hc_nccl_temps_release();
    hc_nccl_init_drop();
    return hc_nccl_fail(res, "%s: none of the group's calls ran: %s", what, why);
}

/* hcomm keeps the one group depth (an hcomm group around NCCL calls counts). */
ncclResult_t hcomm_nccl_GroupEnd(void)
{
    if (group_error != ncclSuccess && hc_group_depth == 1)
        return group_drop(group_error, "ncclGroupEnd");
    if (hc_group_depth == 1) { /* communicators first: the group's calls may use them */
        ncclResult_t res = hc_nccl_init_run();
        if (res != ncclSuccess)
            return group_drop(res, "ncclGroupEnd");
    }
    ncclResult_t res = hc_nccl_status(hcomm_group_end(), "ncclGroupEnd");
    if (!hc_group_active())
        hc_nccl_temps_release();
    return res;
}

/* NCCL's ends the group; hcomm has no cost model to simulate it with. */
ncclResult_t hcomm_nccl_GroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    (void)simInfo;
    if (!hc_group_active())
        return hc_nccl_fail(ncclInvalidUsage, "ncclGroupSimulateEnd: no group is open");
    if (hc_group_depth > 1) {
        hc_group_leave();
        return ncclSuccess; /* an inner group's end, as ncclGroupEnd's */
    }
    hc_nccl_fail(ncclInvalidUsage, "ncclGroupSimulateEnd: hcomm has no cost model to simulate "
                                   "with");
    return group_drop(ncclInvalidUsage, "ncclGroupSimulateEnd");
}
