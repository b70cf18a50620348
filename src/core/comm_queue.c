/* comm_queue.c - a communicator's queue of requests: issued in order, the
 * head progressed, waited on with a bounded spin that gives the CPU away. */
#include <poll.h>
#include <sched.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"
#include "core/exec.h"
#include "core/flight.h"
#include "core/ops.h"
#include "core/stage.h"

#define HC_P2P_AHEAD_MAX 64 /* sends and receives run behind the head, at most */

void hc_comm_enqueue(hcomm_comm_t comm, hcomm_request_t req, int gated)
{
    if (gated) {
        req->gated   = 1;
        req->holders = 1;
        __atomic_add_fetch(&comm->held, 1, __ATOMIC_RELAXED);
    }
    req->next = NULL;
    if (comm->req_tail != NULL)
        comm->req_tail->next = req;
    else
        comm->req_head = req;
    comm->req_tail = req;
}

/* A head request whose stream has not reached it yet: waits, but not for
 * longer than HCOMM_TIMEOUT (the requests behind it, on every rank, wait for it
 * too). */
static int comm_gate_closed(hcomm_comm_t comm, hcomm_request_t req)
{
    if (!req->gated || comm->error != HCOMM_SUCCESS)
        return 0;
    double now = hc_clock_coarse();
    if (req->gate_since == 0)
        req->gate_since = now;
    if (now - req->gate_since <= comm->timeout)
        return 1;
    hc_error(EXEC, "a request queued on a stream waited %.1f s for the stream to reach it",
             now - req->gate_since);
    hc_comm_fail(comm, HCOMM_ERR_TIMEOUT);
    return 0;
}

/* A send or a receive alone: one message, posted as it starts. */
static int req_single_p2p(const struct hcomm_request *r)
{
    return r->sched != NULL && (r->sched->coll == HC_COLL_SEND || r->sched->coll == HC_COLL_RECV) &&
           r->sched->nsteps <= 1 && r->stage == NULL && !r->gated;
}

static int req_all_posted(const struct hcomm_request *r)
{
    return r->started && r->nposted >= r->sched->nsteps;
}

/* Sends and receives right behind a head that is one too run beside it:
 * an exchange (hcomm_isend then hcomm_irecv on both ranks) waits for itself
 * otherwise, and MPI programs rely on it not to. One starts only once all
 * before it have posted their message, so each pair's messages still go out
 * in issue order; a collective, a group, a gated or staged request ends the
 * run. One that finishes keeps its status (ahead_status) until it is the
 * head: requests end, and their waiters return, in issue order. */
static void comm_progress_behind(hcomm_request_t head)
{
    if (!req_single_p2p(head) || !req_all_posted(head))
        return;
    hcomm_request_t r = head->next;
    for (int n = 0; r != NULL && n < HC_P2P_AHEAD_MAX; r = r->next, n++) {
        if (!req_single_p2p(r))
            return;
        if (!r->ahead_done) {
            /* No health check while it runs behind: it would time it out
             * for the head's turn (the peer may reach it only after the
             * head's message) and publish its peer as the one this rank
             * waits for. Its wait is timed from when it is the head. */
            r->poll_tick = 0;
            if (hc_exec_progress(r) != HCOMM_IN_PROGRESS) {
                r->ahead_status = r->status;
                r->status       = HCOMM_IN_PROGRESS;
                r->ahead_done   = 1;
            }
        }
        if (!r->ahead_done && !req_all_posted(r))
            return;
    }
}

