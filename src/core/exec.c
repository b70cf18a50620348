/* exec.c - runs a schedule: posts each step once its dependencies are done and
 * its peer's earlier steps are posted, reduces incoming data as it arrives, and
 * fails on a dead peer or on HCOMM_TIMEOUT seconds without progress. */
#include "core/exec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "core/comm.h"
#include "base/log.h"
#include "base/reduce.h"

enum { STEP_WAITING = 0, STEP_POSTED = 1, STEP_DONE = 2 };

/* How often (in idle progress calls) to look at the clock and at endpoints. */
#define EXEC_CHECK_EVERY 64

static const char *const step_names[HC_STEP_KIND_COUNT] = {
    "send", "recv", "recv_reduce", "copy", "reduce", "div"};

/* Grows *p to hold n elements of size sz; keeps old contents. */
static int exec_grow(void **p, size_t n, size_t sz)
{
    void *q = realloc(*p, n * sz);
    if (q == NULL)
        return -1;
    *p = q;
    return 0;
}

hcomm_status_t hc_exec_prepare(hc_op_t *op, struct hcomm_comm *comm, hc_sched_t *sched,
                               void *const *bufs, size_t tmp_total)
{
    uint32_t n = sched->nsteps;
    int      np = comm->nranks;

    if (n > op->cap_steps) {
        if (exec_grow((void **)&op->reqs, n, sizeof(*op->reqs)) ||
            exec_grow((void **)&op->sinks, n, sizeof(*op->sinks)) ||
            exec_grow((void **)&op->state, n, sizeof(*op->state)))
            goto err_nomem;
        op->cap_steps = n;
    }
    if (np > op->cap_peers) {
        if (exec_grow((void **)&op->next_send, (size_t)np, sizeof(uint32_t)) ||
            exec_grow((void **)&op->next_recv, (size_t)np, sizeof(uint32_t)))
            goto err_nomem;
        op->cap_peers = np;
    }
    if (op->bufs != NULL && op->bufs != op->bufs_inline)
        free(op->bufs);
    op->bufs = op->bufs_inline;
    if (sched->nbufs > HC_BUF_PER_OP) {
        op->bufs = malloc(sched->nbufs * sizeof(void *));
        if (op->bufs == NULL)
            goto err_nomem;
    }
    memcpy(op->bufs, bufs, sched->nbufs * sizeof(void *));

    op->ndiv = sched->ndiv;
    memset(op->state, 0, n);
    memset(op->next_send, 0, (size_t)np * sizeof(uint32_t));
    memset(op->next_recv, 0, (size_t)np * sizeof(uint32_t));
    op->tmp_total     = tmp_total;
    op->comm          = comm;
    op->sched         = sched;
    op->status        = HCOMM_IN_PROGRESS;
    op->started       = 0;
    op->first_pending = 0;
    op->ndone         = 0;
    op->poll_tick     = 0;
    op->bytes_seen    = 0;
    op->next          = NULL;
    return HCOMM_SUCCESS;

err_nomem:
    hc_error(EXEC, "out of memory preparing an operation of %u steps", n);
    return HCOMM_ERR_NO_MEMORY;
}

void hc_exec_release(hc_op_t *op)
{
    if (op->own_sched)
        hc_sched_destroy(op->sched);
    op->sched     = NULL;
    op->own_sched = 0;
    if (op->bufs != op->bufs_inline)
        free(op->bufs);
    op->bufs = NULL;
    free(op->reqs);
    free(op->sinks);
    free(op->state);
    free(op->next_send);
    free(op->next_recv);
    op->reqs      = NULL;
    op->sinks     = NULL;
    op->state     = NULL;
    op->next_send = op->next_recv = NULL;
    op->cap_steps = 0;
    op->cap_peers = 0;
}

static inline char *exec_ptr(const hc_op_t *op, hc_slice_t sl)
{
    return (char *)op->bufs[sl.buf] + sl.off;
}

/* Reduces one piece of an incoming message; keeps a partial element for the next. */
static void exec_sink(void *arg, size_t off, const void *data, size_t len)
{
    hc_exec_sink_t *s  = arg;
    const char     *p  = data;
    size_t          es = s->esize;

    if (s->carry_len != 0) {
        size_t take = es - s->carry_len < len ? es - s->carry_len : len;
        memcpy(s->carry + s->carry_len, p, take);
        s->carry_len += (uint8_t)take;
        p += take, len -= take, off += take;
        if (s->carry_len < es)
            return;
        hc_reduce(s->dst + off - es, s->src + off - es, s->carry, 1, s->dtype, s->op);
        s->carry_len = 0;
    }
    size_t n = len / es;
    if (n != 0)
        hc_reduce(s->dst + off, s->src + off, p, n, s->dtype, s->op);
    if (len - n * es != 0) {
        memcpy(s->carry, p + n * es, len - n * es);
        s->carry_len = (uint8_t)(len - n * es);
    }
}

