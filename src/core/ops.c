/* ops.c - a communicator's operation records: the ring of the last ones
 * ended, a fused group's record, and the snapshot a flight recorder reads. The
 * per-operation path is inline in ops.h. */
#include "core/ops.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/params.h"
#include "core/exec.h"

#define OPS_RING_MAX (1u << 20)

hcomm_status_t hc_ops_init(struct hcomm_comm *c)
{
    int      want = hc_params_get()->ops_ring;
    uint32_t n    = 1;

    if (want < 1 || (unsigned)want > OPS_RING_MAX) {
        hc_warn(INIT, "HCOMM_OPS_RING=%d is not in [1, %u]; using 256", want, OPS_RING_MAX);
        want = 256;
    }
    while (n < (uint32_t)want)
        n <<= 1;
    c->ops_ring = calloc(n, sizeof(*c->ops_ring));
    if (c->ops_ring == NULL) {
        hc_error(INIT, "out of memory for a ring of %u operation records", n);
        return HCOMM_ERR_NO_MEMORY;
    }
    c->ops_mask        = n - 1;
    c->ops_pub.waiting = -1;
    return HCOMM_SUCCESS;
}

void hc_ops_fini(struct hcomm_comm *c)
{
    free(c->ops_ring);
    c->ops_ring = NULL;
}

void hc_ops_rec(const struct hcomm_request *req, hc_op_rec_t *o)
{
    const hc_sched_t *s = req->sched;
    *o                  = req->op;
    o->coll             = s->coll;
    o->dtype            = s->dtype;
    o->op               = s->op;
    o->algo             = s->algo;
    o->peer             = s->peer;
    o->count            = s->count;
    o->bytes            = s->bytes;
    o->nsteps           = s->nsteps;
    if (o->state == HC_OP_QUEUED || o->state == HC_OP_RUNNING)
        o->status = HCOMM_IN_PROGRESS;
}

/* Notes that record seq ended, for the trace's spill files (ops_trace.c). */
void hc_trace_end(struct hcomm_comm *c, uint64_t seq);

/* The payload req handed to transports since it started. A send or receive
 * may run beside others (comm_queue.c), whose bytes the counter's difference
 * would hold too: its own is its message, once posted. */
static uint64_t ops_sent(const struct hcomm_comm *c, hcomm_request_t req)
{
    const hc_sched_t *s = req->sched;
    if (s->coll == HC_COLL_SEND || s->coll == HC_COLL_RECV)
        return s->coll == HC_COLL_SEND && req->nposted > 0 ? s->bytes : 0;
    return c->bytes_sent - req->op.sent;
}

void hc_ops_end(struct hcomm_comm *c, hcomm_request_t req)
{
    const hc_op_rec_t *q       = &req->op;
    const hc_sched_t  *s       = req->sched;
    hc_op_rec_t       *r       = &c->ops_ring[q->seq & c->ops_mask];
    int                started = q->state == HC_OP_RUNNING;
    /* coarse: the executor's last reading, at most its health check's period
     * (64 idle progress calls) old, so that the end costs no clock read */
    uint64_t end = q->clock == HC_OP_CLOCK_COARSE ? c->ops_coarse : hc_ops_read(q->clock);
    /* field by field into the ring: no copy of the request's record */
    r->seq               = q->seq;
    r->cseq              = q->cseq;
    r->t_issue           = q->t_issue;
    r->t_start           = started ? q->t_start : 0; /* not a hint left by its issue */
    r->t_end             = end;
    r->count             = s->count;
    r->bytes             = s->bytes;
    r->sent              = started ? ops_sent(c, req) : 0;
    r->peer              = s->peer;
    r->status            = req->status;
    r->nsteps            = s->nsteps;
    r->coll              = s->coll;
    r->dtype             = s->dtype;
    r->op                = s->op;
    r->algo              = s->algo;
    r->state             = req->status == HCOMM_SUCCESS ? HC_OP_DONE : HC_OP_FAILED;
    r->clock             = q->clock;
    req->op.state        = r->state;
    hcomm_request_t next = c->req_head; /* starts in this round unless a stream gates it */
    if (r->clock != HC_OP_CLOCK_COARSE && next != NULL && !next->gated &&
        next->op.state == HC_OP_QUEUED && next->op.clock == r->clock)
        next->op.t_start = end;
    if (q->cseq != 0 && q->t_issue != 0) /* for rank 0's slow-rank test */
        hc_arrival_note(c->arrivals, q->cseq,
                        q->clock == HC_OP_CLOCK_TICKS ? q->t_issue | HC_ARRIVAL_TICKS : q->t_issue);
    hc_ops_pub_begin(&c->ops_pub);
    __atomic_store_n(&c->ops_pub.ended, q->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&c->ops_pub.waiting, -1, __ATOMIC_RELAXED);
    hc_ops_pub_end(&c->ops_pub);
    if (c->trace != NULL)
        hc_trace_end(c, r->seq);
    if (hc_prof_on() || req->prof_seen)
        hc_prof_end(req, r);
}

