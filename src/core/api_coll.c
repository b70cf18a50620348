/* api_coll.c - the public collective and point-to-point calls: validate the
 * arguments (one log line naming the problem), then issue. */
#include <stdint.h>

#include "core/comm.h"
#include "core/log.h"
#include "overlap/overlap.h"

/* What a call needs checked. */
typedef struct coll_call {
    const char    *name;
    hc_coll_args_t args;
    const void    *sendbuf;
    void          *recvbuf;
    int            need_send, need_recv; /* buffer must be non-NULL when count > 0 */
    size_t         blocks;               /* largest buffer = count * blocks elements */
    int            check_op, check_root;
} coll_call_t;

static hcomm_status_t coll_validate(hcomm_comm_t comm, coll_call_t *c)
{
    hcomm_status_t st = hc_comm_check(comm, c->name);
    if (st != HCOMM_SUCCESS)
        return st;
    hc_coll_args_t *a  = &c->args;
    size_t          es = hcomm_dtype_size(a->dtype);
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
    return HCOMM_SUCCESS;
}

static hcomm_status_t coll_run(hcomm_comm_t comm, coll_call_t *c, hcomm_stream_t stream,
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
    return hc_coll_issue(comm, &c->args, c->sendbuf, c->recvbuf, nonblocking ? req : NULL,
                         stream);
}

/* Byte offset of block i of count elements, for in-place detection. */
static const char *block_at(const void *base, size_t count, hcomm_dtype_t dt, int i)
{
    return (const char *)base + (size_t)i * count * hcomm_dtype_size(dt);
}

#define COLL_ARGS(C, CNT, DT, OP, ROOT) \
    {.coll = (C), .count = (CNT), .dtype = (DT), .op = (OP), .root = (ROOT)}

static hcomm_status_t allreduce(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                hcomm_op_t op, hcomm_comm_t comm, hcomm_stream_t stream,
                                hcomm_request_t *req, int nb)
{
    coll_call_t c = {.name = nb ? "hcomm_iallreduce" : "hcomm_allreduce",
                     .args = COLL_ARGS(HC_COLL_ALLREDUCE, n, dt, op, 0), .sendbuf = s,
                     .recvbuf = r, .need_send = 1, .need_recv = 1, .blocks = 1, .check_op = 1};
    c.args.in_place = (s == r);
    return coll_run(comm, &c, stream, req, nb);
}

static hcomm_status_t broadcast(const void *s, void *r, size_t n, hcomm_dtype_t dt, int root,
                                hcomm_comm_t comm, hcomm_stream_t stream, hcomm_request_t *req,
                                int nb)
{
    coll_call_t c = {.name = nb ? "hcomm_ibroadcast" : "hcomm_broadcast",
                     .args = COLL_ARGS(HC_COLL_BROADCAST, n, dt, HCOMM_SUM, root), .sendbuf = s,
                     .recvbuf = r, .need_recv = 1, .blocks = 1, .check_root = 1};
    c.args.in_place = (s == r);
    if (hc_comm_is_live(comm) && root == comm->rank)
        c.need_send = 1;
    return coll_run(comm, &c, stream, req, nb);
}

static hcomm_status_t reduce(const void *s, void *r, size_t n, hcomm_dtype_t dt, hcomm_op_t op,
                             int root, hcomm_comm_t comm, hcomm_stream_t stream,
                             hcomm_request_t *req, int nb)
{
    coll_call_t c = {.name = nb ? "hcomm_ireduce" : "hcomm_reduce",
                     .args = COLL_ARGS(HC_COLL_REDUCE, n, dt, op, root), .sendbuf = s,
                     .recvbuf = r, .need_send = 1, .blocks = 1, .check_op = 1, .check_root = 1};
    c.args.in_place = (s == r);
    if (hc_comm_is_live(comm) && root == comm->rank)
        c.need_recv = 1;
    return coll_run(comm, &c, stream, req, nb);
}