static void exec_fail(hc_op_t *op, hcomm_status_t status)
{
    op->status = status;
    hc_comm_fail(op->comm, status);
}

static int exec_deps_done(const hc_op_t *op, const hc_step_t *st)
{
    return (st->dep[0] < 0 || op->state[st->dep[0]] == STEP_DONE) &&
           (st->dep[1] < 0 || op->state[st->dep[1]] == STEP_DONE);
}

/* Posts a send or receive step if its turn has come; returns a status. */
static hcomm_status_t exec_post(hc_op_t *op, uint32_t i)
{
    const hc_step_t   *st   = &op->sched->steps[i];
    struct hcomm_comm *comm = op->comm;
    hc_tl_req_t       *req  = &op->reqs[i];
    hcomm_status_t     status;

    if (st->peer < 0 || st->peer >= comm->nranks || comm->eps[st->peer] == NULL) {
        hc_error(EXEC, "step %u: %s with rank %d, which has no endpoint", i,
                 step_names[st->kind], st->peer);
        return HCOMM_ERR_PROTOCOL;
    }
    hc_tl_ep_t        *ep = comm->eps[st->peer];
    const hc_tl_ops_t *tl = comm->tl_ops[comm->ep_tl[st->peer]];

    req->status = HCOMM_IN_PROGRESS;
    if (st->kind == HC_STEP_SEND) {
        if (st->pseq != op->next_send[st->peer])
            return HCOMM_IN_PROGRESS;
        status = tl->isend(ep, exec_ptr(op, st->src), st->len, req);
        op->next_send[st->peer]++;
        comm->bytes_sent += st->len;
    } else {
        if (st->pseq != op->next_recv[st->peer])
            return HCOMM_IN_PROGRESS;
        if (st->kind == HC_STEP_RECV) {
            status = tl->irecv(ep, exec_ptr(op, st->dst), st->len, NULL, NULL, req);
        } else {
            hc_exec_sink_t *sk = &op->sinks[i];
            sk->dst            = exec_ptr(op, st->dst);
            sk->src            = exec_ptr(op, st->src);
            sk->dtype          = st->dtype;
            sk->op             = st->op;
            sk->esize          = (uint8_t)hcomm_dtype_size((hcomm_dtype_t)st->dtype);
            sk->carry_len      = 0;
            status = tl->irecv(ep, NULL, st->len, exec_sink, sk, req);
        }
        op->next_recv[st->peer]++;
    }
    if (status != HCOMM_SUCCESS) {
        hc_error(EXEC, "%s of %zu bytes with rank %d failed: %s", step_names[st->kind], st->len,
                 st->peer, hcomm_status_str(status));
        return status;
    }
    op->state[i] = STEP_POSTED;
    op->nposted++;
    return HCOMM_SUCCESS;
}

/* Runs a local step (copy, reduce, div) that is ready. */
static void exec_local(hc_op_t *op, uint32_t i)
{
    const hc_step_t *st = &op->sched->steps[i];
    char            *dst = exec_ptr(op, st->dst);
    size_t           es  = hcomm_dtype_size((hcomm_dtype_t)st->dtype);

    switch (st->kind) {
    case HC_STEP_COPY: {
        const char *src = exec_ptr(op, st->src);
        if (src != dst && st->len != 0)
            memmove(dst, src, st->len);
        break;
    }
    case HC_STEP_REDUCE:
        hc_reduce(dst, exec_ptr(op, st->src), exec_ptr(op, st->src2), st->len / es,
                  (hcomm_dtype_t)st->dtype, (hcomm_op_t)st->op);
        break;
    case HC_STEP_DIV:
        hc_reduce_div(dst, st->len / es, (hcomm_dtype_t)st->dtype, st->peer);
        op->ndiv--; /* the other DIVs of a fused group wait only for non-DIV steps */
        break;
    default:
        break;
    }
    op->state[i] = STEP_DONE;
    op->ndone++;
}

