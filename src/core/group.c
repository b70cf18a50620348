/* group.c - hcomm_group_start/end: the calls in between are fused into one
 * operation per communicator (one schedule, so the executor orders every peer's
 * messages consistently) and issued together by the outermost end: waited for
 * there, or handed to the stream the calls named (all the same one). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "base/log.h"
#include "overlap/overlap.h"

typedef struct group_call {
    hcomm_comm_t   comm;
    hc_coll_args_t args;
    const void    *sendbuf;
    void          *recvbuf;
    hcomm_stream_t stream;
} group_call_t;

static __thread int            group_depth HC_TLS_FAST;
static __thread unsigned long  group_epoch; /* outermost groups started on this thread */
static __thread group_call_t  *group_calls;
static __thread size_t         group_len, group_cap;

int hc_group_active(void)
{
    return group_depth > 0;
}

unsigned long hc_group_epoch(void)
{
    return group_epoch;
}

hcomm_status_t hcomm_group_start(void)
{
    if (group_depth++ == 0)
        group_epoch++;
    return HCOMM_SUCCESS;
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
    group_calls[group_len++] = (group_call_t){comm, *args, sendbuf, recvbuf, stream};
    return HCOMM_SUCCESS;
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

/* Builds and queues one fused op for every call of comm in the group. */
static hcomm_status_t group_issue_comm(hcomm_comm_t comm, int gated, hc_op_t **op_p)
{
    /* the merged schedule starts as one empty op (buffers 0-2); hc_sched_append
     * renumbers each call's buffers after it and shifts its TMP offsets into one
     * scratch area, so every TMP base pointer is the scratch itself (offset 0) */
    hc_sched_t    *merged = hc_sched_create(comm->nranks, comm->rank);
    size_t         nbufs  = HC_BUF_PER_OP;
    void         **bufs   = calloc(HC_BUF_PER_OP, sizeof(void *));
    hcomm_status_t st     = merged && bufs ? HCOMM_SUCCESS : HCOMM_ERR_NO_MEMORY;

    for (size_t i = 0; i < group_len && st == HCOMM_SUCCESS; i++) {
        group_call_t *c = &group_calls[i];
        if (c->comm != comm)
            continue;
        hc_sched_t *s;
        int         owned;
        st = hc_comm_get_sched(comm, &c->args, &s, &owned);
        if (st != HCOMM_SUCCESS)
            break;
        st = hc_sched_append(merged, s);
        if (owned)
            hc_sched_destroy(s);
        void **nb = realloc(bufs, (nbufs + HC_BUF_PER_OP) * sizeof(void *));
        if (nb == NULL) {
            st = HCOMM_ERR_NO_MEMORY;
            break;
        }
        bufs            = nb;
        bufs[nbufs]     = (void *)c->sendbuf;
        bufs[nbufs + 1] = c->recvbuf;
        bufs[nbufs + 2] = (void *)0;
        nbufs += HC_BUF_PER_OP;
    }
    if (st == HCOMM_SUCCESS)
        st = group_pair_self(merged);
    if (st == HCOMM_SUCCESS)
        st = hc_sched_finalize(merged);
    hc_op_t *op = NULL;
    if (st == HCOMM_SUCCESS && (op = hc_comm_op_alloc(comm)) == NULL)
        st = HCOMM_ERR_NO_MEMORY;
    if (st == HCOMM_SUCCESS)
        st = hc_exec_prepare(op, comm, merged, bufs, merged->tmp_bytes);
    free(bufs);
    if (st != HCOMM_SUCCESS) {
        if (op != NULL)
            hc_comm_op_recycle(comm, op);
        if (merged != NULL)
            hc_sched_destroy(merged);
        return st;
    }
    op->own_sched = 1;
    op->user_req  = 0;
    if (gated) {
        op->gated   = 1;
        op->holders = 1;
        comm->held++;
    }
    hc_comm_enqueue(comm, op);
    *op_p = op;
    return HCOMM_SUCCESS;
}

/* The stream every call of the group named (NULL: none), or -1 via *mixed. */
static hcomm_stream_t group_stream(int *mixed)
{
    *mixed = 0;
    for (size_t i = 1; i < group_len; i++)
        *mixed |= group_calls[i].stream != group_calls[0].stream;
    return group_len > 0 ? group_calls[0].stream : NULL;
}

/* Progresses the group's ops (of several communicators, which may depend on
 * each other) together until all finished; recycles them; the first error. */
static hcomm_status_t group_wait(hc_op_t **ops, size_t nops, hcomm_status_t first)
{
    hc_comm_wait_ops(ops, nops);
    for (size_t i = 0; i < nops; i++) {
        hcomm_comm_t c = ops[i]->comm;
        hc_comm_lock(c);
        if (ops[i]->status != HCOMM_SUCCESS && first == HCOMM_SUCCESS)
            first = ops[i]->status;
        hc_comm_op_recycle(c, ops[i]);
        hc_comm_unlock(c);
    }
    return first;
}

hcomm_status_t hcomm_group_end(void)
{
    if (group_depth == 0) {
        hc_error(COLL, "hcomm_group_end without hcomm_group_start");
        return HCOMM_ERR_INVALID_USAGE;
    }
    if (--group_depth > 0)
        return HCOMM_SUCCESS;

    int               mixed;
    hcomm_stream_t    stream = group_stream(&mixed);
    hcomm_status_t    first  = HCOMM_SUCCESS;
    size_t            nops   = 0;
    hc_op_t         **ops    = calloc(group_len ? group_len : 1, sizeof(*ops));
    hc_stream_task_t *task   = NULL;
    if (mixed) {
        hc_error(COLL, "hcomm_group_end: the calls of one group must name the same stream");
        group_len = 0;
        free(ops);
        return HCOMM_ERR_INVALID_USAGE;
    }
    if (ops == NULL || (stream != NULL && (task = hc_stream_task_ops(group_len)) == NULL)) {
        group_len = 0;
        free(ops);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < group_len; i++) {
        hcomm_comm_t comm = group_calls[i].comm;
        int          seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = (group_calls[j].comm == comm);
        if (seen)
            continue;
        hcomm_status_t st = hc_comm_check(comm, "hcomm_group_end");
        if (st == HCOMM_SUCCESS && stream != NULL)
            hc_comm_make_threaded(comm);
        hc_comm_lock(comm);
        if (st == HCOMM_SUCCESS)
            st = group_issue_comm(comm, stream != NULL, &ops[nops]);
        hc_comm_unlock(comm);
        if (st == HCOMM_SUCCESS)
            nops++;
        else if (first == HCOMM_SUCCESS)
            first = st;
    }
    group_len = 0;
    if (stream == NULL) {
        first = group_wait(ops, nops, first);
    } else if (nops > 0) {
        /* what was queued goes to the stream even after an error, which its
         * communicators' peers would otherwise wait for */
        for (size_t i = 0; i < nops; i++)
            hc_stream_task_set_op(task, i, ops[i]);
        hc_stream_task_shrink(task, nops);
        hc_stream_push(stream, task);
        task = NULL;
    }
    hc_stream_task_free(task);
    free(ops);
    return first;
}
