/* ops.h - every operation of a communicator, numbered and recorded (op_rec.h).
 * A request's record is filled at issue (hc_coll_enqueue, the group's fusion),
 * stamped when the executor starts it and when the queue lets it go; at its end
 * it is copied into the communicator's ring of the last ones, which a trace
 * file (ops_trace.c) takes to disk, and handed to the profiler hooks
 * (ops_prof.c). Off, an operation costs its number and a few stores: its start
 * and end take the executor's coarse clock readings; no clock read, allocation,
 * lock or system call of its own. A trace stamps issue and end and takes the
 * start from a stamp just taken (the issue of a call that starts at once, the
 * end of the operation before it in the same progress round). */
#ifndef HC_CORE_OPS_H
#define HC_CORE_OPS_H

#include "base/clock.h"
#include "core/comm.h"

/* Registered profilers, a bit per slot (ops_prof.c); read without a lock. */
extern unsigned hc_prof_mask __attribute__((visibility("hidden")));

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

static inline void hc_ops_pub_begin(hc_ops_pub_t *p)
{
    __atomic_store_n(&p->ver, __atomic_load_n(&p->ver, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void hc_ops_pub_end(hc_ops_pub_t *p)
{
    __atomic_store_n(&p->ver, __atomic_load_n(&p->ver, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

/* Gives req its collective number and publishes it as the last issued. */
static inline void hc_ops_publish_issue(struct hcomm_comm *c, hcomm_request_t req)
{
    const hc_sched_t *s    = req->sched;
    hc_ops_pub_t     *p    = &c->ops_pub;
    uint32_t          desc = (uint32_t)s->coll | (uint32_t)s->dtype << 8;
    int coll = s->coll != HC_COLL_SEND && s->coll != HC_COLL_RECV && s->coll != HC_OP_GROUP &&
               !c->ops_uncounted;
    req->op.cseq = coll ? ++c->ops_cseq : 0;
    hc_ops_pub_begin(p);
    __atomic_store_n(&p->seq, req->op.seq, __ATOMIC_RELAXED);
    __atomic_store_n(&p->bytes, s->bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&p->desc, desc, __ATOMIC_RELAXED);
    if (coll) {
        __atomic_store_n(&p->ccount, req->op.cseq, __ATOMIC_RELAXED);
        __atomic_store_n(&p->c_bytes, s->bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&p->c_desc, desc, __ATOMIC_RELAXED);
    }
    hc_ops_pub_end(p);
}

/* Numbers req and stamps its issue; what it does is its schedule's (sched.h),
 * read at its end. at_once: it is about to start (nothing queued before it,
 * no stream's gate). comm's lock held. */
static inline void hc_ops_issue(struct hcomm_comm *c, hcomm_request_t req, int at_once)
{
    hc_op_rec_t *r = &req->op;
    uint8_t      k = hc_prof_on() ? HC_OP_CLOCK_NS : c->ops_clock;
    r->seq         = ++c->ops_seq;
    r->state       = HC_OP_QUEUED;
    r->clock       = k;
    r->t_start     = 0;
    if (k != HC_OP_CLOCK_COARSE) {
        r->t_issue = hc_ops_read(k);
        r->t_start = at_once ? r->t_issue : 0; /* kept by hc_ops_start */
    } else {
        /* when each rank got where, for the flight recorder: one that starts
         * at once takes its start's reading (hc_ops_start); a queued one
         * reads now (a load from the vDSO, no TSC read) */
        r->t_issue = at_once ? 0 : (c->ops_coarse = hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE));
    }
    req->prof_seen = 0;
    hc_ops_publish_issue(c, req);
}

/* The record of req's operation as its schedule and state say now. */
void hc_ops_rec(const struct hcomm_request *req, hc_op_rec_t *out);

/* The profiler hooks (ops_prof.c): a call's description for them; the
 * callbacks at an operation's start and end. */
void hc_prof_call_fill(hcomm_prof_call_t *call, const hc_coll_args_t *a, uint8_t algo,
                       const void *sendbuf, void *recvbuf);
void hc_prof_start(hcomm_request_t req);
void hc_prof_end(hcomm_request_t req, const hc_op_rec_t *r); /* r: its final record */

/* The executor starts req; coarse_ns: its coarse clock reading. A start
 * stamped already (its issue's, or the end of the operation before it in the
 * same progress round) stays. */
static inline void hc_ops_start(hcomm_request_t req, uint64_t coarse_ns)
{
    struct hcomm_comm *c = req->comm;
    hc_op_rec_t       *r = &req->op;
    if (r->clock == HC_OP_CLOCK_COARSE) {
        r->t_start = coarse_ns;
        if (r->t_issue == 0)
            r->t_issue = coarse_ns;
    } else if (r->t_start == 0)
        r->t_start = hc_ops_read(r->clock);
    r->state = HC_OP_RUNNING;
    r->sent  = c->bytes_sent;
    if (hc_prof_on())
        hc_prof_start(req);
}

/* req has left the queue with its final status (comm_queue.c, a function of
 * ops.c: out of the progress loop's way); comm's lock held. */
void hc_ops_end(struct hcomm_comm *c, hcomm_request_t req);

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

/* A record's payload bytes (a group's: its calls'); its time t as
 * CLOCK_MONOTONIC ns (0 stays 0). */
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
/* Codes the records that ended for the file, when an operation of comm waits
 * on its peers and nothing moved (exec.c): comm->trace set, its lock held. */
void hc_trace_idle(struct hcomm_comm *c);
/* A tick of hc_clock_ticks() as CLOCK_MONOTONIC ns, by comm's trace. */
uint64_t hc_trace_ticks_ns(const struct hcomm_comm *c, uint64_t ticks);
/* Tests: the measured TSC rate times f from now on, as a reading of both
 * clocks preempted at open would leave it. */
void hc_trace_rate_scale(double f);

#endif
