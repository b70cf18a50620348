/* algo_chain.c - pipelined chain broadcast and reduce, rooted anywhere.
 *
 * Ranks are ordered from the root: v = (rank - root) mod n. Broadcast flows
 * down the chain (v to v+1), reduce flows up it (v+1 to v), chunk by chunk, so
 * every link carries a different chunk at the same time. */
#include <stdlib.h>

#include "algorithms/algo_builders.h"

/* Chunks of its partial sum a middle rank keeps in flight (TMP slots). */
#define CHAIN_SLOTS 8

hcomm_status_t hc_algo_chain_broadcast(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    int    n = c->nranks, r = c->rank, v = hc_algo_mod(r - c->args->root, n);
    int    next = (r + 1) % n, prev = hc_algo_mod(r - 1, n);
    size_t cnt = c->args->count, nc = hc_algo_nchunks(c, cnt);

    if (n == 1)
        return hc_algo_local_copy(c, s);
    if (v == 0 && cnt != 0)
        hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, 0), hc_algo_at(c, HC_BUF_SEND, 0),
                      cnt * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
    for (size_t k = 0; k < nc; k++) {
        size_t co = hc_algo_chunk_off(cnt, nc, k), bytes = hc_algo_chunk_len(cnt, nc, k) * c->esize;
        if (v == 0) {
            hc_sched_send(s, next, hc_algo_at(c, HC_BUF_SEND, co), bytes, HC_STEP_NODEP,
                          HC_STEP_NODEP);
            continue;
        }
        int rv = hc_sched_recv(s, prev, hc_algo_at(c, HC_BUF_RECV, co), bytes, HC_STEP_NODEP,
                               HC_STEP_NODEP);
        if (v < n - 1)
            hc_sched_send(s, next, hc_algo_at(c, HC_BUF_RECV, co), bytes, rv, HC_STEP_NODEP);
    }
    return HCOMM_SUCCESS;
}

/* A middle rank reduces chunk k into TMP slot k % slots, once the send that read
 * the slot's previous chunk is done, and passes it on. */
static void chain_reduce_middle(const hc_algo_ctx_t *c, hc_sched_t *s, int from, int to, size_t nc)
{
    const hc_coll_args_t *a          = c->args;
    size_t                slots      = nc < CHAIN_SLOTS ? nc : CHAIN_SLOTS;
    size_t                slot_elems = hc_algo_chunk_len(a->count, nc, 0);
    int                   sent[CHAIN_SLOTS];

    s->tmp_bytes = slots * slot_elems * c->esize;
    for (size_t k = 0; k < nc; k++) {
        size_t     co    = hc_algo_chunk_off(a->count, nc, k);
        size_t     bytes = hc_algo_chunk_len(a->count, nc, k) * c->esize;
        hc_slice_t slot  = hc_algo_at(c, HC_BUF_TMP, (k % slots) * slot_elems);
        int        wait  = k >= slots ? sent[k % slots] : HC_STEP_NODEP;
        int        rr   = hc_sched_recv_reduce(s, from, slot, hc_algo_at(c, HC_BUF_SEND, co), bytes,
                                               a->dtype, a->op, wait, HC_STEP_NODEP);
        sent[k % slots] = hc_sched_send(s, to, slot, bytes, rr, HC_STEP_NODEP);
    }
}

hcomm_status_t hc_algo_chain_reduce(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    const hc_coll_args_t *a = c->args;
    int                   n = c->nranks, r = c->rank, v = hc_algo_mod(r - a->root, n);
    int                   to = hc_algo_mod(r - 1, n), from = (r + 1) % n;
    size_t                nc = hc_algo_nchunks(c, a->count);

    if (n == 1)
        return hc_algo_local_copy(c, s);
    if (nc == 0)
        return HCOMM_SUCCESS;
    if (v != 0 && v != n - 1) {
        chain_reduce_middle(c, s, from, to, nc);
        return HCOMM_SUCCESS;
    }
    for (size_t k = 0; k < nc; k++) {
        size_t co    = hc_algo_chunk_off(a->count, nc, k);
        size_t bytes = hc_algo_chunk_len(a->count, nc, k) * c->esize;
        if (v == n - 1) /* the far end only contributes */
            hc_sched_send(s, to, hc_algo_at(c, HC_BUF_SEND, co), bytes, HC_STEP_NODEP,
                          HC_STEP_NODEP);
        else
            hc_sched_recv_reduce(s, from, hc_algo_at(c, HC_BUF_RECV, co),
                                 hc_algo_at(c, HC_BUF_SEND, co), bytes, a->dtype, a->op,
                                 HC_STEP_NODEP, HC_STEP_NODEP);
    }
    if (v == 0)
        hc_algo_avg_div(c, s, a->count);
    return HCOMM_SUCCESS;
}
