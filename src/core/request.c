/* request.c - requests: allocated and recycled per communicator, gated and
 * held while a stream has them, and what core/handles.h offers the floors
 * above core. */
#include <stdlib.h>

#include "base/log.h"
#include "core/comm.h"
#include "core/exec.h"
#include "core/stage.h"

hcomm_request_t hc_request_alloc(struct hcomm_comm *comm)
{
    hcomm_request_t req = comm->req_free;
    if (req != NULL) {
        comm->req_free = req->next;
        comm->nfree--;
        req->next       = NULL;
        req->gated      = 0;
        req->holders    = 0;
        req->gate_since = 0;
        return req;
    }
    req = calloc(1, sizeof(*req));
    if (req == NULL)
        hc_error(EXEC, "out of memory for a request");
    return req;
}

void hc_request_prefill(struct hcomm_comm *comm)
{
    while (comm->nfree < HC_REQ_FREE_MAX) {
        hcomm_request_t req = calloc(1, sizeof(*req));
        if (req == NULL || hc_exec_reserve(req, HC_EXEC_SMALL_STEPS, comm->nranks, HC_BUF_PER_OP) !=
                               HCOMM_SUCCESS) {
            if (req != NULL)
                hc_exec_release(req);
            free(req);
            return; /* fewer spares: calls allocate their own */
        }
        req->next      = comm->req_free;
        comm->req_free = req;
        comm->nfree++;
    }
}

void hc_request_recycle(struct hcomm_comm *comm, hcomm_request_t req)
{
    if (req->own_sched) {
        hc_sched_destroy(req->sched);
        req->own_sched = 0;
    }
    req->sched = NULL;
    if (req->stage != NULL) {
        hc_stage_free(comm, req->stage);
        req->stage = NULL;
    }
    if (req->prof_calls != NULL) { /* a group's, for the profilers */
        free(req->prof_calls);
        req->prof_calls  = NULL;
        req->prof_ncalls = 0;
    }
    if (comm != NULL && hc_comm_is_live(comm) && comm->nfree < HC_REQ_FREE_MAX) {
        req->next      = comm->req_free;
        comm->req_free = req;
        comm->nfree++;
        return;
    }
    hc_exec_release(req);
    free(req);
}

void hc_comm_make_threaded(hcomm_comm_t comm)
{
    /* by the issuing thread, before any stream sees the comm; written once */
    if (!comm->threaded)
        comm->threaded = 1;
}

void hc_request_open_gate(hcomm_request_t req)
{
    hc_comm_lock(req->comm);
    req->gated = 0;
    hc_comm_unlock(req->comm);
}

void hc_request_drop(hcomm_request_t req)
{
    hcomm_comm_t comm = req->comm;
    hc_comm_lock(comm);
    if (--req->holders == 0) {
        __atomic_sub_fetch(&comm->held, 1, __ATOMIC_RELEASE);
        if (!req->user_held) /* else the user's wait or test recycles it */
            hc_request_recycle(comm, req);
    }
    hc_comm_unlock(comm);
}

void hc_request_hold(hcomm_request_t req)
{
    hc_comm_lock(req->comm);
    req->holders++;
    hc_comm_unlock(req->comm);
}

hcomm_status_t hc_request_status(hcomm_request_t req)
{
    hc_comm_lock(req->comm);
    hcomm_status_t st = req->status;
    hc_comm_unlock(req->comm);
    return st;
}

hcomm_comm_t hc_request_comm(hcomm_request_t req)
{
    return req->comm;
}