static hcomm_status_t allgather(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                hcomm_comm_t comm, hcomm_stream_t stream, hcomm_request_t *req,
                                int nb)
{
    coll_call_t c = {.name = nb ? "hcomm_iallgather" : "hcomm_allgather",
                     .args = COLL_ARGS(HC_COLL_ALLGATHER, n, dt, HCOMM_SUM, 0), .sendbuf = s,
                     .recvbuf = r, .need_send = 1, .need_recv = 1, .blocks = 1};
    if (hc_comm_is_live(comm)) {
        c.blocks        = (size_t)comm->nranks;
        c.args.in_place = r != NULL && hcomm_dtype_size(dt) != 0 &&
                          n <= PTRDIFF_MAX / c.blocks / hcomm_dtype_size(dt) &&
                          s == block_at(r, n, dt, comm->rank);
    }
    return coll_run(comm, &c, stream, req, nb);
}

static hcomm_status_t reduce_scatter(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                     hcomm_op_t op, hcomm_comm_t comm, hcomm_stream_t stream,
                                     hcomm_request_t *req, int nb)
{
    coll_call_t c = {.name = nb ? "hcomm_ireduce_scatter" : "hcomm_reduce_scatter",
                     .args = COLL_ARGS(HC_COLL_REDUCE_SCATTER, n, dt, op, 0), .sendbuf = s,
                     .recvbuf = r, .need_send = 1, .need_recv = 1, .blocks = 1, .check_op = 1};
    if (hc_comm_is_live(comm)) {
        c.blocks        = (size_t)comm->nranks;
        c.args.in_place = s != NULL && hcomm_dtype_size(dt) != 0 &&
                          n <= PTRDIFF_MAX / c.blocks / hcomm_dtype_size(dt) &&
                          r == block_at(s, n, dt, comm->rank);
    }
    return coll_run(comm, &c, stream, req, nb);
}

static hcomm_status_t alltoall(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                               hcomm_comm_t comm, hcomm_stream_t stream, hcomm_request_t *req,
                               int nb)
{
    coll_call_t c = {.name = nb ? "hcomm_ialltoall" : "hcomm_alltoall",
                     .args = COLL_ARGS(HC_COLL_ALLTOALL, n, dt, HCOMM_SUM, 0), .sendbuf = s,
                     .recvbuf = r, .need_send = 1, .need_recv = 1, .blocks = 1};
    if (hc_comm_is_live(comm))
        c.blocks = (size_t)comm->nranks;
    c.args.in_place = (s == r);
    return coll_run(comm, &c, stream, req, nb);
}

static hcomm_status_t p2p(int is_send, const void *s, void *r, size_t n, hcomm_dtype_t dt,
                          int peer, hcomm_comm_t comm, hcomm_stream_t stream,
                          hcomm_request_t *req, int nb)
{
    static const char *const names[2][2] = {{"hcomm_recv", "hcomm_irecv"},
                                            {"hcomm_send", "hcomm_isend"}};
    coll_call_t c = {.name = names[is_send][nb],
                     .args = COLL_ARGS(is_send ? HC_COLL_SEND : HC_COLL_RECV, n, dt, HCOMM_SUM,
                                       peer),
                     .sendbuf = s, .recvbuf = r, .need_send = is_send, .need_recv = !is_send,
                     .blocks = 1, .check_root = 1};
    if (hc_comm_is_live(comm) && peer == comm->rank && !hc_group_active()) {
        hc_error(P2P, "%s: a message to oneself needs its matching call in the same group",
                 c.name);
        return HCOMM_ERR_INVALID_USAGE;
    }
    return coll_run(comm, &c, stream, req, nb);
}

static hcomm_status_t barrier(hcomm_comm_t comm, hcomm_stream_t stream, hcomm_request_t *req,
                              int nb)
{
    coll_call_t c = {.name = nb ? "hcomm_ibarrier" : "hcomm_barrier",
                     .args = COLL_ARGS(HC_COLL_BARRIER, 0, HCOMM_UINT8, HCOMM_SUM, 0),
                     .blocks = 1};
    return coll_run(comm, &c, stream, req, nb);
}