uint64_t hc_op_bytes(const hc_op_rec_t *r)
{
    return r->bytes;
}

uint64_t hc_ops_ns(const struct hcomm_comm *c, const hc_op_rec_t *r, uint64_t t)
{
    return t != 0 && r->clock == HC_OP_CLOCK_TICKS ? hc_trace_ticks_ns(c, t) : t;
}

/* r as readers get it: its times in ns. */
static void ops_view_rec(const struct hcomm_comm *c, const hc_op_rec_t *r, hc_op_view_t *v)
{
    v->rec         = *r;
    v->rec.t_issue = hc_ops_ns(c, r, r->t_issue);
    v->rec.t_start = r->state != HC_OP_QUEUED ? hc_ops_ns(c, r, r->t_start) : 0;
    v->rec.t_end   = hc_ops_ns(c, r, r->t_end);
    if (r->clock == HC_OP_CLOCK_TICKS)
        v->rec.clock = HC_OP_CLOCK_NS;
    v->nwaiting = 0;
}

static void ops_view(const struct hcomm_comm *c, hcomm_request_t req, hc_op_view_t *v)
{
    hc_op_rec_t r;
    hc_ops_rec(req, &r);
    ops_view_rec(c, &r, v);
    if (req->op.state != HC_OP_RUNNING)
        return;
    v->rec.sent = ops_sent(c, req);
    v->nwaiting = hc_exec_waiting_peers(req, v->waiting, HC_OP_WAIT_MAX);
}

int hc_ops_snapshot(struct hcomm_comm *c, hc_op_view_t *out, int max)
{
    int n = 0;
    if (max <= 0)
        return 0;
    hc_comm_lock(c);
    int queued = 0;
    for (hcomm_request_t r = c->req_head; r != NULL; r = r->next)
        queued++;
    /* the newest max: ended ones only where the queue leaves room */
    uint64_t last  = c->ops_seq - (uint64_t)queued; /* the last ended */
    uint64_t avail = last < (uint64_t)c->ops_mask + 1 ? last : (uint64_t)c->ops_mask + 1;
    uint64_t room  = max > queued ? (uint64_t)(max - queued) : 0;
    uint64_t first = last - (avail < room ? avail : room) + 1;
    for (uint64_t s = first; s <= last && n < max; s++) {
        const hc_op_rec_t *r = &c->ops_ring[s & c->ops_mask];
        if (r->seq != s) /* not stored yet: a comm's first records */
            continue;
        ops_view_rec(c, r, &out[n++]);
    }
    int skip = queued > max ? queued - max : 0;
    for (hcomm_request_t r = c->req_head; r != NULL && n < max; r = r->next)
        if (skip-- <= 0)
            ops_view(c, r, &out[n++]);
    hc_comm_unlock(c);
    return n;
}

const char *hc_ops_coll_name(const hc_op_rec_t *r)
{
    return r->coll == HC_OP_GROUP ? "group" : hc_coll_name((hc_coll_t)r->coll);
}

const char *hc_ops_algo_name(const hc_op_rec_t *r)
{
    return r->coll == HC_OP_GROUP ? "fused" : hc_algo_name((hc_algo_t)r->algo);
}

const char *hc_ops_state_name(int state)
{
    static const char *const names[] = {"queued", "running", "done", "failed"};
    return (unsigned)state < 4 ? names[state] : "unknown";
}
