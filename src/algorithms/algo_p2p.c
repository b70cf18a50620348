/* algo_p2p.c - send and receive (one step each) and the dissemination barrier. */
#include "algorithms/algo_builders.h"

/* args->root is the peer. A zero-count pair still exchanges a message, an
 * empty one, as NCCL's does: a send of 0 matched by a receive of more (or the
 * reverse) fails on the length check, where skipping it left a message that a
 * later operation took as its own. */
hcomm_status_t hc_algo_direct_send(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    hc_sched_send(s, c->args->root, hc_algo_at(c, HC_BUF_SEND, 0), c->args->count * c->esize,
                  HC_STEP_NODEP, HC_STEP_NODEP);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_algo_direct_recv(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    hc_sched_recv(s, c->args->root, hc_algo_at(c, HC_BUF_RECV, 0), c->args->count * c->esize,
                  HC_STEP_NODEP, HC_STEP_NODEP);
    return HCOMM_SUCCESS;
}

/* Round k: an empty message to r + 2^k, one from r - 2^k. Each receive waits
 * for the one before and each send for the previous round's receive, so a send
 * carries news of everything heard so far; after ceil(log2 n) rounds every rank
 * has heard, directly or not, from every other. */
hcomm_status_t hc_algo_dissem_barrier(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    int n = c->nranks, r = c->rank, prev = HC_STEP_NODEP;

    for (long d = 1; d < n; d *= 2) {
        hc_sched_send(s, (int)((r + d) % n), hc_slice(HC_BUF_SEND, 0), 0, prev, HC_STEP_NODEP);
        prev = hc_sched_recv(s, hc_algo_mod(r - (int)d, n), hc_slice(HC_BUF_RECV, 0), 0, prev,
                             HC_STEP_NODEP);
    }
    return HCOMM_SUCCESS;
}
