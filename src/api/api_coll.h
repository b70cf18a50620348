/* api_coll.h - the argument checks and issue of hcomm's collective and
 * point-to-point calls, inline so that hcomm's public entry points
 * (api_coll.c) and the NCCL drop-in's (src/shim/nccl) reach the one
 * validate-and-issue routine with no call layer between. */
#ifndef HC_API_COLL_H
#define HC_API_COLL_H

#include <stdint.h>

#include "base/dtype.h"
#include "base/extent.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/group.h"

/* What a call needs checked. */
typedef struct hc_coll_call {
    const char    *name;
    hc_coll_args_t args;
    const void    *sendbuf;
    void          *recvbuf;
    int            need_send, need_recv; /* buffer must be non-NULL when count > 0 */
    size_t         blocks;               /* largest buffer = count * blocks elements */
    int            check_op, check_root;
    size_t         send_blocks, recv_blocks; /* each buffer, in count elements; 0: unused here */
    const char    *in_place_rule;            /* what in place means: other overlaps are refused */
} hc_coll_call_t;

#define HC_IN_PLACE_SAME "sendbuf == recvbuf"

/* Validates c (one log line naming the problem) and issues it: queued in a
 * group, started with req, or run to completion. */
hcomm_status_t hc_coll_run(hcomm_comm_t comm, hc_coll_call_t *c, hcomm_stream_t stream,
                           hcomm_request_t *req, int nonblocking);

/* Queues args (validated) on comm behind a gate that stream opens when its
 * earlier work is done. */
hcomm_status_t hc_api_issue_on_stream(hcomm_comm_t comm, const hc_coll_args_t *args,
                                      const void *sendbuf, void *recvbuf, hcomm_stream_t stream);

/* Issues args (validated) on comm: on stream when it is non-NULL, else
 * nonblocking (req non-NULL) or to completion. */
static inline hcomm_status_t hc_api_issue(hcomm_comm_t comm, const hc_coll_args_t *args,
                                          const void *sendbuf, void *recvbuf,
                                          hcomm_request_t *req, hcomm_stream_t stream)
{
    if (stream != NULL)
        return hc_api_issue_on_stream(comm, args, sendbuf, recvbuf, stream);
    return hc_coll_issue(comm, args, sendbuf, recvbuf, req);
}

/* Whether block is rank's block of n elements inside whole (nranks blocks):
 * an in-place allgather or reduce_scatter. */
static inline int hc_is_rank_block(const void *block, const void *whole, size_t n,
                                   hcomm_dtype_t dt, hcomm_comm_t comm)
{
    size_t es = hc_dtype_size(dt);
    return whole != NULL && es != 0 && n <= PTRDIFF_MAX / (size_t)comm->nranks / es &&
           (const char *)block == (const char *)whole + (size_t)comm->rank * n * es;
}

#define COLL_ARGS(C, CNT, DT, OP, ROOT) \
    {.coll = (C), .count = (CNT), .dtype = (DT), .op = (OP), .root = (ROOT)}

static inline hcomm_status_t hc_api_allreduce(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                              hcomm_op_t op, hcomm_comm_t comm,
                                              hcomm_stream_t stream, hcomm_request_t *req, int nb)
{
    hc_coll_call_t c = {.name          = nb ? "hcomm_iallreduce" : "hcomm_allreduce",
                        .args          = COLL_ARGS(HC_COLL_ALLREDUCE, n, dt, op, 0),
                        .sendbuf       = s,
                        .recvbuf       = r,
                        .need_send     = 1,
                        .need_recv     = 1,
                        .blocks        = 1,
                        .check_op      = 1,
                        .send_blocks   = 1,
                        .recv_blocks   = 1,
                        .in_place_rule = HC_IN_PLACE_SAME};
    c.args.in_place = (s == r);
    return hc_coll_run(comm, &c, stream, req, nb);
}

static inline hcomm_status_t hc_api_broadcast(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                              int root, hcomm_comm_t comm, hcomm_stream_t stream,
                                              hcomm_request_t *req, int nb)
{
    hc_coll_call_t c = {.name          = nb ? "hcomm_ibroadcast" : "hcomm_broadcast",
                        .args          = COLL_ARGS(HC_COLL_BROADCAST, n, dt, HCOMM_SUM, root),
                        .sendbuf       = s,
                        .recvbuf       = r,
                        .need_recv     = 1,
                        .blocks        = 1,
                        .check_root    = 1,
                        .recv_blocks   = 1,
                        .in_place_rule = HC_IN_PLACE_SAME};
    c.args.in_place = (s == r);
    if (hc_comm_is_live(comm) && root == comm->rank) /* sendbuf is read on the root only */
        c.need_send = 1, c.send_blocks = 1;
    return hc_coll_run(comm, &c, stream, req, nb);
}

static inline hcomm_status_t hc_api_reduce(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                           hcomm_op_t op, int root, hcomm_comm_t comm,
                                           hcomm_stream_t stream, hcomm_request_t *req, int nb)
{
    hc_coll_call_t c = {.name          = nb ? "hcomm_ireduce" : "hcomm_reduce",
                        .args          = COLL_ARGS(HC_COLL_REDUCE, n, dt, op, root),
                        .sendbuf       = s,
                        .recvbuf       = r,
                        .need_send     = 1,
                        .blocks        = 1,
                        .check_op      = 1,
                        .check_root    = 1,
                        .send_blocks   = 1,
                        .in_place_rule = HC_IN_PLACE_SAME};
    c.args.in_place = (s == r);
    if (hc_comm_is_live(comm) && root == comm->rank) /* recvbuf is written on the root only */
        c.need_recv = 1, c.recv_blocks = 1;
    return hc_coll_run(comm, &c, stream, req, nb);
}

