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
    c->ops_mask = n - 1;
    return HCOMM_SUCCESS;
}

void hc_ops_fini(struct hcomm_comm *c)
{
    free(c->ops_ring);
    c->ops_ring = NULL;
}

void hc_ops_issue_group(struct hcomm_comm *c, hcomm_request_t req, size_t ncalls, size_t bytes)
{
    hc_coll_args_t a = {.coll = HC_COLL_BARRIER, .count = ncalls, .dtype = HCOMM_UINT8};
    hc_ops_issue(c, req, &a, 0);
    req->op.coll  = HC_OP_GROUP;
    req->op.bytes = bytes;
}

uint64_t hc_op_bytes(const hc_op_rec_t *r)
{
    return r->coll == HC_OP_GROUP ? r->bytes : r->count * hcomm_dtype_size((hcomm_dtype_t)r->dtype);
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
    v->rec.t_start = hc_ops_ns(c, r, r->t_start);
    v->rec.t_end   = hc_ops_ns(c, r, r->t_end);
    if (r->clock == HC_OP_CLOCK_TICKS)
        v->rec.clock = HC_OP_CLOCK_NS;
    v->nwaiting = 0;
}

static void ops_view(const struct hcomm_comm *c, hcomm_request_t req, hc_op_view_t *v)
{
    ops_view_rec(c, &req->op, v);
    if (req->op.state != HC_OP_RUNNING)
        return;
    v->rec.sent = c->bytes_sent - req->op.sent;
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
