/* api_coll.c - the public collective and point-to-point calls: validate the
 * arguments (one log line naming the problem), then issue. */
#include "api/api_coll.h"
#include "overlap/overlap.h"

hcomm_status_t hc_api_issue_on_stream(hcomm_comm_t comm, const hc_coll_args_t *args,
                                      const void *sendbuf, void *recvbuf, hcomm_stream_t stream)
{
    /* the task first: once the request is queued, handing it over cannot
     * fail; the stream entered, so that a destroy racing this call waits for
     * the push (checked before, it might be destroyed since) */
    hcomm_status_t st = hc_stream_enter(stream, hc_coll_name(args->coll));
    if (st != HCOMM_SUCCESS)
        return st;
    hc_stream_task_t *t = hc_stream_task_requests(1);
    hcomm_request_t   queued;
    if (t == NULL) {
        hc_stream_leave(stream);
        return HCOMM_ERR_NO_MEMORY;
    }
    hc_comm_make_threaded(comm);
    hc_comm_lock(comm);
    st = hc_coll_enqueue(comm, args, sendbuf, recvbuf, 1, &queued);
    hc_comm_unlock(comm);
    if (st != HCOMM_SUCCESS) {
        hc_stream_task_free(t);
        hc_stream_leave(stream);
        return st;
    }
    hc_stream_task_set_request(t, 0, queued);
    hc_stream_push(stream, t);
    return HCOMM_SUCCESS;
}

