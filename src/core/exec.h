/* exec.h - the executor: runs a schedule as a state machine driven by progress
 * calls. A blocking call is submit + wait on the same machinery. */
#ifndef HC_CORE_EXEC_H
#define HC_CORE_EXEC_H

#include "algorithms/sched.h"
#include "transport/transport.h"

typedef struct hcomm_request hc_op_t;

/* Per-step receive-reduce context (reduces pieces straight out of the transport). */
typedef struct hc_exec_sink {
    char       *dst;
    const char *src;
    uint8_t     dtype, op, esize, carry_len;
    _Alignas(8) uint8_t carry[8]; /* a partial element split across two pieces */
} hc_exec_sink_t;

struct hcomm_request {
    hc_op_t          *next;
    struct hcomm_comm *comm;
    hc_sched_t       *sched;
    int               own_sched; /* merged group schedule, freed with the op */
    int               user_req;  /* handed out as an hcomm_request_t */
    int               gated;     /* on a stream that has not reached it yet */
    int               holders;   /* stream ops: stream + user request still holding it */
    double            gate_since; /* when the closed gate was first found at the head */
    hcomm_status_t    status;    /* HCOMM_IN_PROGRESS until finished */
    int               started;
    void            **bufs;      /* sched->nbufs base pointers; TMP ones hold offsets
                                    into the comm's scratch until the op starts */
    size_t            tmp_total; /* scratch bytes the op needs */
    void             *bufs_inline[HC_BUF_PER_OP];
    /* per step */
    hc_tl_req_t      *reqs;
    hc_exec_sink_t   *sinks;
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
};

/* Prepares op for sched (allocations sized to it); bufs has sched->nbufs entries
 * and is copied: the entries b with b % HC_BUF_PER_OP == HC_BUF_TMP are byte
 * offsets into the communicator's scratch, which is sized (tmp_total) and
 * resolved when the op starts, since queued ops share it one after another. */
hcomm_status_t hc_exec_prepare(hc_op_t *op, struct hcomm_comm *comm, hc_sched_t *sched,
                               void *const *bufs, size_t tmp_total);
/* Advances op; returns HCOMM_IN_PROGRESS, HCOMM_SUCCESS or the failure. */
hcomm_status_t hc_exec_progress(hc_op_t *op);
/* Frees what hc_exec_prepare allocated (not op itself). */
void hc_exec_release(hc_op_t *op);


#endif
