/* ops.h - every operation of a communicator, numbered and recorded (op_rec.h).
 * A request's record is filled at issue (hc_coll_enqueue, the group's fusion),
 * stamped when the executor starts it and when the queue lets it go; at its end
 * it is copied into the communicator's ring of the last ones, which a trace
 * file (ops_trace.c) takes to disk, and handed to the profiler hooks
 * (ops_prof.c). Off, an operation costs its number, a few stores and one coarse
 * clock read (its start reuses the executor's): no allocation, lock or system
 * call. A trace stamps issue and end and takes the start from a stamp just
 * taken (the issue of a call that starts at once, the end of the operation
 * before it in the same progress round). */
#ifndef HC_CORE_OPS_H
#define HC_CORE_OPS_H

#include "base/clock.h"
#include "core/comm.h"

/* Registered profilers, a bit per slot (ops_prof.c); read without a lock. */
extern unsigned hc_prof_mask;

static inline unsigned hc_prof_on(void)
{
    return __atomic_load_n(&hc_prof_mask, __ATOMIC_RELAXED);
}

static inline uint64_t hc_ops_read(unsigned clock)
{
    if (clock == HC_OP_CLOCK_TICKS)
        return hc_clock_ticks();
    return hc_clock_ts_ns(clock == HC_OP_CLOCK_NS ? CLOCK_MONOTONIC : CLOCK_MONOTONIC_COARSE);
}

/* Numbers req, prepared for args, and fills its record; at_once: it is about
 * to start (nothing queued before it, no stream's gate). comm's lock held. */
static inline void hc_ops_issue(struct hcomm_comm *c, hcomm_request_t req, const hc_coll_args_t *a,
                                int at_once)
{
    hc_op_rec_t *r = &req->op;
    uint8_t      k = hc_prof_on() ? HC_OP_CLOCK_NS : c->ops_clock;
    r->seq         = ++c->ops_seq;
    r->t_issue     = k != HC_OP_CLOCK_COARSE ? hc_ops_read(k) : 0;
    if (at_once)
        c->ops_now = r->t_issue, c->ops_now_clock = k;
    r->t_start = r->t_end = 0;
    r->count              = a->count;
    r->sent               = 0;
    r->peer = a->coll == HC_COLL_SEND || a->coll == HC_COLL_RECV || a->coll == HC_COLL_BROADCAST ||
                      a->coll == HC_COLL_REDUCE
                  ? a->root
                  : -1;
    r->status      = HCOMM_IN_PROGRESS;
    r->nsteps      = req->sched->nsteps;
    r->coll        = (uint8_t)a->coll;
    r->dtype       = (uint8_t)a->dtype;
    r->op          = (uint8_t)a->op;
    r->algo        = req->sched->algo;
    r->state       = HC_OP_QUEUED;
    r->clock       = k;
    req->prof_seen = 0;
}

/* The same for a fused group of ncalls calls and bytes in all (group.c). */
void hc_ops_issue_group(struct hcomm_comm *c, hcomm_request_t req, size_t ncalls, size_t bytes);

/* The profiler hooks (ops_prof.c): a call's description for them; the
 * callbacks at an operation's start and end. */
void hc_prof_call_fill(hcomm_prof_call_t *call, const hc_coll_args_t *a, uint8_t algo,
                       const void *sendbuf, void *recvbuf);
void hc_prof_start(hcomm_request_t req);
void hc_prof_end(hcomm_request_t req);

/* The executor starts req; coarse_ns: its coarse clock reading. */
static inline void hc_ops_start(hcomm_request_t req, uint64_t coarse_ns)
{
    struct hcomm_comm *c = req->comm;
    hc_op_rec_t       *r = &req->op;
    if (r->clock == HC_OP_CLOCK_COARSE)
        r->t_start = coarse_ns;
    else if (c->ops_now != 0 && c->ops_now_clock == r->clock)
        r->t_start = c->ops_now;
    else
        r->t_start = hc_ops_read(r->clock);
    r->state = HC_OP_RUNNING;
    r->sent  = c->bytes_sent;
    if (hc_prof_on())
        hc_prof_start(req);
}