/* One pass over the pending steps; returns how many finished, or -1 on failure. */
static int exec_scan(hc_op_t *op)
{
    const hc_sched_t *s        = op->sched;
    int               finished = 0;

    for (uint32_t i = op->first_pending; i < s->nsteps; i++) {
        const hc_step_t *st = &s->steps[i];
        switch (op->state[i]) {
        case STEP_DONE:
            continue;
        case STEP_POSTED:
            if (op->reqs[i].status == HCOMM_IN_PROGRESS)
                continue;
            if (op->reqs[i].status != HCOMM_SUCCESS) {
                hc_error(EXEC, "%s of %zu bytes with rank %d failed: %s",
                         step_names[st->kind], st->len, st->peer,
                         hcomm_status_str(op->reqs[i].status));
                exec_fail(op, op->reqs[i].status);
                return -1;
            }
            op->state[i] = STEP_DONE;
            op->ndone++;
            finished++;
            continue;
        default:
            break;
        }
        if (!exec_deps_done(op, st))
            continue;
        if (st->kind <= HC_STEP_RECV_REDUCE) {
            hcomm_status_t status = exec_post(op, i);
            if (status < 0) {
                exec_fail(op, status);
                return -1;
            }
        } else if (st->kind != HC_STEP_DIV || op->ndone + op->ndiv == s->nsteps) {
            exec_local(op, i);
            finished++;
        }
    }
    while (op->first_pending < s->nsteps && op->state[op->first_pending] == STEP_DONE)
        op->first_pending++;
    return finished;
}

/* Fails op when a peer it still has to exchange data with failed (a peer that
 * merely finished and left is fine), or when nothing moved for too long. */
static void exec_check_health(hc_op_t *op)
{
    struct hcomm_comm *comm = op->comm;
    const hc_sched_t  *s    = op->sched;
    double             now  = hc_clock_coarse();

    for (uint32_t i = op->first_pending; i < s->nsteps; i++) {
        const hc_step_t *st = &s->steps[i];
        if (op->state[i] == STEP_DONE || st->kind > HC_STEP_RECV_REDUCE)
            continue;
        hc_tl_ep_t *ep = comm->eps[st->peer];
        if (ep == NULL)
            continue;
        hcomm_status_t es = comm->tl_ops[comm->ep_tl[st->peer]]->ep_status(ep);
        if (es != HCOMM_SUCCESS) {
            hc_error(EXEC, "rank %d failed (%s) with a %s of %zu bytes pending: operation aborted",
                     st->peer, hcomm_status_str(es), step_names[st->kind], st->len);
            exec_fail(op, es);
            return;
        }
    }
    size_t moved = 0; /* bytes of posted steps: one long message is progress too */
    for (uint32_t i = op->first_pending; i < s->nsteps; i++)
        if (op->state[i] == STEP_POSTED)
            moved += op->reqs[i].done;
    if (moved != op->bytes_seen) {
        op->bytes_seen    = moved;
        op->last_progress = now;
    }
    if (now - op->last_progress > comm->timeout) {
        const hc_step_t *st = &op->sched->steps[op->first_pending];
        hc_error(EXEC, "no progress for %.1f s (HCOMM_TIMEOUT): waiting on %s of %zu bytes with rank %d",
                 now - op->last_progress, step_names[st->kind], st->len, st->peer);
        exec_fail(op, HCOMM_ERR_TIMEOUT);
    }
}

/* Binds the op's scratch regions: only the head op of a communicator runs. */
static hcomm_status_t exec_start(hc_op_t *op)
{
    struct hcomm_comm *comm = op->comm;

    if (hc_comm_reserve_scratch(comm, op->tmp_total) != HCOMM_SUCCESS) {
        exec_fail(op, HCOMM_ERR_NO_MEMORY);
        return op->status;
    }
    for (uint32_t b = HC_BUF_TMP; b < op->sched->nbufs; b += HC_BUF_PER_OP)
        op->bufs[b] = (char *)comm->scratch + (uintptr_t)op->bufs[b];
    op->started       = 1;
    op->last_progress = hc_clock_coarse();
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_exec_progress(hc_op_t *op)
{
    struct hcomm_comm *comm = op->comm;

    if (op->status != HCOMM_IN_PROGRESS)
        return op->status;
    if (comm->error != HCOMM_SUCCESS) {
        op->status = comm->error;
        return op->status;
    }
    if (!op->started && exec_start(op) != HCOMM_SUCCESS)
        return op->status;
    for (int i = 0; i < comm->nactive; i++)
        comm->tl_ops[comm->tl_active[i]]->progress(comm->tl_ctx[comm->tl_active[i]]);

    unsigned posted   = op->nposted;
    int      finished = exec_scan(op);
    if (finished < 0)
        return op->status;
    if (op->nposted != posted) /* push what was just posted without another round */
        for (int i = 0; i < comm->nactive; i++)
            comm->tl_ops[comm->tl_active[i]]->progress(comm->tl_ctx[comm->tl_active[i]]);
    if (op->ndone == op->sched->nsteps) {
        op->status = HCOMM_SUCCESS;
        return op->status;
    }
    if (op->nposted != posted || finished > 0)
        comm->moved++;
    if (finished > 0) {
        op->poll_tick     = 0;
        op->last_progress = hc_clock_coarse();
    } else if (++op->poll_tick % EXEC_CHECK_EVERY == 0) {
        exec_check_health(op);
    }
    return op->status;
}
