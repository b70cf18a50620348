/* comm_queue.c - a communicator's operations: issue in order, progress the head,
 * wait with a bounded spin; the schedule cache and the shared scratch buffer. */
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "base/clock.h"
#include "base/log.h"

hcomm_status_t hc_comm_reserve_scratch(hcomm_comm_t comm, size_t size)
{
    if (size <= comm->scratch_size)
        return HCOMM_SUCCESS;
    void *p = NULL;
    if (posix_memalign(&p, 64, size) != 0) {
        hc_error(EXEC, "cannot allocate %zu bytes of scratch", size);
        return HCOMM_ERR_NO_MEMORY;
    }
    free(comm->scratch);
    comm->scratch      = p;
    comm->scratch_size = size;
    return HCOMM_SUCCESS;
}

static int cache_match(const hc_sched_cache_entry_t *e, const hc_coll_args_t *a, hc_algo_t algo,
                       size_t chunk)
{
    return e->algo == algo && e->chunk_bytes == chunk && e->args.coll == a->coll &&
           e->args.count == a->count && e->args.dtype == a->dtype && e->args.op == a->op &&
           e->args.root == a->root && e->args.in_place == a->in_place;
}

void hc_comm_cache_clear(hcomm_comm_t comm)
{
    for (int i = 0; i < comm->ncache; i++)
        hc_sched_destroy(comm->cache[i].sched);
    comm->ncache    = 0;
    comm->cache_mru = 0;
}

hcomm_status_t hc_comm_get_sched(hcomm_comm_t comm, const hc_coll_args_t *args,
                                 hc_sched_t **sched_p, int *owned_p)
{
    const hc_params_t *p      = hc_params_get();
    size_t             chunk;
    int                victim = 0;

    /* alltoallv's schedule follows its counts: built for each call, not cached */
    int cacheable = args->coll != HC_COLL_ALLTOALLV;

    /* the algorithm follows from args and the parameters, so a repeat of the
     * last call needs no selection (unless calibration forces another) */
    if (cacheable && comm->cache_mru < comm->ncache) {
        hc_sched_cache_entry_t *e = &comm->cache[comm->cache_mru];
        if (cache_match(e, args, e->algo, e->chunk_bytes) && e->algo_setting == p->algo &&
            (comm->cal_algo == HC_ALGO_AUTO || comm->cal_algo == e->algo)) {
            e->last_use = ++comm->cache_clock;
            *sched_p    = e->sched;
            *owned_p    = 0;
            return HCOMM_SUCCESS;
        }
    }
    hc_algo_t algo = hc_comm_select(comm, args, p, &chunk);
    for (int i = 0; i < comm->ncache && cacheable; i++) {
        hc_sched_cache_entry_t *e = &comm->cache[i];
        if (cache_match(e, args, algo, chunk)) {
            e->last_use     = ++comm->cache_clock;
            comm->cache_mru = i;
            *sched_p        = e->sched;
            *owned_p        = 0;
            return HCOMM_SUCCESS;
        }
        if (e->last_use < comm->cache[victim].last_use)
            victim = i;
    }
    hc_sched_t    *s  = NULL;
    hcomm_status_t st = hc_comm_build(comm, args, algo, chunk, &s);
    if (st == HCOMM_SUCCESS)
        st = hc_sched_finalize(s);
    if (st != HCOMM_SUCCESS) {
        hc_error(ALGO, "building %s with %s for %zu elements failed: %s",
                 hc_coll_name(args->coll), hc_algo_name(algo), args->count,
                 hcomm_status_str(st));
        if (s != NULL)
            hc_sched_destroy(s);
        return st;
    }
    hc_debug(ALGO, "%s of %zu elements (%zu bytes): %s, %u steps", hc_coll_name(args->coll),
             args->count, args->count * hcomm_dtype_size(args->dtype), hc_algo_name(algo),
             s->nsteps);
    *sched_p = s;
    *owned_p = !cacheable;
    if (!cacheable)
        return HCOMM_SUCCESS;
    if (comm->ncache < HC_SCHED_CACHE_MAX) {
        victim = comm->ncache++;
    } else if (comm->op_head == NULL) {
        hc_sched_destroy(comm->cache[victim].sched);
    } else {
        /* a queued op may hold the victim: this op owns its schedule instead */
        *owned_p = 1;
        return HCOMM_SUCCESS;
    }
    comm->cache[victim] = (hc_sched_cache_entry_t){
        .args = *args, .algo = algo, .algo_setting = p->algo, .chunk_bytes = chunk, .sched = s,
        .last_use = ++comm->cache_clock};
    comm->cache_mru = victim;
    return HCOMM_SUCCESS;
}

hc_op_t *hc_comm_op_alloc(hcomm_comm_t comm)
{
    hc_op_t *op = comm->op_free;
    if (op != NULL) {
        comm->op_free = op->next;
        comm->nfree--;
        op->next       = NULL;
        op->gated      = 0;
        op->holders    = 0;
        op->gate_since = 0;
        return op;
    }
    op = calloc(1, sizeof(*op));
    if (op == NULL)
        hc_error(EXEC, "out of memory for an operation");
    return op;
}

void hc_comm_make_threaded(hcomm_comm_t comm)
{
    /* by the issuing thread, before any stream sees the comm; written once */
    if (!comm->threaded)
        comm->threaded = 1;
}

