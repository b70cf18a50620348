/* request.c - issuing an operation, and the nonblocking request calls. */
#include <sched.h>
#include <stdlib.h>

#include "core/comm.h"
#include "base/log.h"
#include "overlap/overlap.h"

/* Builds and queues the op; stream ops are gated and held by their stream. */
static hcomm_status_t issue_op(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                               void *recvbuf, int gated, hc_op_t **op_p)
{
    hc_sched_t    *sched;
    int            owned;
    hcomm_status_t st = hc_comm_get_sched(comm, args, &sched, &owned);
    if (st != HCOMM_SUCCESS)
        return st;
    hc_op_t *op = hc_comm_op_alloc(comm);
    if (op == NULL) {
        if (owned)
            hc_sched_destroy(sched);
        return HCOMM_ERR_NO_MEMORY;
    }
    void *bufs[HC_BUF_PER_OP] = {(void *)sendbuf, recvbuf, (void *)0};
    st = hc_exec_prepare(op, comm, sched, bufs, sched->tmp_bytes);
    op->own_sched = owned;
    if (st != HCOMM_SUCCESS) {
        hc_comm_op_recycle(comm, op);
        return st;
    }
    if (gated) {
        op->gated   = 1;
        op->holders = 1;
        comm->held++;
    }
    hc_comm_enqueue(comm, op);
    *op_p = op;
    return HCOMM_SUCCESS;
}

static hcomm_status_t issue_on_stream(hcomm_comm_t comm, const hc_coll_args_t *args,
                                      const void *sendbuf, void *recvbuf, hcomm_stream_t stream)
{
    hc_stream_task_t *t = hc_stream_task_ops(1);
    hc_op_t          *op;
    hcomm_status_t    st;

    if (t == NULL)
        return HCOMM_ERR_NO_MEMORY;
    hc_comm_make_threaded(comm);
    hc_comm_lock(comm);
    st = issue_op(comm, args, sendbuf, recvbuf, 1, &op);
    hc_comm_unlock(comm);
    if (st != HCOMM_SUCCESS) {
        hc_stream_task_free(t);
        return st;
    }
    hc_stream_task_set_op(t, 0, op);
    hc_stream_push(stream, t);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_coll_issue(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                             void *recvbuf, hcomm_request_t *req, hcomm_stream_t stream)
{
    hc_op_t       *op;
    hcomm_status_t st;

    if (stream != NULL)
        return issue_on_stream(comm, args, sendbuf, recvbuf, stream);
    hc_comm_lock(comm);
    st = issue_op(comm, args, sendbuf, recvbuf, 0, &op);
    if (st == HCOMM_SUCCESS && req != NULL) {
        op->user_req = 1;
        *req         = op;
        hc_comm_progress_locked(comm);
    } else if (st == HCOMM_SUCCESS) {
        op->user_req = 0;
    }
    hc_comm_unlock(comm);
    if (st != HCOMM_SUCCESS || req != NULL)
        return st;
    st = hc_comm_wait_op(op);
    hc_comm_lock(comm);
    hc_comm_op_recycle(comm, op);
    hc_comm_unlock(comm);
    return st;
}

/* Frees a finished user request (a stream's op: releases the request's hold). */
static hcomm_status_t request_finish(hcomm_request_t *req)
{
    hc_op_t       *op   = *req;
    hcomm_comm_t   comm = op->comm;
    hcomm_status_t st;

    *req = NULL;
    hc_comm_lock(comm);
    st = op->status;
    if (op->holders > 0) {
        hc_comm_unlock(comm);
        hc_op_drop(op);
        return st;
    }
    hc_comm_op_recycle(comm, op);
    hc_comm_unlock(comm);
    return st;
}

hcomm_status_t hcomm_test(hcomm_request_t *req, int *done)
{
    if (req == NULL || *req == NULL || done == NULL) {
        hc_error(COLL, "hcomm_test: NULL %s", done == NULL ? "done pointer" : "request");
        return HCOMM_ERR_INVALID_ARG;
    }
    hc_op_t *op = *req;
    hc_comm_lock(op->comm);
    if (op->status == HCOMM_IN_PROGRESS)
        hc_comm_progress_locked(op->comm);
    int pending = op->status == HCOMM_IN_PROGRESS;
    hc_comm_unlock(op->comm);
    if (pending) {
        *done = 0;
        return HCOMM_IN_PROGRESS;
    }
    *done = 1;
    return request_finish(req);
}

hcomm_status_t hcomm_wait(hcomm_request_t *req)
{
    if (req == NULL || *req == NULL) {
        hc_error(COLL, "hcomm_wait: NULL request");
        return HCOMM_ERR_INVALID_ARG;
    }
    hc_comm_wait_op(*req);
    return request_finish(req);
}
