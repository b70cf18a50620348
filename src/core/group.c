/* group.c - the calling thread's group: its depth, its queued calls, and
 * their fusion into one request per communicator. */
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/exec.h"
#include "core/group.h"
#include "core/ops.h"
#include "core/stage.h"

__thread int hc_group_depth      HC_TLS_FAST;
static __thread unsigned long    group_epoch; /* outermost groups started on this thread */
static __thread hc_group_call_t *group_calls;
static __thread size_t           group_len, group_cap;
static __thread hcomm_status_t   group_refused;      /* the first call refused */
static __thread const char      *group_refused_call; /* its name (a literal) */

unsigned long hc_group_epoch(void)
{
    return group_epoch;
}

void hc_group_enter(void)
{
    if (hc_group_depth++ == 0) {
        group_epoch++;
        group_refused = HCOMM_SUCCESS;
    }
}

void hc_group_refuse(hcomm_status_t st, const char *call)
{
    if (hc_group_active() && st != HCOMM_SUCCESS && group_refused == HCOMM_SUCCESS)
        group_refused = st, group_refused_call = call;
}

hcomm_status_t hc_group_refused(const char **call)
{
    *call = group_refused_call;
    return group_refused;
}

int hc_group_leave(void)
{
    if (hc_group_depth == 0) {
        hc_error(COLL, "hcomm_group_end without hcomm_group_start");
        return -1;
    }
    return --hc_group_depth == 0;
}

hcomm_status_t hc_group_add(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                            void *recvbuf, hcomm_stream_t stream)
{
    if (group_len == group_cap) {
        size_t cap = group_cap ? 2 * group_cap : 16;
        void  *p   = realloc(group_calls, cap * sizeof(*group_calls));
        if (p == NULL) {
            hc_error(COLL, "out of memory queuing a call in a group");
            return HCOMM_ERR_NO_MEMORY;
        }
        group_calls = p;
        group_cap   = cap;
    }
    group_calls[group_len++] =
        (hc_group_call_t){comm, *args, sendbuf, recvbuf, stream, comm->serial};
    return HCOMM_SUCCESS;
}

size_t hc_group_drop_stale(void)
{
    hc_group_call_t *q    = group_calls; /* one thread-local lookup, not one a call */
    size_t           kept = 0, n = group_len;
    for (size_t i = 0; i < n; i++) {
        hc_group_call_t *c = &q[i];
        /* liveness first: a dead one's serial is in freed memory */
        if (hc_comm_is_live(c->comm) && c->comm->serial == c->serial)
            q[kept++] = *c;
    }
    group_len = kept;
    return n - kept;
}

const hc_group_call_t *hc_group_calls(size_t *n)
{
    *n = group_len;
    return group_calls;
}

void hc_group_reset(void)
{
    group_len = 0;
}

/* Turns the k-th send to self and the k-th receive from self into one copy,
 * placed at the later of the two (p2p steps carry no dependencies of their own). */
static hcomm_status_t group_pair_self(hc_sched_t *s)
{
    uint32_t si = 0, ri = 0;
    for (;;) {
        while (si < s->nsteps && !(s->steps[si].kind == HC_STEP_SEND && s->steps[si].peer == s->rank))
            si++;
        while (ri < s->nsteps && !(s->steps[ri].kind == HC_STEP_RECV && s->steps[ri].peer == s->rank))
            ri++;
        if (si == s->nsteps && ri == s->nsteps)
            return HCOMM_SUCCESS;
        if (si == s->nsteps || ri == s->nsteps || s->steps[si].len != s->steps[ri].len) {
            hc_error(P2P, "group: a %s self has no matching %s of the same size",
                     si == s->nsteps ? "receive from" : "send to",
                     si == s->nsteps ? "send" : "receive");
            return HCOMM_ERR_INVALID_USAGE;
        }
        hc_step_t *snd = &s->steps[si], *rcv = &s->steps[ri];
        hc_step_t  copy = {.kind = HC_STEP_COPY, .len = snd->len, .src = snd->src,
                           .dst = rcv->dst, .dep = {(int32_t)(si < ri ? si : ri), HC_STEP_NODEP}};
        hc_step_t  nop  = {.kind = HC_STEP_COPY, .src = rcv->dst, .dst = rcv->dst,
                           .dep = {HC_STEP_NODEP, HC_STEP_NODEP}};
        s->steps[si < ri ? si : ri] = nop;
        s->steps[si < ri ? ri : si] = copy;
        si++, ri++;
    }
}