hcomm_status_t hc_comm_progress_locked(hcomm_comm_t comm)
{
    hcomm_status_t st = HCOMM_SUCCESS;

    if (__atomic_load_n(&comm->revoked, __ATOMIC_RELAXED) && comm->error == HCOMM_SUCCESS) {
        hc_warn(COLL, "rank %d: the communicator is revoked: its operations end", comm->rank);
        hc_comm_fail(comm, HCOMM_ERR_REVOKED);
    }

    while (comm->req_head != NULL) {
        hcomm_request_t req = comm->req_head;
        if (comm_gate_closed(comm, req) || hc_exec_progress(req) == HCOMM_IN_PROGRESS) {
            if (req->next != NULL)
                comm_progress_behind(req);
            st = HCOMM_IN_PROGRESS;
            break;
        }
        hcomm_request_t next = req->next;
        comm->req_head       = next;
        if (next == NULL)
            comm->req_tail = NULL;
        else if (next->ahead_done && next->status == HCOMM_IN_PROGRESS)
            next->status = next->ahead_status; /* it finished behind this one */
        else if (next->started)                /* it runs on behind this one: timed from now */
            next->last_progress = (double)hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE) * 1e-9;
        req->next = NULL;
        if (req->stage != NULL && req->status == HCOMM_SUCCESS) /* before anyone sees it done */
            req->status = hc_stage_out(req->stage);
        hc_ops_end(comm, req);
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
 * fails the head request after HCOMM_TIMEOUT without progress, so this ends. */
hcomm_status_t hc_request_wait(hcomm_request_t req)
{
    hcomm_comm_t   comm = req->comm;
    hc_backoff_t   b    = {0, 0};
    hcomm_status_t st;

    for (;;) {
        hc_comm_lock(comm); /* once: req->status is read under the same hold */
        hc_comm_progress_locked(comm);
        st = req->status;
        hc_comm_unlock(comm);
        if (st != HCOMM_IN_PROGRESS)
            return st;
        hc_backoff(comm, &b);
    }
}

void hc_requests_wait(hcomm_request_t const *reqs, size_t nreqs)
{
    hc_backoff_t b = {0, 0};

    for (int pending = 1; pending && nreqs > 0;) {
        pending = 0;
        for (size_t i = 0; i < nreqs; i++) {
            hcomm_comm_t c = reqs[i]->comm;
            hc_comm_lock(c);
            if (reqs[i]->status == HCOMM_IN_PROGRESS)
                hc_comm_progress_locked(c);
            pending |= reqs[i]->status == HCOMM_IN_PROGRESS;
            hc_comm_unlock(c);
        }
        if (pending)
            hc_backoff(reqs[0]->comm, &b);
    }
}

#define HC_IDLE_FDS 128
/* A napping thread yields for its first 200 us of idling, so that a quick
 * exchange never sleeps; then naps a quarter of the time it has idled (at
 * most 1 ms), so a nap adds at most a quarter to a long wait. */
#define HC_IDLE_NAP_AFTER_S 200e-6
#define HC_IDLE_NAP_MAX_S 1e-3

static __thread int    idle_naps;  /* hc_comm_idle_nap_thread */
static __thread double idle_since; /* when the current idle run began */

void hc_comm_idle_nap_thread(void)
{
    idle_naps = hc_params_get()->stream_nap != 0;
}

static void idle_nap(int rounds)
{
    double now = hc_clock_now();
    if (rounds == 1)
        idle_since = now;
    double idle = now - idle_since;
    if (idle < HC_IDLE_NAP_AFTER_S) {
        sched_yield();
        return;
    }
    double          s   = idle / 4 < HC_IDLE_NAP_MAX_S ? idle / 4 : HC_IDLE_NAP_MAX_S;
    struct timespec nap = {0, (long)(s * 1e9)};
    nanosleep(&nap, NULL);
}

void hc_comm_idle(hcomm_comm_t comm, int rounds)
{
    struct pollfd pfds[HC_IDLE_FDS];
    int           n = 0, pollable = 1;

    if (__atomic_load_n(&comm->dump_req, __ATOMIC_RELAXED))
        hc_flight_dump_requested(comm);
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
    /* Unlocked, so that other threads progress while this one naps. An fd an
     * abort closes meanwhile (or its number, reused) can only end this 1 ms
     * nap early or let it run out: nothing is read through it here. */
    if (pollable && n > 0) {
        poll(pfds, (nfds_t)n, 1); /* woken by data; the caller progresses either way */
    } else if (idle_naps) {
        idle_nap(rounds);
    } else {
        sched_yield();
    }
}

void hc_comm_drain(hcomm_comm_t comm)
{
    hc_backoff_t b = {0, 0};
    while (hc_comm_progress(comm) == HCOMM_IN_PROGRESS)
        hc_backoff(comm, &b);
}
