/* exec.c - runs a schedule: posts each step once its dependencies are done and
 * its peer's earlier steps are posted, reduces incoming data as it arrives, and
 * fails on a dead peer or on HCOMM_TIMEOUT seconds without progress. */
#include "core/exec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/dtype.h"
#include "base/log.h"
#include "base/reduce.h"
#include "core/comm.h"
#include "core/ops.h"
#include "core/stage.h"
#include "core/watch.h"

enum { STEP_WAITING = 0, STEP_POSTED = 1, STEP_DONE = 2 };

/* How often (in idle progress calls) to look at the clock and at endpoints. */
#define EXEC_CHECK_EVERY 64
#define EXEC_STALL_ASK_S 2.0 /* no progress this long: is the awaited peer gone? */

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

hcomm_status_t hc_exec_reserve(hcomm_request_t req, uint32_t nsteps, int nranks, uint32_t nbufs)
{
    if (nsteps > req->cap_steps) {
        uint32_t cap = nsteps < HC_EXEC_SMALL_STEPS ? HC_EXEC_SMALL_STEPS : nsteps;
        if (exec_grow((void **)&req->tl_reqs, cap, sizeof(*req->tl_reqs)) ||
            exec_grow((void **)&req->sinks, cap, sizeof(*req->sinks)) ||
            exec_grow((void **)&req->state, cap, sizeof(*req->state)))
            goto err_nomem;
        req->cap_steps = cap;
    }
    if (nranks > req->cap_peers) {
        if (exec_grow((void **)&req->next_send, (size_t)nranks, sizeof(uint32_t)) ||
            exec_grow((void **)&req->next_recv, (size_t)nranks, sizeof(uint32_t)))
            goto err_nomem;
        req->cap_peers = nranks;
    }
    if (req->bufs != NULL && req->bufs != req->bufs_inline)
        free(req->bufs);
    req->bufs = req->bufs_inline;
    if (nbufs > HC_REQ_BUFS_INLINE) {
        req->bufs = malloc(nbufs * sizeof(void *));
        if (req->bufs == NULL)
            goto err_nomem;
    }
    return HCOMM_SUCCESS;

err_nomem:
    hc_error(EXEC, "out of memory preparing a request of %u steps", nsteps);
    return HCOMM_ERR_NO_MEMORY;
}

/* Fills req for sched; its arrays are sized. Inline: the small path's copy
 * makes no call, so it saves no registers. */
static inline __attribute__((always_inline)) void exec_fill(hcomm_request_t    req,
                                                            struct hcomm_comm *comm,
                                                            hc_sched_t *sched, void *const *bufs,
                                                            size_t tmp_total, int small)
{
    uint32_t n = sched->nsteps;
    if (small) { /* one call's buffers, at most HC_EXEC_SMALL_STEPS steps: stores, no libc call */
        req->bufs[0] = bufs[0], req->bufs[1] = bufs[1], req->bufs[2] = bufs[2];
        memset(req->state, 0, HC_EXEC_SMALL_STEPS);
    } else {
        memcpy(req->bufs, bufs, sched->nbufs * sizeof(void *));
        if (n != 0) /* a schedule without steps (count 0) has no state yet: NULL */
            memset(req->state, 0, n);
    }
    req->ndiv = sched->ndiv;
    /* only the peers the schedule talks to: per call O(its peers), not O(ranks) */
    for (uint32_t k = 0; k < sched->npeers; k++)
        req->next_send[sched->peers[k]] = req->next_recv[sched->peers[k]] = 0;
    req->tmp_total     = tmp_total;
    req->comm          = comm;
    req->sched         = sched;
    req->status        = HCOMM_IN_PROGRESS;
    req->started       = 0;
    req->ahead_done    = 0;
    req->nposted       = 0;
    req->first_pending = 0;
    req->ndone         = 0;
    req->poll_tick     = 0;
    req->bytes_seen    = 0;
    req->left_seen     = 0;
    req->next          = NULL;
}

