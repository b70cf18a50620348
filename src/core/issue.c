/* issue.c - issuing a collective: its schedule (cached), a request prepared
 * for it, queued on the communicator; run to completion, or handed out. */
#include <stdlib.h>

#include "base/log.h"
#include "core/comm.h"
#include "core/exec.h"
#include "core/ops.h"
#include "core/stage.h"

hcomm_status_t hc_coll_enqueue(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                               void *recvbuf, int gated, hcomm_request_t *req_p)
{
    hc_sched_t    *sched;
    hc_stage_t    *stage;
    int            owned;
    hcomm_status_t st = hc_stage_begin(comm, args, &sendbuf, &recvbuf, &stage);
    if (st != HCOMM_SUCCESS)
        return st;
    if ((st = hc_comm_get_sched(comm, args, &sched, &owned)) != HCOMM_SUCCESS) {
        hc_stage_free(comm, stage);
        return st;
    }
    hcomm_request_t req = hc_request_alloc(comm);
    if (req == NULL) {
        hc_stage_free(comm, stage);
        if (owned)
            hc_sched_destroy(sched);
        return HCOMM_ERR_NO_MEMORY;
    }
    void *bufs[HC_BUF_PER_OP] = {(void *)sendbuf, recvbuf, (void *)0};
    st                        = hc_exec_prepare(req, comm, sched, bufs, sched->tmp_bytes);
    req->sched                = sched; /* a prepare that failed early left a recycled one's */
    req->own_sched            = owned;
    req->stage                = stage;
    if (st != HCOMM_SUCCESS) {
        hc_request_recycle(comm, req);
        return st;
    }
    /* nothing queued before it and no gate: the progress after this starts it */
    hc_ops_issue(comm, req, !gated && comm->req_head == NULL);
    hc_comm_enqueue(comm, req, gated);
    *req_p = req;
    return HCOMM_SUCCESS;
}

/* On comm's list of requests the user holds; comm's lock held. */
static void user_link(hcomm_comm_t comm, hcomm_request_t req)
{
    req->user_held = 1;
    req->uprev     = NULL;
    req->unext     = comm->user_reqs;
    if (comm->user_reqs != NULL)
        comm->user_reqs->uprev = req;
    comm->user_reqs = req;
}

hcomm_status_t hc_coll_issue(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                             void *recvbuf, hcomm_request_t *user)
{
    hcomm_request_t req;
    hc_comm_lock(comm);
    hcomm_status_t st = hc_coll_enqueue(comm, args, sendbuf, recvbuf, 0, &req);
    if (st == HCOMM_SUCCESS && user != NULL) {
        *user = req;
        user_link(comm, req);
        hc_comm_progress_locked(comm);
    }
    hc_comm_unlock(comm);
    if (st != HCOMM_SUCCESS || user != NULL)
        return st;
    st = hc_request_wait(req);
    hc_comm_lock(comm);
    hc_request_recycle(comm, req);
    hc_comm_unlock(comm);
    return st;
}

static void user_unlink(hcomm_comm_t comm, hcomm_request_t req)
{
    if (!req->user_held)
        return;
    if (req->uprev != NULL)
        req->uprev->unext = req->unext;
    else
        comm->user_reqs = req->unext;
    if (req->unext != NULL)
        req->unext->uprev = req->uprev;
    req->uprev = req->unext = NULL;
    req->user_held          = 0;
}

void hc_comm_orphan_requests(hcomm_comm_t comm)
{
    while (comm->user_reqs != NULL) {
        hcomm_request_t req = comm->user_reqs;
        user_unlink(comm, req);
        hc_stage_free(comm, req->stage); /* it may use the communicator's block */
        req->stage  = NULL;
        req->comm   = NULL;
        req->orphan = 1;
    }
}

int hc_request_orphan_end(hcomm_request_t req, hcomm_status_t *st)
{
    if (!req->orphan)
        return 0;
    *st = req->status;
    hc_request_recycle(NULL, req); /* a group's schedule and calls too */
    return 1;
}

void hc_request_give_user(hcomm_request_t req)
{
    hcomm_comm_t comm = req->comm;
    hc_comm_lock(comm);
    user_link(comm, req);
    /* the user's hold, unlike a stream's, is not one destroy waits for */
    if (--req->holders == 0)
        __atomic_sub_fetch(&comm->held, 1, __ATOMIC_RELEASE);
    hc_comm_unlock(comm);
}

hcomm_status_t hc_request_user_check(hcomm_request_t req, const char *what)
{
    if (req->orphan)
        return HCOMM_SUCCESS;
    hcomm_comm_t comm = req->comm;
    hc_comm_lock(comm);
    int held = req->user_held;
    hc_comm_unlock(comm);
    if (held)
        return HCOMM_SUCCESS;
    hc_error(COLL, "%s: request %p was already ended by a wait or a test (a stale copy?)", what,
             (void *)req);
    return HCOMM_ERR_INVALID_USAGE;
}

hcomm_status_t hc_request_finish(hcomm_request_t req)
{
    hcomm_comm_t comm = req->comm;
    hc_comm_lock(comm);
    user_unlink(comm, req);
    hcomm_status_t st = req->status;
    if (req->holders == 0) /* else a stream's task still has it: its drop recycles it */
        hc_request_recycle(comm, req);
    hc_comm_unlock(comm);
    return st;
}
