/* exec.h - the executor: runs a schedule as a state machine driven by progress
 * calls. A blocking call is submit + wait on the same machinery. */
#ifndef HC_CORE_EXEC_H
#define HC_CORE_EXEC_H

#include "core/request.h"
#include "transport/transport.h"

/* Per-step receive-reduce context (reduces pieces straight out of the transport). */
typedef struct hc_exec_sink {
    char       *dst;
    const char *src;
    uint8_t     dtype, op, esize, carry_len;
    _Alignas(8) uint8_t carry[8]; /* a partial element split across two pieces */
} hc_exec_sink_t;

/* Prepares req for sched (allocations sized to it); bufs has sched->nbufs
 * entries and is copied: the entries b with b % HC_BUF_PER_OP == HC_BUF_TMP are
 * byte offsets into the communicator's scratch, which is sized (tmp_total) and
 * resolved when req starts, since queued requests share it one after another. */
hcomm_status_t hc_exec_prepare(hcomm_request_t req, struct hcomm_comm *comm, hc_sched_t *sched,
                               void *const *bufs, size_t tmp_total);
/* Advances req; returns HCOMM_IN_PROGRESS, HCOMM_SUCCESS or the failure. */
hcomm_status_t hc_exec_progress(hcomm_request_t req);
/* The peers of req's posted transfers that have not finished (each once, at
 * most max): whom a running request waits for. */
int hc_exec_waiting_peers(const struct hcomm_request *req, int32_t *peers, int max);
/* Step arrays are allocated for at least this many steps, so that a small
 * schedule's states are reset with one constant-size store. */
#define HC_EXEC_SMALL_STEPS 8u

/* Sizes req's per-step and per-peer arrays and its buffer table for a
 * schedule of nsteps steps and nbufs buffers on nranks ranks (a request's
 * first use, a larger schedule than before, or spares made at init).
 * HCOMM_ERR_NO_MEMORY, logged. */
hcomm_status_t hc_exec_reserve(hcomm_request_t req, uint32_t nsteps, int nranks, uint32_t nbufs);

/* Frees what hc_exec_prepare allocated (not req itself). */
void hc_exec_release(hcomm_request_t req);

#endif
