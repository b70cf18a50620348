/*
 * prof_plugin.c - a tiny NCCL profiler plugin (ncclProfiler_v5) for
 * run_shim.sh: it asks for the API, group, collective and P2P events, checks
 * each as it comes (a collective's parent is a started Collective API event of
 * this communicator, whose parent is a Group API event; P2P alike; peers in
 * range; names set), checks every handle is stopped once, and at finalize
 * prints one line per communicator:
 *   prof_plugin rank R of N: group_api A coll_api B p2p_api C group D coll E
 *   p2p F open G bad H
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/nccl/nccl_profiler.h"

#define EV_MAGIC 0x70726f66u

typedef struct ev ev_t;

typedef struct {
    int   rank, nranks;
    int   counts[12]; /* by the event type's bit */
    int   open, bad;
    ev_t *events; /* all of them: freed at finalize */
} ctx_t;

struct ev {
    uint32_t magic;
    uint64_t type;
    ctx_t   *ctx;
    int      stopped;
    ev_t    *next;
};

static void bad(ctx_t *c, const char *what)
{
    c->bad++;
    fprintf(stderr, "prof_plugin rank %d: %s\n", c->rank, what);
}

/* Whether p is a started event of c of type t. */
static int is_ev(ctx_t *c, void *p, uint64_t t)
{
    ev_t *e = p;
    return e != NULL && e->magic == EV_MAGIC && e->ctx == c && e->type == t;
}

static int t_init(void **context, uint64_t id, int *mask, const char *name, int nnodes, int nranks,
                  int rank, hc_nprof_logger_t logfn)
{
    ctx_t *c = calloc(1, sizeof(*c));
    (void)id;
    if (c == NULL)
        return 2;
    c->rank   = rank;
    c->nranks = nranks;
    if (name == NULL || nnodes < 1 || nranks < 1 || rank < 0 || rank >= nranks)
        bad(c, "init arguments");
    *mask = HC_NPROF_GROUP_API | HC_NPROF_COLL_API | HC_NPROF_P2P_API | HC_NPROF_GROUP |
            HC_NPROF_COLL | HC_NPROF_P2P;
    logfn(HC_NLOG_INFO, 1, __func__, __LINE__, "prof_plugin: init rank %d of %d", rank, nranks);
    *context = c;
    return 0;
}

static int t_start(void *context, void **handle, hc_nprof_descr_t *d)
{
    ctx_t *c = context;
    ev_t  *e = calloc(1, sizeof(*e));
    *handle  = e;
    if (e == NULL)
        return 0;
    e->magic = EV_MAGIC, e->type = d->type, e->ctx = c;
    e->next   = c->events;
    c->events = e;
    c->open++;
    for (int b = 0; b < 12; b++)
        if (d->type == (1ull << b))
            c->counts[b]++;
    if (d->rank != c->rank)
        bad(c, "event of another rank");
    switch (d->type) {
    case HC_NPROF_GROUP_API:
        if (d->parentObj != NULL || d->groupApi.groupDepth < 1)
            bad(c, "group API event");
        break;
    case HC_NPROF_COLL_API:
        if (!is_ev(c, d->parentObj, HC_NPROF_GROUP_API) || d->collApi.func == NULL ||
            d->collApi.datatype == NULL || strncmp(d->collApi.datatype, "nccl", 4) != 0)
            bad(c, "collective API event");
        break;
    case HC_NPROF_P2P_API:
        if (!is_ev(c, d->parentObj, HC_NPROF_GROUP_API) || d->p2pApi.func == NULL)
            bad(c, "P2P API event");
        break;
    case HC_NPROF_COLL:
        if (!is_ev(c, d->parentObj, HC_NPROF_COLL_API) || d->coll.func == NULL ||
            d->coll.algo == NULL || d->coll.proto == NULL || d->coll.seqNumber == 0 ||
            d->coll.root < 0 || d->coll.root >= c->nranks)
            bad(c, "collective event");
        break;
    case HC_NPROF_P2P:
        if (!is_ev(c, d->parentObj, HC_NPROF_P2P_API) || d->p2p.peer < 0 ||
            d->p2p.peer >= c->nranks ||
            (strcmp(d->p2p.func, "Send") != 0 && strcmp(d->p2p.func, "Recv") != 0))
            bad(c, "P2P event");
        break;
    case HC_NPROF_GROUP:
        break;
    default:
        bad(c, "an event type not asked for");
    }
    return 0;
}

static int t_stop(void *handle)
{
    ev_t *e = handle;
    if (e == NULL || e->magic != EV_MAGIC) {
        fprintf(stderr, "prof_plugin: stop of an unknown handle\n");
        return 0;
    }
    if (e->stopped++)
        bad(e->ctx, "an event stopped twice");
    else
        e->ctx->open--;
    return 0; /* kept until finalize: later events may name it as their parent */
}

static int t_state(void *handle, int state, void *args)
{
    (void)handle, (void)state, (void)args;
    return 0;
}

static int t_finalize(void *context)
{
    ctx_t *c = context;
    printf("prof_plugin rank %d of %d: group_api %d coll_api %d p2p_api %d group %d coll %d p2p %d "
           "open %d bad %d\n",
           c->rank, c->nranks, c->counts[8], c->counts[9], c->counts[10], c->counts[0],
           c->counts[1], c->counts[2], c->open, c->bad);
    fflush(stdout);
    while (c->events != NULL) {
        ev_t *e   = c->events;
        c->events = e->next;
        free(e);
    }
    free(c);
    return 0;
}

__attribute__((visibility("default")))
const hc_nprof_v5_t ncclProfiler_v5 = {"hcomm-test", t_init, t_start, t_stop, t_state, t_finalize};
