/* nccl_profiler.c - NCCL profiler plugins on hcomm's profiler hooks
 * (hcomm_profiler.h). At the first NCCL communicator the plugin is loaded as
 * NCCL 2.28 loads it (NCCL_PROFILER_PLUGIN, else libnccl-profiler.so; the
 * ncclProfiler_v5 symbol); each communicator gets the plugin's init and, once
 * drained, its finalize. Each operation produces the events NCCL's core emits
 * for a call: at its start a Group API event, a Collective or P2P API event
 * per call (stopped at once, as NCCL stops them when the call returns), a
 * Group event and a Collective or P2P event per call; at its end those stop.
 * NCCL stops a collective's event when it is enqueued on the GPU; here it
 * stops when the operation completed. Proxy, kernel and network events have
 * no counterpart and are never emitted. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "hcomm_profiler.h"
#include "nccl_profiler.h"
#include "nccl_shim.h"

#define NPROF_COLL_MASK                                                                            \
    (HC_NPROF_COLL | HC_NPROF_PROXY_OP | HC_NPROF_PROXY_STEP | HC_NPROF_KERNEL_CH |                \
     HC_NPROF_NET_PLUGIN)
#define NPROF_P2P_MASK ((NPROF_COLL_MASK & ~HC_NPROF_COLL) | HC_NPROF_P2P)

/* A communicator's plugin context. */
struct hc_nccl_prof {
    void *ctx;
};

/* One operation's events, in the hooks' per-operation slot: point-to-point
 * operations of one communicator can run at once (comm_queue.c). */
typedef struct {
    void  *group_api, *group;
    size_t n;
    void  *events[]; /* per call: its API event, then (from n on) its work's */
} nprof_op_t;

static pthread_mutex_t      nprof_lock = PTHREAD_MUTEX_INITIALIZER;
static int                  nprof_state; /* 0: not tried; 1: loaded; -1: none */
static const hc_nprof_v5_t *nprof;
static int                  nprof_mask; /* the plugin's; it may change it at any time */

static void nprof_log(int level, unsigned long flags, const char *file, int line, const char *fmt,
                      ...)
{
    char    msg[512];
    va_list ap;
    (void)flags;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hc_log_level_t l = level == HC_NLOG_WARN    ? HC_LOG_WARN
                       : level == HC_NLOG_ABORT ? HC_LOG_ERROR
                       : level == HC_NLOG_TRACE ? HC_LOG_TRACE
                                                : HC_LOG_INFO;
    if (l <= hc_log_level() && (hc_log_subsys() & HC_SUBSYS(INIT)))
        hc_log_emit(l, HC_SUBSYS(INIT), file ? file : "profiler", line, "profiler plugin: %s", msg);
}

