/* algo_rd.c - recursive-doubling allreduce, for small messages.
 *
 * With p the largest power of two <= n and rem = n - p, the first 2*rem ranks
 * fold in pairs: each even one hands its data to the odd one above it and
 * waits for the result. The p remaining ranks exchange whole buffers with
 * partners at distance 1, 2, 4, ... and reduce. Every exchange receives into
 * TMP and reduces after both the send and the receive are done, so a rank
 * never overwrites the data its partner is still taking. Both partners reduce
 * the same two operands, so every rank ends with the same bits. */
#include <stdlib.h>

#include "algorithms/algo_builders.h"

/* The exchange rounds over the p ranks; data starts in SEND (in_recv == 0) or
 * in RECV, cur[k] is the step that last wrote chunk k. */
static void rd_rounds(const hc_algo_ctx_t *c, hc_sched_t *s, size_t nc, int nr, hc_fold_t f,
                      int in_recv, int *cur)
{
    const hc_coll_args_t *a = c->args;

    for (int mask = 1; mask < f.p; mask <<= 1) {
        int      peer = hc_fold_rank(f, nr ^ mask);
        uint32_t from = in_recv ? HC_BUF_RECV : HC_BUF_SEND;
        int      low  = (nr & mask) == 0;
        for (size_t k = 0; k < nc; k++) {
            size_t co    = hc_algo_chunk_off(a->count, nc, k);
            size_t bytes = hc_algo_chunk_len(a->count, nc, k) * c->esize;
            int sd = hc_sched_send(s, peer, hc_algo_at(c, from, co), bytes, cur[k], HC_STEP_NODEP);
            /* TMP's chunk was last read by the reduce that is cur[k] */
            int rv =
                hc_sched_recv(s, peer, hc_algo_at(c, HC_BUF_TMP, co), bytes, cur[k], HC_STEP_NODEP);
            hc_slice_t mine = hc_algo_at(c, from, co), theirs = hc_algo_at(c, HC_BUF_TMP, co);
            /* lower rank's operand first: min/max of -0/+0 and NaNs agree everywhere */
            cur[k] = hc_sched_reduce(s, hc_algo_at(c, HC_BUF_RECV, co), low ? mine : theirs,
                                     low ? theirs : mine, bytes, a->dtype, a->op, sd, rv);
        }
        in_recv = 1;
    }
}

hcomm_status_t hc_algo_rd_allreduce(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    const hc_coll_args_t *a = c->args;
    int                   n = c->nranks, r = c->rank, in_recv = 0;
    hc_fold_t             f = hc_fold(n);
    size_t                nc = hc_algo_nchunks(c, a->count);
    int                  *cur;

    if (n == 1)
        return hc_algo_local_copy(c, s);
    if (nc == 0)
        return HCOMM_SUCCESS;
    cur = malloc(nc * sizeof(*cur));
    if (cur == NULL)
        return HCOMM_ERR_NO_MEMORY;
    for (size_t k = 0; k < nc; k++)
        cur[k] = HC_STEP_NODEP;

    if (hc_fold_out(f, r)) {
        /* folded out: give the data away, get the result back (after the send,
         * since in place the result lands where the data was) */
        for (size_t k = 0; k < nc; k++) {
            size_t co    = hc_algo_chunk_off(a->count, nc, k);
            size_t bytes = hc_algo_chunk_len(a->count, nc, k) * c->esize;
            cur[k] = hc_sched_send(s, r + 1, hc_algo_at(c, HC_BUF_SEND, co), bytes, HC_STEP_NODEP,
                                   HC_STEP_NODEP);
        }
        for (size_t k = 0; k < nc; k++) {
            size_t co    = hc_algo_chunk_off(a->count, nc, k);
            size_t bytes = hc_algo_chunk_len(a->count, nc, k) * c->esize;
            hc_sched_recv(s, r + 1, hc_algo_at(c, HC_BUF_RECV, co), bytes, cur[k], HC_STEP_NODEP);
        }
        free(cur);
        hc_algo_avg_div(c, s, a->count);
        return HCOMM_SUCCESS;
    }

    s->tmp_bytes = a->count * c->esize;
    if (r < 2 * f.rem) {
        for (size_t k = 0; k < nc; k++) {
            size_t     co    = hc_algo_chunk_off(a->count, nc, k);
            size_t     bytes = hc_algo_chunk_len(a->count, nc, k) * c->esize;
            hc_slice_t in = hc_algo_at(c, HC_BUF_RECV, co), mine = hc_algo_at(c, HC_BUF_SEND, co);
            cur[k] = hc_sched_recv_reduce(s, r - 1, in, mine, bytes, a->dtype, a->op, HC_STEP_NODEP,
                                          HC_STEP_NODEP);
        }
        in_recv = 1;
    }
    rd_rounds(c, s, nc, hc_fold_index(f, r), f, in_recv, cur);
    if (r < 2 * f.rem) {
        for (size_t k = 0; k < nc; k++) {
            size_t co    = hc_algo_chunk_off(a->count, nc, k);
            size_t bytes = hc_algo_chunk_len(a->count, nc, k) * c->esize;
            hc_sched_send(s, r - 1, hc_algo_at(c, HC_BUF_RECV, co), bytes, cur[k], HC_STEP_NODEP);
        }
    }
    free(cur);
    hc_algo_avg_div(c, s, a->count);
    return HCOMM_SUCCESS;
}
