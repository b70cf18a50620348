/* api_request.c - hcomm_test and hcomm_wait on a nonblocking call's request. */
#include "base/log.h"
#include "core/comm.h"

hcomm_status_t hcomm_test(hcomm_request_t *req, int *done)
{
    if (req == NULL || *req == NULL || done == NULL) {
        hc_error(COLL, "hcomm_test: NULL %s", done == NULL ? "done pointer" : "request");
        return HCOMM_ERR_INVALID_ARG;
    }
    hcomm_request_t r  = *req;
    hcomm_status_t  st = hc_request_user_check(r, "hcomm_test");
    if (st != HCOMM_SUCCESS)
        return st;
    if (hc_request_orphan_end(r, &st)) { /* its communicator was destroyed */
        *done = 1;
        *req  = NULL;
        return st;
    }
    hc_comm_lock(r->comm);
    if (r->status == HCOMM_IN_PROGRESS)
        hc_comm_progress_locked(r->comm);
    int pending = r->status == HCOMM_IN_PROGRESS;
    hc_comm_unlock(r->comm);
    if (pending) {
        *done = 0;
        return HCOMM_IN_PROGRESS;
    }
    *done = 1;
    *req  = NULL;
    return hc_request_finish(r);
}

hcomm_status_t hcomm_wait(hcomm_request_t *req)
{
    if (req == NULL || *req == NULL) {
        hc_error(COLL, "hcomm_wait: NULL request");
        return HCOMM_ERR_INVALID_ARG;
    }
    hcomm_request_t r  = *req;
    hcomm_status_t  st = hc_request_user_check(r, "hcomm_wait");
    if (st != HCOMM_SUCCESS)
        return st;
    *req = NULL;
    if (hc_request_orphan_end(r, &st)) /* its communicator was destroyed */
        return st;
    hc_request_wait(r);
    return hc_request_finish(r);
}