/* Takes the ring's last ops_spill records to the trace's spill file (ops_trace.c). */
void hc_trace_spill(struct hcomm_comm *c, uint64_t seq);

/* req has left the queue with its final status; comm's lock held. */
static inline void hc_ops_end(struct hcomm_comm *c, hcomm_request_t req)
{
    hc_op_rec_t *r                    = &req->op;
    int          started              = r->state == HC_OP_RUNNING;
    r->t_end                          = hc_ops_read(r->clock);
    c->ops_now                        = r->t_end; /* the next start, in this round */
    c->ops_now_clock                  = r->clock;
    r->state                          = req->status == HCOMM_SUCCESS ? HC_OP_DONE : HC_OP_FAILED;
    r->status                         = req->status;
    r->sent                           = started ? c->bytes_sent - r->sent : 0;
    c->ops_ring[r->seq & c->ops_mask] = *r;
    if (c->ops_spill != 0 && (r->seq & (c->ops_spill - 1)) == 0)
        hc_trace_spill(c, r->seq);
    if (hc_prof_on() || req->prof_seen)
        hc_prof_end(req);
}

/* A progress round is over: its stamps are old for the next. */
static inline void hc_ops_round_end(struct hcomm_comm *c)
{
    c->ops_now = 0;
}

/* ---- reading the records (ops.c) ---- */

#define HC_OP_WAIT_MAX 8

/* One operation as a flight recorder shows it. */
typedef struct hc_op_view {
    hc_op_rec_t rec; /* times in CLOCK_MONOTONIC ns; a running one's sent: bytes so far */
    int32_t     waiting[HC_OP_WAIT_MAX]; /* running: peers of its unfinished transfers */
    int         nwaiting;
} hc_op_view_t;

/* Sizes comm's ring (HCOMM_OPS_RING); at create. HCOMM_ERR_NO_MEMORY (logged). */
hcomm_status_t hc_ops_init(struct hcomm_comm *c);
void           hc_ops_fini(struct hcomm_comm *c);

/* comm's last operations, oldest first: the ring's ended ones, then the queued
 * and running ones; at most max (the newest kept). Takes comm's lock. Returns
 * how many it wrote. For a flight recorder and stuck-rank verdicts. */
int hc_ops_snapshot(struct hcomm_comm *c, hc_op_view_t *out, int max);

/* A record's payload bytes; its time t as CLOCK_MONOTONIC ns (0 stays 0). */
uint64_t hc_op_bytes(const hc_op_rec_t *r);
uint64_t hc_ops_ns(const struct hcomm_comm *c, const hc_op_rec_t *r, uint64_t t);

/* Names for records: the collective ("group" for HC_OP_GROUP), the algorithm
 * ("fused" for a group), the state. */
const char *hc_ops_coll_name(const hc_op_rec_t *r);
const char *hc_ops_algo_name(const hc_op_rec_t *r);
const char *hc_ops_state_name(int state);

/* ---- the trace file (ops_trace.c) ---- */

/* Attaches HCOMM_TRACE_FILE's writer to comm when it is set (once its rank is
 * known); on failure logs one line and leaves tracing off. */
void hc_trace_open(struct hcomm_comm *c);
/* Writes every record so far to the file, which is then a whole JSON document;
 * comm's lock held (failure, destroy). */
void hc_trace_flush(struct hcomm_comm *c);
/* Flushes and detaches (hc_comm_free). */
void hc_trace_close(struct hcomm_comm *c);
/* A tick of hc_clock_ticks() as CLOCK_MONOTONIC ns, by comm's trace. */
uint64_t hc_trace_ticks_ns(const struct hcomm_comm *c, uint64_t ticks);

#endif