void hc_op_open_gate(hc_op_t *op)
{
    hc_comm_lock(op->comm);
    op->gated = 0;
    hc_comm_unlock(op->comm);
}

void hc_op_drop(hc_op_t *op)
{
    hcomm_comm_t comm = op->comm;
    hc_comm_lock(comm);
    if (--op->holders == 0) {
        comm->held--;
        hc_comm_op_recycle(comm, op);
    }
    hc_comm_unlock(comm);
}

/* Keeps a few finished ops (and their arrays) for the next calls. */
void hc_comm_op_recycle(hcomm_comm_t comm, hc_op_t *op)
{
    if (op->own_sched) {
        hc_sched_destroy(op->sched);
        op->own_sched = 0;
    }
    if (comm != NULL && hc_comm_is_live(comm) && comm->nfree < HC_OP_FREE_MAX) {
        op->next      = comm->op_free;
        comm->op_free = op;
        comm->nfree++;
        return;
    }
    hc_exec_release(op);
    free(op);
}

void hc_comm_enqueue(hcomm_comm_t comm, hc_op_t *op)
{
    op->next = NULL;
    if (comm->op_tail != NULL)
        comm->op_tail->next = op;
    else
        comm->op_head = op;
    comm->op_tail = op;
}

/* Progresses the head op, and the next ones as the head finishes. */
/* A head op whose stream has not reached it yet: waits, but not for longer than
 * HCOMM_TIMEOUT (the ops behind it, on every rank, wait for it too). */
static int comm_gate_closed(hcomm_comm_t comm, hc_op_t *op)
{
    if (!op->gated || comm->error != HCOMM_SUCCESS)
        return 0;
    double now = hc_clock_coarse();
    if (op->gate_since == 0)
        op->gate_since = now;
    if (now - op->gate_since <= comm->timeout)
        return 1;
    hc_error(EXEC, "an operation queued on a stream waited %.0f s for the stream to reach it",
             now - op->gate_since);
    hc_comm_fail(comm, HCOMM_ERR_TIMEOUT);
    return 0;
}

hcomm_status_t hc_comm_progress_locked(hcomm_comm_t comm)
{
    hcomm_status_t st = HCOMM_SUCCESS;

    while (comm->op_head != NULL) {
        hc_op_t *op = comm->op_head;
        if (comm_gate_closed(comm, op) || hc_exec_progress(op) == HCOMM_IN_PROGRESS) {
            st = HCOMM_IN_PROGRESS;
            break;
        }
        comm->op_head = op->next;
        if (comm->op_head == NULL)
            comm->op_tail = NULL;
        op->next = NULL;
    }
    return st;
}

hcomm_status_t hc_comm_progress(hcomm_comm_t comm)
{
    hc_comm_lock(comm);
    hcomm_status_t st = hc_comm_progress_locked(comm);
    hc_comm_unlock(comm);
    return st;
}

/* Spins on progress, yielding the CPU after spin_count idle rounds. The executor
 * fails the head op after HCOMM_TIMEOUT without progress, so this ends. */
hcomm_status_t hc_comm_wait_op(hc_op_t *op)
{
    hcomm_comm_t   comm = op->comm;
    hc_backoff_t   b    = {0, 0};
    hcomm_status_t st;

    for (;;) {
        hc_comm_lock(comm); /* once: op->status is read under the same hold */
        hc_comm_progress_locked(comm);
        st = op->status;
        hc_comm_unlock(comm);
        if (st != HCOMM_IN_PROGRESS)
            return st;
        hc_backoff(comm, &b);
    }
}

void hc_comm_wait_ops(hc_op_t *const *ops, size_t nops)
{
    hc_backoff_t b = {0, 0};

    for (int pending = 1; pending && nops > 0;) {
        pending = 0;
        for (size_t i = 0; i < nops; i++) {
            hcomm_comm_t c = ops[i]->comm;
            hc_comm_lock(c);
            if (ops[i]->status == HCOMM_IN_PROGRESS)
                hc_comm_progress_locked(c);
            pending |= ops[i]->status == HCOMM_IN_PROGRESS;
            hc_comm_unlock(c);
        }
        if (pending)
            hc_backoff(ops[0]->comm, &b);
    }
}

#define HC_IDLE_FDS 128

void hc_comm_idle(hcomm_comm_t comm)
{
    struct pollfd pfds[HC_IDLE_FDS];
    int           n = 0, pollable = 1;

    hc_comm_lock(comm);
    for (int i = 0; i < comm->nactive && pollable; i++) {
        const hc_tl_ops_t *tl = comm->tl_ops[comm->tl_active[i]];
        int k = tl->wait_fds != NULL ? tl->wait_fds(comm->tl_ctx[comm->tl_active[i]], pfds + n,
                                                    HC_IDLE_FDS - n)
                                     : -1;
        pollable = k >= 0;
        n += pollable ? k : 0;
    }
    hc_comm_unlock(comm);
    if (pollable && n > 0)
        poll(pfds, (nfds_t)n, 1); /* woken by data; the caller progresses either way */
    else
        sched_yield();
}

void hc_comm_drain(hcomm_comm_t comm)
{
    hc_backoff_t b = {0, 0};
    while (hc_comm_progress(comm) == HCOMM_IN_PROGRESS)
        hc_backoff(comm, &b);
}
