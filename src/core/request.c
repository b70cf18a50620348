/* request.c - issuing an operation, and the nonblocking request calls. */
#include <sched.h>
#include <stdlib.h>

#include "core/comm.h"
#include "core/log.h"

hcomm_status_t hc_coll_issue(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                             void *recvbuf, hcomm_request_t *req)
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
    hc_comm_enqueue(comm, op);
    if (req != NULL) {
        op->user_req = 1;
        *req         = op;
        hc_comm_progress(comm);
        return HCOMM_SUCCESS;
    }
    op->user_req = 0;
    st           = hc_comm_wait_op(op);
    hc_comm_op_recycle(comm, op);
    return st;
}

/* Frees a finished user request. */
static hcomm_status_t request_finish(hcomm_request_t *req)
{
    hc_op_t       *op = *req;
    hcomm_status_t st = op->status;
    *req              = NULL;
    hc_comm_op_recycle(op->comm, op);
    return st;
}

hcomm_status_t hcomm_test(hcomm_request_t *req, int *done)
{
    if (req == NULL || *req == NULL || done == NULL) {
        hc_error(COLL, "hcomm_test: NULL %s", done == NULL ? "done pointer" : "request");
        return HCOMM_ERR_INVALID_ARG;
    }
    hc_op_t *op = *req;
    if (op->status == HCOMM_IN_PROGRESS)
        hc_comm_progress(op->comm);
    if (op->status == HCOMM_IN_PROGRESS) {
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
