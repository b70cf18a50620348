/* algo_hier_leader.c - allreduce through the nodes' leaders, for small
 * messages across nodes: a binomial reduce inside each node to its first rank,
 * recursive doubling among those leaders, a binomial broadcast back. Only one
 * rank per node talks across nodes, so a node's link carries one message per
 * round where rd sends one per rank (MPICH's SMP-aware allreduce, Open MPI
 * HAN's small-message path).
 *
 * Leaders fold as algo_rd.c does when the node count is not a power of two.
 * Every chunk goes through the three phases on its own, so chunks pipeline.
 * The rd exchange receives into TMP and reduces the lower leader's operand
 * first, so all leaders, and the ranks they broadcast to, hold the same bits. */
#include <stdlib.h>

#include "algorithms/algo_hier.h"

/* One chunk: offset in elements and length in bytes; cur is the step that last
 * wrote it in RECV (or NODEP while the data is still SEND's). */
typedef struct leader_chunk {
    size_t co, bytes;
    int    cur, in_recv;
} leader_chunk_t;

static int leader_of(const hc_hier_geo_t *geo, int node)
{
    return hc_hier_rank(geo->h, node, 0);
}

static hc_slice_t chunk_data(const hc_algo_ctx_t *c, const leader_chunk_t *k)
{
    return hc_algo_at(c, k->in_recv ? HC_BUF_RECV : HC_BUF_SEND, k->co);
}

/* Binomial reduce over the node's local indices to local 0: receive from
 * local + 1, + 2, + 4, ... below the lowest set bit, then (not local 0) send
 * up; returns the send's step. */
static int leader_reduce_up(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo, hc_sched_t *s,
                            leader_chunk_t *k)
{
    const hc_coll_args_t *a = c->args;
    int                   i = geo->local;

    for (int d = 1; d < geo->p && (i & d) == 0; d <<= 1) {
        if (i + d >= geo->p)
            continue;
        int child = hc_hier_rank(geo->h, geo->node, i + d);
        k->cur = hc_sched_recv_reduce(s, child, hc_algo_at(c, HC_BUF_RECV, k->co), chunk_data(c, k),
                                      k->bytes, a->dtype, a->op, k->cur, HC_STEP_NODEP);
        k->in_recv = 1;
    }
    if (i == 0)
        return HC_STEP_NODEP;
    int parent = hc_hier_rank(geo->h, geo->node, i & (i - 1));
    return hc_sched_send(s, parent, chunk_data(c, k), k->bytes, k->cur, HC_STEP_NODEP);
}

/* Binomial broadcast from local 0: receive from the parent (after the send
 * up, which may read RECV), forward to the children, farthest first. */
static void leader_bcast_down(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo, hc_sched_t *s,
                              leader_chunk_t *k, int sent_up)
{
    int i = geo->local, top = 1;

    if (i != 0) {
        int parent = hc_hier_rank(geo->h, geo->node, i & (i - 1));
        k->cur =
            hc_sched_recv(s, parent, hc_algo_at(c, HC_BUF_RECV, k->co), k->bytes, sent_up, k->cur);
        k->in_recv = 1;
    }
    while (top < geo->p && (i & top) == 0)
        top <<= 1; /* children sit below i's lowest set bit (all bits for 0) */
    for (int d = top >> 1; d >= 1; d >>= 1)
        if (i + d < geo->p)
            hc_sched_send(s, hc_hier_rank(geo->h, geo->node, i + d),
                          hc_algo_at(c, HC_BUF_RECV, k->co), k->bytes, k->cur, HC_STEP_NODEP);
}

/* Recursive doubling among the nodes' leaders; leaves the result in RECV. */
static void leader_exchange(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo, hc_sched_t *s,
                            leader_chunk_t *k)
{
    const hc_coll_args_t *a = c->args;
    int                   v = geo->node;
    hc_fold_t             f = hc_fold(geo->nnodes);

    if (hc_fold_out(f, v)) { /* data to v + 1, the result back */
        int sd     = hc_sched_send(s, leader_of(geo, v + 1), chunk_data(c, k), k->bytes, k->cur,
                                   HC_STEP_NODEP);
        k->cur     = hc_sched_recv(s, leader_of(geo, v + 1), hc_algo_at(c, HC_BUF_RECV, k->co),
                                   k->bytes, sd, k->cur);
        k->in_recv = 1;
        return;
    }
    if (v < 2 * f.rem) {
        k->cur = hc_sched_recv_reduce(s, leader_of(geo, v - 1), hc_algo_at(c, HC_BUF_RECV, k->co),
                                      chunk_data(c, k), k->bytes, a->dtype, a->op, k->cur,
                                      HC_STEP_NODEP);
        k->in_recv = 1;
    }
    int nv = hc_fold_index(f, v);
    for (int mask = 1; mask < f.p; mask <<= 1) {
        int        peer = leader_of(geo, hc_fold_rank(f, nv ^ mask));
        hc_slice_t mine = chunk_data(c, k), theirs = hc_algo_at(c, HC_BUF_TMP, k->co);
        int        sd = hc_sched_send(s, peer, mine, k->bytes, k->cur, HC_STEP_NODEP);
        /* TMP's chunk was last read by the reduce that is k->cur */
        int rv     = hc_sched_recv(s, peer, theirs, k->bytes, k->cur, HC_STEP_NODEP);
        int low    = (nv & mask) == 0;
        k->cur     = hc_sched_reduce(s, hc_algo_at(c, HC_BUF_RECV, k->co), low ? mine : theirs,
                                 low ? theirs : mine, k->bytes, a->dtype, a->op, sd, rv);
        k->in_recv = 1;
    }
    if (v < 2 * f.rem)
        hc_sched_send(s, leader_of(geo, v - 1), hc_algo_at(c, HC_BUF_RECV, k->co), k->bytes, k->cur,
                      HC_STEP_NODEP);
}

hcomm_status_t hc_algo_hier_leader_allreduce(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo,
                                             hc_sched_t *s)
{
    size_t cnt = c->args->count, nc = hc_algo_nchunks(c, cnt);

    if (geo->local == 0 && geo->nnodes > 1)
        s->tmp_bytes = cnt * c->esize;
    for (size_t q = 0; q < nc; q++) {
        leader_chunk_t k = {hc_algo_chunk_off(cnt, nc, q), hc_algo_chunk_len(cnt, nc, q) * c->esize,
                            HC_STEP_NODEP, 0};
        int            up = leader_reduce_up(c, geo, s, &k);
        if (geo->local == 0 && geo->nnodes > 1)
            leader_exchange(c, geo, s, &k);
        if (!k.in_recv) { /* a lone leader with nothing to reduce */
            k.cur = hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, k.co), chunk_data(c, &k), k.bytes,
                                  HC_STEP_NODEP, HC_STEP_NODEP);
            k.in_recv = 1;
        }
        leader_bcast_down(c, geo, s, &k, up);
    }
    hc_algo_avg_div(c, s, cnt);
    return HCOMM_SUCCESS;
}
