/* api_group.c - hcomm_group_start/end: the calls in between are fused into one
 * request per communicator (core/group.c) and issued together by the
 * outermost end: waited for there, or handed to the stream the calls named
 * (all the same one). */
#include <stdlib.h>

#include "base/log.h"
#include "core/comm.h"
#include "core/group.h"
#include "overlap/overlap.h"

/* The stream every call of the group named (NULL: none); *mixed when they differ. */
static hcomm_stream_t group_stream(const hc_group_call_t *calls, size_t n, int *mixed)
{
    *mixed = 0;
    for (size_t i = 1; i < n; i++)
        *mixed |= calls[i].stream != calls[0].stream;
    return n > 0 ? calls[0].stream : NULL;
}

/* Progresses the group's requests (of several communicators, which may depend
 * on each other) together until all finished; recycles them; the first error. */
static hcomm_status_t group_wait(hcomm_request_t *reqs, size_t n, hcomm_status_t first)
{
    hc_requests_wait(reqs, n);
    for (size_t i = 0; i < n; i++) {
        hcomm_comm_t c = reqs[i]->comm;
        hc_comm_lock(c);
        if (reqs[i]->status != HCOMM_SUCCESS && first == HCOMM_SUCCESS)
            first = reqs[i]->status;
        hc_request_recycle(c, reqs[i]);
        hc_comm_unlock(c);
    }
    return first;
}

/* Issues one fused request for every communicator the calls name; *first gets
 * the first failure (the others are still issued: their peers wait for them). */
static size_t group_issue(const hc_group_call_t *calls, size_t n, hcomm_stream_t stream,
                          hcomm_request_t *reqs, hcomm_status_t *first)
{
    size_t nreqs = 0;
    for (size_t i = 0; i < n; i++) {
        hcomm_comm_t comm = calls[i].comm;
        int          seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = (calls[j].comm == comm);
        if (seen)
            continue;
        hcomm_status_t st = hc_comm_check(comm, "hcomm_group_end");
        if (st == HCOMM_SUCCESS && stream != NULL)
            hc_comm_make_threaded(comm);
        if (st == HCOMM_SUCCESS) {
            hc_comm_lock(comm);
            st = hc_group_issue_comm(comm, stream != NULL, &reqs[nreqs]);
            hc_comm_unlock(comm);
        }
        if (st == HCOMM_SUCCESS)
            nreqs++;
        else if (*first == HCOMM_SUCCESS)
            *first = st;
    }
    return nreqs;
}

hcomm_status_t hcomm_group_start(void)
{
    hc_group_enter();
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_group_end(void)
{
    int left = hc_group_leave();
    if (left <= 0)
        return left < 0 ? HCOMM_ERR_INVALID_USAGE : HCOMM_SUCCESS;
    const char    *call;
    hcomm_status_t refused = hc_group_refused(&call);
    if (refused != HCOMM_SUCCESS) { /* as NCCL: a group with a refused call runs none */
        hc_error(COLL,
                 "hcomm_group_end: %s in the group was refused (%s); none of the group's "
                 "calls ran",
                 call, hcomm_status_name(refused));
        hc_group_reset();
        return refused;
    }

    /* a communicator aborted inside the group (or destroyed by another
     * thread): its calls must not run on one made at its address since */
    size_t         stale = hc_group_drop_stale();
    hcomm_status_t first = HCOMM_SUCCESS;
    if (stale > 0) {
        hc_error(COLL,
                 "hcomm_group_end: %zu queued call(s) name a communicator destroyed or aborted "
                 "since; dropped",
                 stale);
        first = HCOMM_ERR_INVALID_COMM;
    }
    size_t                 n;
    const hc_group_call_t *calls = hc_group_calls(&n);
    int                    mixed;
    hcomm_stream_t         stream = group_stream(calls, n, &mixed);
    hcomm_request_t        reqs_here[4]; /* a request per communicator of the group */
    hcomm_request_t       *reqs   = n <= 4 ? reqs_here : calloc(n, sizeof(*reqs));
    hc_stream_task_t      *task   = NULL;
    hcomm_status_t         bad    = HCOMM_SUCCESS;
    if (mixed) {
        hc_error(COLL, "hcomm_group_end: the calls of one group must name the same stream");
        bad = HCOMM_ERR_INVALID_USAGE;
    } else if (stream != NULL && hc_stream_enter(stream, "hcomm_group_end") != HCOMM_SUCCESS) {
        bad = HCOMM_ERR_INVALID_ARG; /* destroyed since its calls were added */
    } else if (reqs == NULL || (stream != NULL && (task = hc_stream_task_requests(n)) == NULL)) {
        bad = HCOMM_ERR_NO_MEMORY;
        if (stream != NULL) /* entered: a destroy waits for the push, or this */
            hc_stream_leave(stream);
    }
    if (bad != HCOMM_SUCCESS) {
        first = first != HCOMM_SUCCESS ? first : bad;
        hc_group_reset();
        if (reqs != reqs_here)
            free(reqs);
        return first;
    }
    size_t nreqs = group_issue(calls, n, stream, reqs, &first);
    hc_group_reset();
    if (stream == NULL) {
        first = group_wait(reqs, nreqs, first);
    } else if (nreqs > 0) {
        /* what was queued goes to the stream even after an error, which its
         * communicators' peers would otherwise wait for */
        for (size_t i = 0; i < nreqs; i++)
            hc_stream_task_set_request(task, i, reqs[i]);
        hc_stream_task_shrink(task, nreqs);
        hc_stream_push(stream, task);
        task = NULL;
    } else if (stream != NULL) {
        hc_stream_leave(stream); /* nothing queued */
    }
    hc_stream_task_free(task);
    if (reqs != reqs_here)
        free(reqs);
    return first;
}