static hcomm_status_t __attribute__((noinline))
exec_prepare_sized(hcomm_request_t req, struct hcomm_comm *comm, hc_sched_t *sched,
                   void *const *bufs, size_t tmp_total)
{
    if (hc_exec_reserve(req, sched->nsteps, comm->nranks, sched->nbufs) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    exec_fill(req, comm, sched, bufs, tmp_total,
              sched->nbufs == HC_BUF_PER_OP && sched->nsteps != 0 &&
                  sched->nsteps <= HC_EXEC_SMALL_STEPS);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_exec_prepare(hcomm_request_t req, struct hcomm_comm *comm, hc_sched_t *sched,
                               void *const *bufs, size_t tmp_total)
{
    uint32_t n = sched->nsteps;
    if (n == 0 || n > HC_EXEC_SMALL_STEPS || n > req->cap_steps || comm->nranks > req->cap_peers ||
        req->bufs != req->bufs_inline || sched->nbufs != HC_BUF_PER_OP)
        return exec_prepare_sized(req, comm, sched, bufs, tmp_total);
    exec_fill(req, comm, sched, bufs, tmp_total, 1);
    return HCOMM_SUCCESS;
}

void hc_exec_release(hcomm_request_t req)
{
    hc_stage_free(NULL, req->stage);
    req->stage = NULL;
    if (req->own_sched)
        hc_sched_destroy(req->sched);
    req->sched     = NULL;
    req->own_sched = 0;
    if (req->bufs != req->bufs_inline)
        free(req->bufs);
    req->bufs = NULL;
    free(req->tl_reqs);
    free(req->sinks);
    free(req->state);
    free(req->next_send);
    free(req->next_recv);
    req->tl_reqs      = NULL;
    req->sinks     = NULL;
    req->state     = NULL;
    req->next_send = req->next_recv = NULL;
    req->cap_steps = 0;
    req->cap_peers = 0;
    free(req->prof_calls);
    req->prof_calls  = NULL;
    req->prof_ncalls = 0;
}

static inline char *exec_ptr(const struct hcomm_request *req, hc_slice_t sl)
{
    return (char *)req->bufs[sl.buf] + sl.off;
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

static void exec_fail(hcomm_request_t req, hcomm_status_t status)
{
    /* the communicator's first failure for want of a peer: who, and where
     * the others are, before the transports close */
    if ((status == HCOMM_ERR_TIMEOUT || status == HCOMM_ERR_REMOTE) &&
        req->comm->error == HCOMM_SUCCESS)
        status = __atomic_load_n(&req->comm->revoked, __ATOMIC_RELAXED)
                     ? HCOMM_ERR_REVOKED
                     : hc_watch_verdict(req->comm, req, status);
    req->status = status;
    hc_comm_fail(req->comm, status);
}

static int exec_deps_done(const struct hcomm_request *req, const hc_step_t *st)
{
    return (st->dep[0] < 0 || req->state[st->dep[0]] == STEP_DONE) &&
           (st->dep[1] < 0 || req->state[st->dep[1]] == STEP_DONE);
}

/* A staged request's step waits until the input it touches is copied in. */
static int exec_stage_ready(const struct hcomm_request *req, const hc_step_t *st)
{
    const hc_stage_t *sg = req->stage;
    int rd = st->kind != HC_STEP_RECV && st->kind != HC_STEP_DIV; /* reads src */
    int wr = st->kind != HC_STEP_SEND;                            /* writes dst */
    return (!rd || hc_stage_ready(sg, exec_ptr(req, st->src), st->len)) &&
           (!wr || hc_stage_ready(sg, exec_ptr(req, st->dst), st->len)) &&
           (st->kind != HC_STEP_REDUCE || hc_stage_ready(sg, exec_ptr(req, st->src2), st->len));
}

/* Posts a send or receive step if its turn has come; returns a status. */
static hcomm_status_t exec_post(hcomm_request_t req, uint32_t i)
{
    const hc_step_t   *st   = &req->sched->steps[i];
    struct hcomm_comm *comm = req->comm;
    hc_tl_req_t       *treq = &req->tl_reqs[i];
    hcomm_status_t     status;

    if (st->peer < 0 || st->peer >= comm->nranks || st->peer == comm->rank) {
        hc_error(EXEC, "step %u: %s with rank %d of %d", i, step_names[st->kind], st->peer,
                 comm->nranks);
        return HCOMM_ERR_PROTOCOL;
    }
    if (comm->eps[st->peer] == NULL) { /* the pair's first use: not posted until connected */
        status = hc_comm_connect(comm, st->peer);
        if (status != HCOMM_SUCCESS)
            return status;
    }
    hc_tl_ep_t        *ep = comm->eps[st->peer];
    const hc_tl_ops_t *tl = comm->tl_ops[comm->ep_tl[st->peer]];

    treq->status = HCOMM_IN_PROGRESS;
    if (st->kind == HC_STEP_SEND) {
        if (st->pseq != req->next_send[st->peer])
            return HCOMM_IN_PROGRESS;
        status = tl->isend(ep, exec_ptr(req, st->src), st->len, treq);
        req->next_send[st->peer]++;
        comm->bytes_sent += st->len;
    } else {
        if (st->pseq != req->next_recv[st->peer])
            return HCOMM_IN_PROGRESS;
        if (st->kind == HC_STEP_RECV) {
            status = tl->irecv(ep, exec_ptr(req, st->dst), st->len, NULL, NULL, treq);
        } else {
            hc_exec_sink_t *sk = &req->sinks[i];
            sk->dst            = exec_ptr(req, st->dst);
            sk->src            = exec_ptr(req, st->src);
            sk->dtype          = st->dtype;
            sk->op             = st->op;
            sk->esize          = (uint8_t)hc_dtype_size((hcomm_dtype_t)st->dtype);
            sk->carry_len      = 0;
            status = tl->irecv(ep, NULL, st->len, exec_sink, sk, treq);
        }
        req->next_recv[st->peer]++;
    }
    if (status != HCOMM_SUCCESS) {
        hc_error(EXEC, "%s of %zu bytes with rank %d failed: %s", step_names[st->kind], st->len,
                 st->peer, hcomm_status_str(status));
        return status;
    }
    req->state[i] = STEP_POSTED;
    req->nposted++;
    return HCOMM_SUCCESS;
}

/* Runs a local step (copy, reduce, div) that is ready. */
static void exec_local(hcomm_request_t req, uint32_t i)
{
    const hc_step_t *st = &req->sched->steps[i];
    char            *dst = exec_ptr(req, st->dst);
    size_t           es  = hc_dtype_size((hcomm_dtype_t)st->dtype);

    switch (st->kind) {
    case HC_STEP_COPY: {
        const char *src = exec_ptr(req, st->src);
        if (src != dst && st->len != 0)
            memmove(dst, src, st->len);
        break;
    }
    case HC_STEP_REDUCE:
        hc_reduce(dst, exec_ptr(req, st->src), exec_ptr(req, st->src2), st->len / es,
                  (hcomm_dtype_t)st->dtype, (hcomm_op_t)st->op);
        break;
    case HC_STEP_DIV:
        hc_reduce_div(dst, st->len / es, (hcomm_dtype_t)st->dtype, st->peer);
        req->ndiv--; /* the other DIVs of a fused group wait only for non-DIV steps */
        break;
    default:
        break;
    }
    req->state[i] = STEP_DONE;
    req->ndone++;
}

/* One pass over the pending steps; returns how many finished, or -1 on failure. */
static int exec_scan(hcomm_request_t req)
{
    const hc_sched_t *s        = req->sched;
    int               finished = 0;

    for (uint32_t i = req->first_pending; i < s->nsteps; i++) {
        const hc_step_t *st = &s->steps[i];
        switch (req->state[i]) {
        case STEP_DONE:
            continue;
        case STEP_POSTED:
            if (req->tl_reqs[i].status == HCOMM_IN_PROGRESS)
                continue;
            if (req->tl_reqs[i].status != HCOMM_SUCCESS) {
                hc_error(EXEC, "%s of %zu bytes with rank %d failed: %s",
                         step_names[st->kind], st->len, st->peer,
                         hcomm_status_str(req->tl_reqs[i].status));
                exec_fail(req, req->tl_reqs[i].status);
                return -1;
            }
            if (req->tl_reqs[i].timed_ns != 0) /* a timed receive (core/health.h) */
                hc_link_note(req->comm, st->peer, req->tl_reqs[i].timed_bytes,
                             req->tl_reqs[i].timed_ns);
            req->state[i] = STEP_DONE;
            req->ndone++;
            finished++;
            continue;
        default:
            break;
        }
        if (!exec_deps_done(req, st) || (req->stage != NULL && !exec_stage_ready(req, st)))
            continue;
        if (st->kind <= HC_STEP_RECV_REDUCE) {
            hcomm_status_t status = exec_post(req, i);
            if (status < 0) {
                exec_fail(req, status);
                return -1;
            }
        } else if (st->kind != HC_STEP_DIV || req->ndone + req->ndiv == s->nsteps) {
            exec_local(req, i);
            finished++;
        }
    }
    while (req->first_pending < s->nsteps && req->state[req->first_pending] == STEP_DONE)
        req->first_pending++;
    return finished;
}

/* A stalled request whose awaited peer's communicator is gone while its
 * process lives (destroyed, or aborted after a failure of its own) waits for
 * what will never come: the transports see most such peers go (tcp's hang-up,
 * shm's closed flag, ofi's and ucx's bye), this catches one whose goodbye was
 * lost (seen: over ofi's tcp;ofi_rxm, nothing the side that took a truncated
 * message sends afterwards arrives, its bye included). Its watch is
 * asked after EXEC_STALL_ASK_S without progress; the request fails at the
 * next check if nothing moved meanwhile (what the peer sent before it left is
 * taken in by the rounds between). */
static int exec_peer_left(hcomm_request_t req, int peer, double now)
{
    struct hcomm_comm *comm = req->comm;
    if (req->left_seen > req->last_progress) {
        hc_error(EXEC,
                 "rank %d: its communicator is gone (destroyed or aborted) while this rank "
                 "waits for it: operation aborted",
                 peer);
        exec_fail(req, HCOMM_ERR_REMOTE);
        return 1;
    }
    if (now - req->last_progress > EXEC_STALL_ASK_S &&
        hc_comm_peer_left_after(comm, peer, now - req->last_progress))
        req->left_seen = now;
    return 0;
}

/* Fails req when a peer it still has to exchange data with failed (a peer that
 * merely finished and left is fine), or when nothing moved for too long. */
static void exec_check_health(hcomm_request_t req)
{
    struct hcomm_comm *comm = req->comm;
    const hc_sched_t  *s    = req->sched;
    uint64_t           ns   = hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE);
    double             now  = (double)ns * 1e-9;

    comm->ops_coarse = ns; /* an operation's end, where no other clock is read */

    int waiting = -1; /* for peers asking where this rank is (core/watch.h) */
    for (uint32_t i = req->first_pending; i < s->nsteps; i++) {
        const hc_step_t *st = &s->steps[i];
        if (req->state[i] == STEP_DONE || st->kind > HC_STEP_RECV_REDUCE)
            continue;
        if (waiting < 0)
            waiting = st->peer;
        hc_tl_ep_t *ep = comm->eps[st->peer];
        if (ep == NULL)
            continue;
        const hc_tl_ops_t *tl = comm->tl_ops[comm->ep_tl[st->peer]];
        hcomm_status_t     es = tl->ep_status(ep);
        if (es == HCOMM_IN_PROGRESS && hc_comm_peer_left(comm, st->peer) &&
            (es = tl->ep_status(ep)) == HCOMM_IN_PROGRESS) /* and never joined the pair */
            es = hc_comm_peer_gone(comm, st->peer);
        if (es != HCOMM_SUCCESS && es != HCOMM_IN_PROGRESS) {
            hc_error(EXEC, "rank %d failed (%s) with a %s of %zu bytes pending: operation aborted",
                     st->peer, hcomm_status_str(es), step_names[st->kind], st->len);
            exec_fail(req, es);
            return;
        }
    }
    __atomic_store_n(&comm->ops_pub.waiting, waiting, __ATOMIC_RELAXED);
    size_t moved = 0; /* bytes of posted steps: one long message is progress too */
    for (uint32_t i = req->first_pending; i < s->nsteps; i++)
        if (req->state[i] == STEP_POSTED)
            moved += req->tl_reqs[i].done;
    if (moved != req->bytes_seen) {
        req->bytes_seen    = moved;
        req->last_progress = now;
    }
    if (waiting >= 0 && exec_peer_left(req, waiting, now))
        return;
    if (now - req->last_progress > comm->timeout) {
        const hc_step_t *st = &req->sched->steps[req->first_pending];
        hc_error(EXEC,
                 "no progress for %.1f s (timeout %g s): waiting on %s of %zu bytes with rank %d",
                 now - req->last_progress, comm->timeout, step_names[st->kind], st->len, st->peer);
        exec_fail(req, HCOMM_ERR_TIMEOUT);
    }
}

/* Binds the request's scratch regions: only the head request of a communicator runs. */
static hcomm_status_t exec_start(hcomm_request_t req)
{
    struct hcomm_comm *comm = req->comm;

    if (hc_comm_reserve_scratch(comm, req->tmp_total) != HCOMM_SUCCESS) {
        exec_fail(req, HCOMM_ERR_NO_MEMORY);
        return req->status;
    }
    for (uint32_t b = HC_BUF_TMP; b < req->sched->nbufs; b += HC_BUF_PER_OP)
        req->bufs[b] = (char *)comm->scratch + (uintptr_t)req->bufs[b];
    /* every pair the schedule uses acts on its connection now, whatever the
     * order of the steps: a pair whose first step waits for data from a third
     * rank must not keep that rank waiting for a connection (transport.h) */
    for (uint32_t k = 0; k < req->sched->npeers; k++) {
        int p = req->sched->peers[k];
        if (comm->eps[p] == NULL) {
            hcomm_status_t st = hc_comm_connect(comm, p);
            if (st != HCOMM_SUCCESS && st != HCOMM_IN_PROGRESS) {
                exec_fail(req, st);
                return req->status;
            }
        }
    }
    uint64_t now       = hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE);
    req->started       = 1;
    req->last_progress = (double)now * 1e-9;
    comm->ops_coarse   = now;
    hc_ops_start(req, now);
    return HCOMM_SUCCESS;
}

int hc_exec_waiting_peers(const struct hcomm_request *req, int32_t *peers, int max)
{
    int n = 0;
    for (uint32_t i = req->first_pending; req->sched && i < req->sched->nsteps && n < max; i++) {
        const hc_step_t *st = &req->sched->steps[i];
        if (req->state[i] != STEP_POSTED)
            continue;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = peers[k] == st->peer;
        if (!seen)
            peers[n++] = st->peer;
    }
    return n;
}

hcomm_status_t hc_exec_progress(hcomm_request_t req)
{
    struct hcomm_comm *comm = req->comm;

    if (req->status != HCOMM_IN_PROGRESS)
        return req->status;
    if (comm->error != HCOMM_SUCCESS) {
        req->status = comm->error;
        return req->status;
    }
    if (!req->started && exec_start(req) != HCOMM_SUCCESS)
        return req->status;
    for (int i = 0; i < comm->nactive; i++)
        comm->tl_ops[comm->tl_active[i]]->progress(comm->tl_ctx[comm->tl_active[i]]);
    if (req->stage != NULL && req->stage->in_done < req->stage->in_bytes) {
        hcomm_status_t st = hc_stage_in_next(req->stage); /* a chunk per round */
        if (st != HCOMM_SUCCESS) {
            exec_fail(req, st);
            return req->status;
        }
        req->last_progress = (double)hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE) * 1e-9;
    }

    unsigned posted   = req->nposted;
    int      finished = exec_scan(req);
    if (finished < 0)
        return req->status;
    if (req->nposted != posted) /* push what was just posted without another round */
        for (int i = 0; i < comm->nactive; i++)
            comm->tl_ops[comm->tl_active[i]]->progress(comm->tl_ctx[comm->tl_active[i]]);
    /* all of a staged input in, even what no step touched: it goes out again */
    if (req->ndone == req->sched->nsteps &&
        (req->stage == NULL || req->stage->in_done == req->stage->in_bytes)) {
        req->status = HCOMM_SUCCESS;
        return req->status;
    }
    if (req->nposted != posted || finished > 0)
        __atomic_store_n(&comm->moved, comm->moved + 1, __ATOMIC_RELAXED); /* one writer */
    if (finished > 0) {
        req->poll_tick     = 0;
        comm->ops_coarse   = hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE);
        req->last_progress = (double)comm->ops_coarse * 1e-9;
    } else {
        if (comm->trace != NULL && req->nposted == posted) /* waiting: code its records */
            hc_trace_idle(comm);
        if (++req->poll_tick % EXEC_CHECK_EVERY == 0)
            exec_check_health(req);
    }
    return req->status;
}