/* The fused calls' buffers (in bufs, HC_BUF_PER_OP apart after the empty
 * first call) through host copies where they are of other kinds. */
static hcomm_status_t group_stage(hcomm_comm_t comm, void **bufs, size_t ncalls,
                                  const hc_coll_args_t **args, hc_stage_t **out)
{
    const void **snd = malloc(ncalls * sizeof(*snd));
    void       **rcv = malloc(ncalls * sizeof(*rcv));
    if (snd == NULL || rcv == NULL) {
        free(snd);
        free(rcv);
        hc_error(COLL, "out of memory staging a group's %zu calls", ncalls);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < ncalls; i++) {
        snd[i] = bufs[(i + 1) * HC_BUF_PER_OP + HC_BUF_SEND];
        rcv[i] = bufs[(i + 1) * HC_BUF_PER_OP + HC_BUF_RECV];
    }
    hcomm_status_t st = hc_stage_begin_calls(comm, ncalls, args, snd, rcv, out);
    for (size_t i = 0; i < ncalls && st == HCOMM_SUCCESS; i++) {
        bufs[(i + 1) * HC_BUF_PER_OP + HC_BUF_SEND] = (void *)snd[i];
        bufs[(i + 1) * HC_BUF_PER_OP + HC_BUF_RECV] = rcv[i];
    }
    free(snd);
    free(rcv);
    return st;
}

/* The fused schedule of the calls whose schedules are members[0..n) (owned[k]:
 * the caller's, destroyed here): the one kept for them, or built (and kept
 * where it can be). *kept: the cache holds it, not the request. */