static hcomm_status_t coll_validate(hcomm_comm_t comm, hc_coll_call_t *c)
{
    hcomm_status_t st = hc_comm_check_fast(comm, c->name);
    if (st != HCOMM_SUCCESS)
        return st;
    hc_coll_args_t *a  = &c->args;
    size_t          es = hc_dtype_size(a->dtype);
    if (es == 0) {
        hc_error(COLL, "%s: invalid datatype %d", c->name, (int)a->dtype);
        return HCOMM_ERR_INVALID_DTYPE;
    }
    if (c->check_op && (unsigned)a->op >= HCOMM_OP_COUNT) {
        hc_error(COLL, "%s: invalid reduction op %d", c->name, (int)a->op);
        return HCOMM_ERR_INVALID_OP;
    }
    if (c->check_root && (a->root < 0 || a->root >= comm->nranks)) {
        hc_error(COLL, "%s: %s %d is not in [0, %d)", c->name,
                 a->coll == HC_COLL_SEND || a->coll == HC_COLL_RECV ? "peer" : "root", a->root,
                 comm->nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    if (a->count != 0 && (a->count > PTRDIFF_MAX / es / c->blocks)) {
        hc_error(COLL, "%s: %zu elements of %zu bytes (x %zu blocks) overflow a byte size",
                 c->name, a->count, es, c->blocks);
        return HCOMM_ERR_OVERFLOW;
    }
    if (a->count != 0 && ((c->need_send && c->sendbuf == NULL) ||
                          (c->need_recv && c->recvbuf == NULL))) {
        hc_error(COLL, "%s: NULL %s with count %zu", c->name,
                 c->need_send && c->sendbuf == NULL ? "sendbuf" : "recvbuf", a->count);
        return HCOMM_ERR_NULL_BUFFER;
    }
    /* in place or disjoint: anything between gives wrong answers (sizes
     * cannot overflow: count x blocks elements fit, checked above) */
    size_t sb = a->count * es * c->send_blocks, rb = a->count * es * c->recv_blocks;
    if (!a->in_place && hc_extents_overlap(c->sendbuf, sb, c->recvbuf, rb)) {
        hc_error(COLL,
                 "%s: sendbuf %p (%zu bytes) and recvbuf %p (%zu bytes) overlap without being "
                 "in place (%s); pass disjoint buffers or in-place ones",
                 c->name, c->sendbuf, sb, (void *)c->recvbuf, rb, c->in_place_rule);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t coll_run(hcomm_comm_t comm, hc_coll_call_t *c, hcomm_stream_t stream,
                               hcomm_request_t *req, int nonblocking)
{
    hcomm_status_t st = coll_validate(comm, c);
    if (st != HCOMM_SUCCESS)
        return st;
    if (stream != NULL && (st = hc_stream_check(stream, c->name)) != HCOMM_SUCCESS)
        return st;
    if (nonblocking && req == NULL) {
        hc_error(COLL, "%s: NULL request pointer", c->name);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (nonblocking && hc_group_active()) {
        hc_error(COLL, "%s: nonblocking calls are not allowed inside a group", c->name);
        return HCOMM_ERR_INVALID_USAGE;
    }
    if (!nonblocking && hc_group_active())
        return hc_group_add(comm, &c->args, c->sendbuf, c->recvbuf, stream);
    return hc_api_issue(comm, &c->args, c->sendbuf, c->recvbuf, nonblocking ? req : NULL, stream);
}

hcomm_status_t hc_coll_run(hcomm_comm_t comm, hc_coll_call_t *c, hcomm_stream_t stream,
                           hcomm_request_t *req, int nonblocking)
{
    hcomm_status_t st = coll_run(comm, c, stream, req, nonblocking);
    if (st != HCOMM_SUCCESS && hc_group_active())
        hc_group_refuse(st, c->name);
    return st;
}

/* ---- public entry points ---- */

hcomm_status_t hcomm_allreduce(const void *s, void *r, size_t n, hcomm_dtype_t dt, hcomm_op_t op,
                               hcomm_comm_t comm, hcomm_stream_t stream)
{
    return hc_api_allreduce(s, r, n, dt, op, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_iallreduce(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                hcomm_op_t op, hcomm_comm_t comm, hcomm_request_t *req)
{
    return hc_api_allreduce(s, r, n, dt, op, comm, NULL, req, 1);
}
hcomm_status_t hcomm_broadcast(const void *s, void *r, size_t n, hcomm_dtype_t dt, int root,
                               hcomm_comm_t comm, hcomm_stream_t stream)
{
    return hc_api_broadcast(s, r, n, dt, root, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ibroadcast(const void *s, void *r, size_t n, hcomm_dtype_t dt, int root,
                                hcomm_comm_t comm, hcomm_request_t *req)
{
    return hc_api_broadcast(s, r, n, dt, root, comm, NULL, req, 1);
}
hcomm_status_t hcomm_reduce(const void *s, void *r, size_t n, hcomm_dtype_t dt, hcomm_op_t op,
                            int root, hcomm_comm_t comm, hcomm_stream_t stream)
{
    return hc_api_reduce(s, r, n, dt, op, root, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ireduce(const void *s, void *r, size_t n, hcomm_dtype_t dt, hcomm_op_t op,
                             int root, hcomm_comm_t comm, hcomm_request_t *req)
{
    return hc_api_reduce(s, r, n, dt, op, root, comm, NULL, req, 1);
}
hcomm_status_t hcomm_allgather(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                               hcomm_comm_t comm, hcomm_stream_t stream)
{
    return hc_api_allgather(s, r, n, dt, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_iallgather(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                hcomm_comm_t comm, hcomm_request_t *req)
{
    return hc_api_allgather(s, r, n, dt, comm, NULL, req, 1);
}
hcomm_status_t hcomm_reduce_scatter(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                    hcomm_op_t op, hcomm_comm_t comm, hcomm_stream_t stream)
{
    return hc_api_reduce_scatter(s, r, n, dt, op, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ireduce_scatter(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                     hcomm_op_t op, hcomm_comm_t comm, hcomm_request_t *req)
{
    return hc_api_reduce_scatter(s, r, n, dt, op, comm, NULL, req, 1);
}
hcomm_status_t hcomm_alltoall(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                              hcomm_comm_t comm, hcomm_stream_t stream)
{
    return hc_api_alltoall(s, r, n, dt, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ialltoall(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                               hcomm_comm_t comm, hcomm_request_t *req)
{
    return hc_api_alltoall(s, r, n, dt, comm, NULL, req, 1);
}
hcomm_status_t hcomm_send(const void *s, size_t n, hcomm_dtype_t dt, int peer, hcomm_comm_t comm,
                          hcomm_stream_t stream)
{
    return hc_api_p2p(1, s, NULL, n, dt, peer, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_isend(const void *s, size_t n, hcomm_dtype_t dt, int peer,
                           hcomm_comm_t comm, hcomm_request_t *req)
{
    return hc_api_p2p(1, s, NULL, n, dt, peer, comm, NULL, req, 1);
}
hcomm_status_t hcomm_recv(void *r, size_t n, hcomm_dtype_t dt, int peer, hcomm_comm_t comm,
                          hcomm_stream_t stream)
{
    return hc_api_p2p(0, NULL, r, n, dt, peer, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_irecv(void *r, size_t n, hcomm_dtype_t dt, int peer, hcomm_comm_t comm,
                           hcomm_request_t *req)
{
    return hc_api_p2p(0, NULL, r, n, dt, peer, comm, NULL, req, 1);
}
hcomm_status_t hcomm_barrier(hcomm_comm_t comm, hcomm_stream_t stream)
{
    return hc_api_barrier(comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ibarrier(hcomm_comm_t comm, hcomm_request_t *req)
{
    return hc_api_barrier(comm, NULL, req, 1);
}
