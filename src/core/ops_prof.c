/* ops_prof.c - the profiler hooks of hcomm_profiler.h: a few slots of
 * callbacks, called at every operation's start and end. The operations' path
 * reads one word (hc_prof_mask) while no profiler is registered. A caller
 * marks a slot busy before it reads whether the slot is active, and
 * unregistering clears active before it waits for busy to drop (both
 * sequentially consistent), so no callback outlives its unregistration. */
#include <pthread.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "core/ops.h"
#include "core/stage.h"
#include "hcomm_profiler.h"

#define PROF_UNREGISTER_WAIT_S 10.0

unsigned hc_prof_mask;

typedef struct {
    hcomm_profiler_t p;
    int              active; /* atomics: registered */
    int              busy;   /* callers inside this slot */
    uint16_t         gen;    /* bumped by each registration */
} prof_slot_t;

static prof_slot_t     slots[HCOMM_PROFILERS_MAX];
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int    prof_depth; /* inside a callback on this thread */

hcomm_status_t hcomm_profiler_register(const hcomm_profiler_t *prof, int *id)
{
    if (prof == NULL || id == NULL || (prof->op_start == NULL && prof->op_end == NULL)) {
        hc_error(COLL, "hcomm_profiler_register: %s",
                 prof == NULL || id == NULL ? "NULL argument" : "no callback");
        return HCOMM_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&prof_lock);
    for (int i = 0; i < HCOMM_PROFILERS_MAX; i++) {
        prof_slot_t *s = &slots[i];
        /* a slot whose last callbacks still run (unregistered from inside
         * one) is not reused until they are done */
        if (__atomic_load_n(&s->active, __ATOMIC_SEQ_CST) ||
            __atomic_load_n(&s->busy, __ATOMIC_SEQ_CST))
            continue;
        s->p = *prof;
        s->gen++;
        __atomic_store_n(&s->active, 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_or(&hc_prof_mask, 1u << i, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&prof_lock);
        *id = i + 1;
        return HCOMM_SUCCESS;
    }
    pthread_mutex_unlock(&prof_lock);
    hc_error(COLL, "hcomm_profiler_register: %d profilers are registered already",
             HCOMM_PROFILERS_MAX);
    return HCOMM_ERR_NO_MEMORY;
}

hcomm_status_t hcomm_profiler_unregister(int id)
{
    pthread_mutex_lock(&prof_lock);
    prof_slot_t *s = id >= 1 && id <= HCOMM_PROFILERS_MAX ? &slots[id - 1] : NULL;
    if (s == NULL || !__atomic_load_n(&s->active, __ATOMIC_SEQ_CST)) {
        pthread_mutex_unlock(&prof_lock);
        hc_error(COLL, "hcomm_profiler_unregister: %d is not a registered profiler", id);
        return HCOMM_ERR_INVALID_ARG;
    }
    __atomic_store_n(&s->active, 0, __ATOMIC_SEQ_CST);
    __atomic_fetch_and(&hc_prof_mask, ~(1u << (id - 1)), __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&prof_lock);
    if (prof_depth > 0) /* this thread is inside a callback: it cannot wait for itself */
        return HCOMM_SUCCESS;
    const struct timespec nap      = {0, 100000L};
    double                deadline = hc_clock_now() + PROF_UNREGISTER_WAIT_S;
    while (__atomic_load_n(&s->busy, __ATOMIC_SEQ_CST) != 0) {
        if (hc_clock_now() > deadline) {
            hc_error(COLL,
                     "hcomm_profiler_unregister: a callback of profiler %d still runs "
                     "after %.0f s",
                     id, PROF_UNREGISTER_WAIT_S);
            return HCOMM_ERR_TIMEOUT;
        }
        nanosleep(&nap, NULL);
    }
    return HCOMM_SUCCESS;
}

void hc_prof_call_fill(hcomm_prof_call_t *call, const hc_coll_args_t *a, uint8_t algo,
                       const void *sendbuf, void *recvbuf)
{
    call->collective = hc_coll_name(a->coll);
    call->algorithm  = hc_algo_name((hc_algo_t)algo);
    call->count      = a->count;
    call->dtype      = a->dtype;
    call->bytes      = a->count * hcomm_dtype_size(a->dtype);
    call->peer       = a->coll == HC_COLL_SEND || a->coll == HC_COLL_RECV ||
                         a->coll == HC_COLL_BROADCAST || a->coll == HC_COLL_REDUCE
                           ? a->root
                           : -1;
    call->sendbuf    = sendbuf;
    call->recvbuf    = recvbuf;
}

/* The operation (record r) as the callbacks see it, at its start or its end. */
static void prof_op(hcomm_request_t req, const hc_op_rec_t *r, hcomm_prof_op_t *op, int at_end)
{
    struct hcomm_comm *c = req->comm;
    *op                  = (hcomm_prof_op_t){.size       = sizeof(*op),
                                             .comm       = c,
                                             .rank       = c->rank,
                                             .nranks     = c->nranks,
                                             .seq        = r->seq,
                                             .status     = at_end ? (hcomm_status_t)r->status : HCOMM_IN_PROGRESS,
                                             .issue_ns   = hc_ops_ns(c, r, r->t_issue),
                                             .start_ns   = hc_ops_ns(c, r, r->t_start),
                                             .end_ns     = at_end ? hc_ops_ns(c, r, r->t_end) : 0,
                                             .bytes_sent = at_end ? r->sent : 0};
    op->call             = (hcomm_prof_call_t){.collective = hc_ops_coll_name(r),
                                               .algorithm  = hc_ops_algo_name(r),
                                               .count      = r->count,
                                               .dtype      = (hcomm_dtype_t)r->dtype,
                                               .bytes      = hc_op_bytes(r),
                                               .peer       = r->peer};
    if (r->coll == HC_OP_GROUP) {
        op->ncalls = req->prof_ncalls;
        op->calls  = req->prof_calls;
    } else {
        op->call.sendbuf = req->stage != NULL  ? req->stage->user_send
                           : req->bufs != NULL ? req->bufs[HC_BUF_SEND]
                                               : NULL; /* the caller's, not host copies */
        op->call.recvbuf = req->stage != NULL  ? req->stage->user_recv
                           : req->bufs != NULL ? req->bufs[HC_BUF_RECV]
                                               : NULL;
        op->ncalls       = 1;
        op->calls        = &op->call;
    }
}

/* op_start of each registered profiler for req, described by r. */
static void prof_start(hcomm_request_t req, const hc_op_rec_t *r)
{
    unsigned        mask = __atomic_load_n(&hc_prof_mask, __ATOMIC_SEQ_CST);
    hcomm_prof_op_t op;
    prof_op(req, r, &op, 0);
    for (int i = 0; i < HCOMM_PROFILERS_MAX; i++) {
        prof_slot_t *s = &slots[i];
        if (!(mask & (1u << i)))
            continue;
        __atomic_fetch_add(&s->busy, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->active, __ATOMIC_SEQ_CST)) {
            req->prof_seen |= (uint8_t)(1u << i);
            req->prof_gen[i]  = s->gen;
            req->prof_data[i] = NULL;
            if (s->p.op_start != NULL) {
                prof_depth++;
                s->p.op_start(s->p.user, &op, &req->prof_data[i]);
                prof_depth--;
            }
        }
        __atomic_fetch_sub(&s->busy, 1, __ATOMIC_SEQ_CST);
    }
}

void hc_prof_start(hcomm_request_t req)
{
    hc_op_rec_t r;
    hc_ops_rec(req, &r);
    prof_start(req, &r);
}

void hc_prof_end(hcomm_request_t req, const hc_op_rec_t *r)
{
    hcomm_prof_op_t op;
    if (r->t_start == 0 && req->prof_seen == 0) /* never started (its communicator failed) */
        prof_start(req, r);
    if (req->prof_seen == 0)
        return;
    prof_op(req, r, &op, 1);
    for (int i = 0; i < HCOMM_PROFILERS_MAX; i++) {
        prof_slot_t *s = &slots[i];
        if (!(req->prof_seen & (1u << i)))
            continue;
        __atomic_fetch_add(&s->busy, 1, __ATOMIC_SEQ_CST);
        /* the registration that saw the start, not a later one in its slot */
        if (__atomic_load_n(&s->active, __ATOMIC_SEQ_CST) && s->gen == req->prof_gen[i] &&
            s->p.op_end != NULL) {
            prof_depth++;
            s->p.op_end(s->p.user, &op, req->prof_data[i]);
            prof_depth--;
        }
        __atomic_fetch_sub(&s->busy, 1, __ATOMIC_SEQ_CST);
    }
    req->prof_seen = 0;
}