static const char *nprof_func(const char *coll)
{
    static const char *const map[][2] = {{"allreduce", "AllReduce"},
                                         {"broadcast", "Broadcast"},
                                         {"reduce", "Reduce"},
                                         {"allgather", "AllGather"},
                                         {"reduce_scatter", "ReduceScatter"},
                                         {"alltoall", "AlltoAll"},
                                         {"send", "Send"},
                                         {"recv", "Recv"},
                                         {"alltoallv", "AlltoAllv"},
                                         {"barrier", "Barrier"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(coll, map[i][0]) == 0)
            return map[i][1];
    return coll;
}

static const char *nprof_dtype(hcomm_dtype_t dt)
{
    static const char *const names[HCOMM_DTYPE_COUNT] = {
        "ncclInt8",   "ncclUint8",   "ncclInt32",   "ncclUint32",  "ncclInt64",
        "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};
    return (unsigned)dt < HCOMM_DTYPE_COUNT ? names[dt] : "Unknown";
}

static int nprof_is_p2p(const hcomm_prof_call_t *c)
{
    return strcmp(c->collective, "send") == 0 || strcmp(c->collective, "recv") == 0;
}

static struct hc_nccl_prof *nprof_of(hcomm_comm_t comm)
{
    hc_nccl_ext_t *ext = comm->frontend; /* NULL: not an NCCL communicator */
    return ext != NULL ? ext->prof : NULL;
}

static void *nprof_start(struct hc_nccl_prof *p, hc_nprof_descr_t *d)
{
    void *h = NULL;
    if (nprof->startEvent(p->ctx, &h, d) != 0)
        h = NULL;
    return h;
}

static void nprof_stop(void *h)
{
    if (h != NULL)
        nprof->stopEvent(h);
}

static void nprof_op_start(void *user, const hcomm_prof_op_t *op, void **data)
{
    struct hc_nccl_prof *p    = nprof_of(op->comm);
    int                  mask = __atomic_load_n(&nprof_mask, __ATOMIC_RELAXED);
    (void)user;
    if (p == NULL || p->ctx == NULL || op->calls == NULL)
        return;
    nprof_op_t *o = calloc(1, sizeof(*o) + 2 * op->ncalls * sizeof(o->events[0]));
    if (o == NULL)
        return; /* this operation goes without events */
    o->n       = op->ncalls;
    void **api = o->events, **work = o->events + o->n;
    *data                   = o;
    hc_nprof_descr_t d      = {.type = HC_NPROF_GROUP_API, .rank = op->rank};
    d.groupApi.groupDepth   = strcmp(op->call.collective, "group") == 0 ? 2 : 1;
    if (mask & ~(HC_NPROF_PROXY_CTRL))
        o->group_api = nprof_start(p, &d);
    for (size_t i = 0; i < op->ncalls; i++) { /* the calls, as they were made */
        const hcomm_prof_call_t *c = &op->calls[i];
        d      = (hc_nprof_descr_t){.parentObj = o->group_api, .rank = op->rank};
        api[i] = NULL;
        if (nprof_is_p2p(c) && (mask & (HC_NPROF_P2P_API | NPROF_P2P_MASK))) {
            d.type            = HC_NPROF_P2P_API;
            d.p2pApi.func     = nprof_func(c->collective);
            d.p2pApi.count    = c->count;
            d.p2pApi.datatype = nprof_dtype(c->dtype);
            api[i]            = nprof_start(p, &d);
        } else if (!nprof_is_p2p(c) && (mask & (HC_NPROF_COLL_API | NPROF_COLL_MASK))) {
            d.type             = HC_NPROF_COLL_API;
            d.collApi.func     = nprof_func(c->collective);
            d.collApi.count    = c->count;
            d.collApi.datatype = nprof_dtype(c->dtype);
            d.collApi.root     = c->peer >= 0 ? c->peer : 0;
            api[i]             = nprof_start(p, &d);
        }
        nprof_stop(api[i]); /* NCCL: when the call returns */
    }
    d = (hc_nprof_descr_t){.type = HC_NPROF_GROUP, .rank = op->rank};
    if (mask & (HC_NPROF_GROUP | NPROF_COLL_MASK | HC_NPROF_P2P))
        o->group = nprof_start(p, &d);
    for (size_t i = 0; i < op->ncalls; i++) { /* the work, under its call */
        const hcomm_prof_call_t *c = &op->calls[i];
        d                          = (hc_nprof_descr_t){.parentObj = api[i], .rank = op->rank};
        if (nprof_is_p2p(c) && (mask & NPROF_P2P_MASK)) {
            d.type          = HC_NPROF_P2P;
            d.p2p.func      = nprof_func(c->collective);
            d.p2p.buff      = strcmp(c->collective, "send") == 0 ? (void *)c->sendbuf : c->recvbuf;
            d.p2p.datatype  = nprof_dtype(c->dtype);
            d.p2p.count     = c->count;
            d.p2p.peer      = c->peer;
            d.p2p.nChannels = 1;
            d.p2p.parentGroup = o->group;
            work[i]           = nprof_start(p, &d);
        } else if (!nprof_is_p2p(c) && (mask & NPROF_COLL_MASK)) {
            d.type             = HC_NPROF_COLL;
            d.coll.seqNumber   = op->seq;
            d.coll.func        = nprof_func(c->collective);
            d.coll.sendBuff    = c->sendbuf;
            d.coll.recvBuff    = c->recvbuf;
            d.coll.count       = c->count;
            d.coll.root        = c->peer >= 0 ? c->peer : 0;
            d.coll.datatype    = nprof_dtype(c->dtype);
            d.coll.nChannels   = 1;
            d.coll.algo        = c->algorithm;
            d.coll.proto       = "Simple";
            d.coll.parentGroup = o->group;
            work[i]            = nprof_start(p, &d);
        }
    }
}

static void nprof_op_end(void *user, const hcomm_prof_op_t *op, void *data)
{
    nprof_op_t *o = data;
    (void)user, (void)op;
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->n; i++)
        nprof_stop(o->events[o->n + i]);
    nprof_stop(o->group);
    nprof_stop(o->group_api);
    free(o);
}

/* The plugin's library as NCCL finds it: the name as given (a path or a
 * library), then libnccl-profiler-NAME.so for a bare NAME. */
static void *nprof_open(const char *name, char *used, size_t len)
{
    const char *want = name[0] != '\0' ? name : "libnccl-profiler.so";
    void       *lib  = dlopen(want, RTLD_NOW | RTLD_LOCAL);
    size_t      n    = strlen(name);
    snprintf(used, len, "%s", want);
    if (lib == NULL && n > 0 && strchr(name, '/') == NULL &&
        (strncmp(name, "lib", 3) != 0 || n < 3 || strcmp(name + n - 3, ".so") != 0)) {
        snprintf(used, len, "libnccl-profiler-%s.so", name);
        lib = dlopen(used, RTLD_NOW | RTLD_LOCAL);
    }
    return lib;
}

/* Loads the plugin once; nprof_lock held. */
static void nprof_load(void)
{
    const char *name = hc_params_get()->nccl_profiler_plugin;
    char        used[512];
    nprof_state = -1;
    if (strcasecmp(name, "none") == 0)
        return;
    void *lib = nprof_open(name, used, sizeof(used));
    if (lib == NULL) {
        if (name[0] != '\0')
            hc_warn(INIT, "NCCL_PROFILER_PLUGIN=%s: cannot load %s: %s", name, used, dlerror());
        return;
    }
    nprof = dlsym(lib, "ncclProfiler_v5");
    if (nprof == NULL || nprof->init == NULL || nprof->startEvent == NULL ||
        nprof->stopEvent == NULL || nprof->finalize == NULL) {
        const char *older = dlsym(lib, "ncclProfiler_v4")   ? "v4"
                            : dlsym(lib, "ncclProfiler_v3") ? "v3"
                            : dlsym(lib, "ncclProfiler_v2") ? "v2"
                                                            : NULL;
        hc_warn(INIT, "NCCL profiler plugin %s has no complete ncclProfiler_v5%s%s: not loaded",
                used, older ? " (only ncclProfiler_" : "", older ? older : "");
        nprof = NULL;
        dlclose(lib);
        return;
    }
    hcomm_profiler_t hooks = {nprof_op_start, nprof_op_end, NULL};
    int              id;
    if (hcomm_profiler_register(&hooks, &id) != HCOMM_SUCCESS) {
        nprof = NULL;
        dlclose(lib);
        return;
    }
    nprof_state = 1; /* the library stays loaded for the process's life */
    hc_info(INIT, "NCCL profiler plugin %s (%s, v5) loaded", nprof->name ? nprof->name : "", used);
}

void hc_nccl_prof_comm_init(ncclComm_t comm, const char *name)
{
    hcomm_comm_t   hc  = hc_of(comm);
    hc_nccl_ext_t *ext = hc->frontend;
    pthread_mutex_lock(&nprof_lock);
    if (nprof_state == 0)
        nprof_load();
    struct hc_nccl_prof *p = nprof_state == 1 ? calloc(1, sizeof(*p)) : NULL;
    if (p == NULL) {
        pthread_mutex_unlock(&nprof_lock);
        return;
    }
    uint64_t id     = hc_hash_bytes(HC_HASH_FNV_SEED, hc->cookie, sizeof(hc->cookie));
    int      nnodes = hc->plans.cluster != NULL ? hc->plans.cluster->nnodes : 1;
    /* one init at a time, as NCCL's: it writes the shared activation mask
     * (communicators made together in a group come from several threads) */
    int err = nprof->init(&p->ctx, id, &nprof_mask, name ? name : "", nnodes, hc->nranks, hc->rank,
                          nprof_log);
    pthread_mutex_unlock(&nprof_lock);
    if (err != 0 || p->ctx == NULL) {
        hc_info(INIT, "NCCL profiler plugin: init failed (%d); this communicator goes without",
                err);
        free(p);
        return;
    }
    hc_comm_lock(hc); /* callbacks read it under this lock */
    ext->prof = p;
    hc_comm_unlock(hc);
}

void hc_nccl_prof_comm_fini(hc_nccl_ext_t *ext)
{
    struct hc_nccl_prof *p = ext->prof;
    if (p == NULL)
        return;
    nprof->finalize(p->ctx);
    free(p);
    ext->prof = NULL;
}