static hcomm_status_t group_fuse(hcomm_comm_t comm, hc_sched_t **members, const int *owned,
                                 size_t n, hc_sched_t **merged_p, int *kept)
{
    int any_owned = 0;
    for (size_t k = 0; k < n; k++)
        any_owned |= owned[k];
    *kept     = 0;
    *merged_p = any_owned ? NULL : hc_comm_group_sched_find(comm, members, n);
    if (*merged_p != NULL) {
        *kept = 1;
        return HCOMM_SUCCESS;
    }
    /* the merged schedule starts as one empty call (buffers 0-2); hc_sched_append
     * renumbers each call's buffers after it and shifts its TMP offsets into one
     * scratch area, so every TMP base pointer is the scratch itself (offset 0) */
    hc_sched_t    *merged = hc_sched_create(comm->nranks, comm->rank);
    hcomm_status_t st     = merged != NULL ? HCOMM_SUCCESS : HCOMM_ERR_NO_MEMORY;
    size_t         bytes  = 0;
    for (size_t k = 0; k < n; k++) {
        bytes += members[k]->bytes;
        if (st == HCOMM_SUCCESS)
            st = hc_sched_append(merged, members[k]);
        if (owned[k])
            hc_sched_destroy(members[k]);
    }
    if (st == HCOMM_SUCCESS)
        st = group_pair_self(merged);
    if (st == HCOMM_SUCCESS)
        st = hc_sched_finalize(merged);
    if (st != HCOMM_SUCCESS) {
        if (merged != NULL)
            hc_sched_destroy(merged);
        return st;
    }
    merged->coll  = HC_OP_GROUP; /* what its record says (core/ops.h) */
    merged->peer  = -1;
    merged->count = n;
    merged->bytes = bytes;
    *kept         = !any_owned && hc_comm_group_sched_keep(comm, members, n, merged);
    *merged_p     = merged;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_group_issue_comm(hcomm_comm_t comm, int gated, hcomm_request_t *req_p)
{
    /* a group of a few calls (a send and a receive) allocates nothing here */
    const hc_group_call_t *q   = group_calls; /* one thread-local lookup each */
    size_t                 len = group_len;
    void                  *bufs_here[(HC_GROUP_KEY_MAX + 1) * HC_BUF_PER_OP];
    hc_sched_t            *members_here[HC_GROUP_KEY_MAX];
    int                    owned_here[HC_GROUP_KEY_MAX];
    int                    small = len <= HC_GROUP_KEY_MAX;
    void         **bufs   = small ? bufs_here : calloc(len + 1, HC_BUF_PER_OP * sizeof(void *));
    hc_sched_t   **member = small ? members_here : calloc(len, sizeof(*member));
    int           *owned  = small ? owned_here : calloc(len, sizeof(*owned));
    hcomm_status_t st     = bufs && member && owned ? HCOMM_SUCCESS : HCOMM_ERR_NO_MEMORY;
    size_t         ncalls = 0;
    /* the calls, for profilers registered now (ops_prof.c); none: NULL */
    hcomm_prof_call_t *calls = hc_prof_on() ? calloc(len, sizeof(*calls)) : NULL;
    /* the calls' arguments in fused order, where buffers may be of other kinds */
    const hc_coll_args_t **cargs = NULL;
    hc_stage_t            *stage = NULL;
    hc_sched_t            *merged = NULL;
    int                    kept   = 0;
    if (hc_mem_maybe_other() && (cargs = malloc(len * sizeof(*cargs))) == NULL)
        st = HCOMM_ERR_NO_MEMORY;
    if (bufs != NULL) /* the empty first call's: no buffers, TMP at offset 0 */
        bufs[0] = bufs[1] = bufs[2] = NULL;

    /* collectives first, then sends and receives, each in call order: ranks
     * that interleave the two differently (NCCL allows it) still post each
     * pair's messages alike, which carry no operation number */
    for (size_t k = 0; k < 2 * len && st == HCOMM_SUCCESS; k++) {
        const hc_group_call_t *c   = &q[k % len];
        int              p2p = c->args.coll == HC_COLL_SEND || c->args.coll == HC_COLL_RECV;
        if (c->comm != comm || p2p != (k >= len))
            continue;
        st = hc_comm_get_sched(comm, &c->args, &member[ncalls], &owned[ncalls]);
        if (st != HCOMM_SUCCESS)
            break;
        if (calls != NULL)
            hc_prof_call_fill(&calls[ncalls], &c->args, member[ncalls]->algo, c->sendbuf,
                              c->recvbuf);
        if (cargs != NULL)
            cargs[ncalls] = &c->args;
        ncalls++;
        bufs[ncalls * HC_BUF_PER_OP]     = (void *)c->sendbuf;
        bufs[ncalls * HC_BUF_PER_OP + 1] = c->recvbuf;
        bufs[ncalls * HC_BUF_PER_OP + 2] = (void *)0;
    }
    if (st != HCOMM_SUCCESS) {
        for (size_t k = 0; k < ncalls; k++)
            if (owned[k])
                hc_sched_destroy(member[k]);
    } else {
        st = group_fuse(comm, member, owned, ncalls, &merged, &kept);
    }
    if (st == HCOMM_SUCCESS && cargs != NULL)
        st = group_stage(comm, bufs, ncalls, cargs, &stage);
    free(cargs);
    hcomm_request_t req = NULL;
    if (st == HCOMM_SUCCESS && (req = hc_request_alloc(comm)) == NULL)
        st = HCOMM_ERR_NO_MEMORY;
    if (st == HCOMM_SUCCESS)
        st = hc_exec_prepare(req, comm, merged, bufs, merged->tmp_bytes);
    if (!small) {
        free(bufs);
        free(member);
        free(owned);
    }
    if (st != HCOMM_SUCCESS) {
        hc_stage_free(comm, stage);
        if (req != NULL)
            hc_request_recycle(comm, req);
        if (merged != NULL && !kept)
            hc_sched_destroy(merged);
        free(calls);
        return st;
    }
    req->own_sched = !kept;
    req->stage     = stage;
    hc_ops_issue(comm, req, 0);
    req->prof_calls  = calls;
    req->prof_ncalls = calls != NULL ? ncalls : 0;
    hc_comm_enqueue(comm, req, gated);
    *req_p = req;
    return HCOMM_SUCCESS;
}
