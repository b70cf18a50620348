/* request.h - a request: one operation in a communicator's queue (a
 * collective, or a group's fused calls) with the executor's state for its
 * schedule. hcomm_request_t is its handle, inside the library as outside.
 * Private to core/ (it holds transport requests); the floors above see
 * requests through core/handles.h. */
#ifndef HC_CORE_REQUEST_H
#define HC_CORE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/sched.h"
#include "core/handles.h"
#include "core/op_rec.h"
#include "hcomm.h"
#include "hcomm_profiler.h"

/* a call's buffers, or a group of two calls' after its empty first one */
#define HC_REQ_BUFS_INLINE (3 * HC_BUF_PER_OP)

struct hcomm_request {
    hcomm_request_t   next;
    struct hcomm_comm *comm;
    /* handed to the user by a nonblocking call, not yet waited for: on the
     * communicator's list (user_reqs), so that its destroy leaves it an
     * orphan that hcomm_wait and hcomm_test still end (MPI's rule);
     * neither: not the user's to end (hc_request_user_check) */
    hcomm_request_t    uprev, unext;
    int                user_held, orphan;
    hc_sched_t       *sched;
    int               own_sched; /* merged group schedule, freed with the request */
    struct hc_stage   *stage;     /* host copies of device buffers (stage.h); NULL: none */
    int               gated;     /* on a stream that has not reached it yet */
    int                holders;   /* on a stream: the stream's holds (its task, its
                                   * last-request slot); the user's is user_held */
    double            gate_since; /* when the closed gate was first found at the head */
    hcomm_status_t    status;    /* HCOMM_IN_PROGRESS until finished */
    int               started;
    /* finished behind the head (comm_queue.c): what status it ends with once
     * it is the head, so that requests end in issue order */
    int               ahead_done;
    hcomm_status_t    ahead_status;
    void            **bufs;      /* sched->nbufs base pointers; TMP ones hold offsets
                                    into the comm's scratch until it starts */
    size_t            tmp_total; /* scratch bytes it needs */
    void             *bufs_inline[HC_REQ_BUFS_INLINE];
    /* per step */
    struct hc_tl_req *tl_reqs;
    struct hc_exec_sink *sinks;
    uint8_t          *state;
    uint32_t          cap_steps;
    /* per peer: next pseq allowed to post */
    uint32_t         *next_send, *next_recv;
    int               cap_peers;
    uint32_t          first_pending, ndone, ndiv;
    double            last_progress;
    unsigned          poll_tick;
    unsigned          nposted;
    size_t            bytes_seen;  /* bytes moved by posted steps at the last check */
    double            left_seen;   /* stalled: when the awaited peer's watch said it left */
    hc_op_rec_t       op;          /* its record (core/ops.h) */
    /* profilers (ops_prof.c): the slots whose op_start saw it, at which
     * registration, and their data; a group's calls, kept for them */
    uint8_t            prof_seen;
    uint16_t           prof_gen[HCOMM_PROFILERS_MAX];
    void              *prof_data[HCOMM_PROFILERS_MAX];
    hcomm_prof_call_t *prof_calls;
    size_t             prof_ncalls;
};

/* A request for comm: a spare one of its last ones, or a new one; NULL (logged)
 * when out of memory. comm's lock held, as for all of these. */
hcomm_request_t hc_request_alloc(struct hcomm_comm *comm);
/* Done with req: keeps a few for the next calls (comm live), frees the rest. */
void            hc_request_recycle(struct hcomm_comm *comm, hcomm_request_t req);
/* Fills comm's spare requests (HC_REQ_FREE_MAX), sized for small schedules,
 * at init: a first window of nonblocking calls then allocates nothing. */
void hc_request_prefill(struct hcomm_comm *comm);

#endif