static inline hcomm_status_t hc_api_allgather(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                              hcomm_comm_t comm, hcomm_stream_t stream,
                                              hcomm_request_t *req, int nb)
{
    hc_coll_call_t c = {.name          = nb ? "hcomm_iallgather" : "hcomm_allgather",
                        .args          = COLL_ARGS(HC_COLL_ALLGATHER, n, dt, HCOMM_SUM, 0),
                        .sendbuf       = s,
                        .recvbuf       = r,
                        .need_send     = 1,
                        .need_recv     = 1,
                        .blocks        = 1,
                        .send_blocks   = 1,
                        .recv_blocks   = 1,
                        .in_place_rule = "sendbuf == recvbuf + rank x sendcount elements"};
    if (hc_comm_is_live(comm)) {
        c.blocks = c.recv_blocks = (size_t)comm->nranks;
        c.args.in_place          = hc_is_rank_block(s, r, n, dt, comm);
    }
    return hc_coll_run(comm, &c, stream, req, nb);
}

static inline hcomm_status_t hc_api_reduce_scatter(const void *s, void *r, size_t n,
                                                   hcomm_dtype_t dt, hcomm_op_t op,
                                                   hcomm_comm_t comm, hcomm_stream_t stream,
                                                   hcomm_request_t *req, int nb)
{
    hc_coll_call_t c = {.name          = nb ? "hcomm_ireduce_scatter" : "hcomm_reduce_scatter",
                        .args          = COLL_ARGS(HC_COLL_REDUCE_SCATTER, n, dt, op, 0),
                        .sendbuf       = s,
                        .recvbuf       = r,
                        .need_send     = 1,
                        .need_recv     = 1,
                        .blocks        = 1,
                        .check_op      = 1,
                        .send_blocks   = 1,
                        .recv_blocks   = 1,
                        .in_place_rule = "recvbuf == sendbuf + rank x recvcount elements"};
    if (hc_comm_is_live(comm)) {
        c.blocks = c.send_blocks = (size_t)comm->nranks;
        c.args.in_place          = hc_is_rank_block(r, s, n, dt, comm);
    }
    return hc_coll_run(comm, &c, stream, req, nb);
}

static inline hcomm_status_t hc_api_alltoall(const void *s, void *r, size_t n, hcomm_dtype_t dt,
                                             hcomm_comm_t comm, hcomm_stream_t stream,
                                             hcomm_request_t *req, int nb)
{
    hc_coll_call_t c = {.name          = nb ? "hcomm_ialltoall" : "hcomm_alltoall",
                        .args          = COLL_ARGS(HC_COLL_ALLTOALL, n, dt, HCOMM_SUM, 0),
                        .sendbuf       = s,
                        .recvbuf       = r,
                        .need_send     = 1,
                        .need_recv     = 1,
                        .blocks        = 1,
                        .send_blocks   = 1,
                        .recv_blocks   = 1,
                        .in_place_rule = HC_IN_PLACE_SAME};
    if (hc_comm_is_live(comm))
        c.blocks = c.send_blocks = c.recv_blocks = (size_t)comm->nranks;
    c.args.in_place = (s == r);
    return hc_coll_run(comm, &c, stream, req, nb);
}

static inline hcomm_status_t hc_api_p2p(int is_send, const void *s, void *r, size_t n,
                                        hcomm_dtype_t dt, int peer, hcomm_comm_t comm,
                                        hcomm_stream_t stream, hcomm_request_t *req, int nb)
{
    static const char *const names[2][2] = {{"hcomm_recv", "hcomm_irecv"},
                                            {"hcomm_send", "hcomm_isend"}};
    hc_coll_t      kind = is_send ? HC_COLL_SEND : HC_COLL_RECV;
    hc_coll_call_t c    = {.name = names[is_send][nb],
                           .args = COLL_ARGS(kind, n, dt, HCOMM_SUM, peer),
                           .sendbuf = s, .recvbuf = r, .need_send = is_send,
                           .need_recv = !is_send, .blocks = 1, .check_root = 1};
    if (hc_comm_is_live(comm) && peer == comm->rank && !hc_group_active()) {
        hc_error(P2P, "%s: a message to oneself needs its matching call in the same group",
                 c.name);
        return HCOMM_ERR_INVALID_USAGE;
    }
    return hc_coll_run(comm, &c, stream, req, nb);
}

static inline hcomm_status_t hc_api_barrier(hcomm_comm_t comm, hcomm_stream_t stream,
                                            hcomm_request_t *req, int nb)
{
    hc_coll_call_t c = {.name = nb ? "hcomm_ibarrier" : "hcomm_barrier",
                        .args = COLL_ARGS(HC_COLL_BARRIER, 0, HCOMM_UINT8, HCOMM_SUM, 0),
                        .blocks = 1};
    return hc_coll_run(comm, &c, stream, req, nb);
}

#endif