/* ---- public entry points ---- */

hcomm_status_t hcomm_allreduce(const void *s, void *r, size_t n, hcomm_dtype_t dt, hcomm_op_t op,
                               hcomm_comm_t comm, hcomm_stream_t stream)
{
    return allreduce(s, r, n, dt, op, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_iallreduce(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                hcomm_op_t op, hcomm_comm_t comm, hcomm_request_t *req)
{
    return allreduce(s, r, n, dt, op, comm, NULL, req, 1);
}
hcomm_status_t hcomm_broadcast(const void *s, void *r, size_t n, hcomm_dtype_t dt, int root,
                               hcomm_comm_t comm, hcomm_stream_t stream)
{
    return broadcast(s, r, n, dt, root, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ibroadcast(const void *s, void *r, size_t n, hcomm_dtype_t dt, int root,
                                hcomm_comm_t comm, hcomm_request_t *req)
{
    return broadcast(s, r, n, dt, root, comm, NULL, req, 1);
}
hcomm_status_t hcomm_reduce(const void *s, void *r, size_t n, hcomm_dtype_t dt, hcomm_op_t op,
                            int root, hcomm_comm_t comm, hcomm_stream_t stream)
{
    return reduce(s, r, n, dt, op, root, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ireduce(const void *s, void *r, size_t n, hcomm_dtype_t dt, hcomm_op_t op,
                             int root, hcomm_comm_t comm, hcomm_request_t *req)
{
    return reduce(s, r, n, dt, op, root, comm, NULL, req, 1);
}
hcomm_status_t hcomm_allgather(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                               hcomm_comm_t comm, hcomm_stream_t stream)
{
    return allgather(s, r, n, dt, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_iallgather(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                hcomm_comm_t comm, hcomm_request_t *req)
{
    return allgather(s, r, n, dt, comm, NULL, req, 1);
}
hcomm_status_t hcomm_reduce_scatter(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                    hcomm_op_t op, hcomm_comm_t comm, hcomm_stream_t stream)
{
    return reduce_scatter(s, r, n, dt, op, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ireduce_scatter(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                     hcomm_op_t op, hcomm_comm_t comm, hcomm_request_t *req)
{
    return reduce_scatter(s, r, n, dt, op, comm, NULL, req, 1);
}
hcomm_status_t hcomm_alltoall(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                              hcomm_comm_t comm, hcomm_stream_t stream)
{
    return alltoall(s, r, n, dt, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ialltoall(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                               hcomm_comm_t comm, hcomm_request_t *req)
{
    return alltoall(s, r, n, dt, comm, NULL, req, 1);
}
hcomm_status_t hcomm_send(const void *s, size_t n, hcomm_dtype_t dt, int peer, hcomm_comm_t comm,
                          hcomm_stream_t stream)
{
    return p2p(1, s, NULL, n, dt, peer, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_isend(const void *s, size_t n, hcomm_dtype_t dt, int peer,
                           hcomm_comm_t comm, hcomm_request_t *req)
{
    return p2p(1, s, NULL, n, dt, peer, comm, NULL, req, 1);
}
hcomm_status_t hcomm_recv(void *r, size_t n, hcomm_dtype_t dt, int peer, hcomm_comm_t comm,
                          hcomm_stream_t stream)
{
    return p2p(0, NULL, r, n, dt, peer, comm, stream, NULL, 0);
}
hcomm_status_t hcomm_irecv(void *r, size_t n, hcomm_dtype_t dt, int peer, hcomm_comm_t comm,
                           hcomm_request_t *req)
{
    return p2p(0, NULL, r, n, dt, peer, comm, NULL, req, 1);
}
hcomm_status_t hcomm_barrier(hcomm_comm_t comm, hcomm_stream_t stream)
{
    return barrier(comm, stream, NULL, 0);
}
hcomm_status_t hcomm_ibarrier(hcomm_comm_t comm, hcomm_request_t *req)
{
    return barrier(comm, NULL, req, 1);
}
