/* algo_bruck.c - Bruck allgather: ceil(log2 n) rounds for any rank count, for
 * small blocks where the number of messages matters.
 *
 * In round k (distance 2^k) rank r sends the first min(2^k, n - 2^k) blocks it
 * holds, counted from its own, to r - 2^k, and receives as many from r + 2^k,
 * which it stores after the ones it holds. The classic algorithm gathers in
 * that rotated order and rotates at the end; here block i of the rotated order
 * is stored straight at its place by rank, (r + i) mod n, so the rotation costs
 * nothing and no scratch is needed: a range that wraps past the last block
 * goes as two messages.
 *
 * Round k sends what rounds before it received, so its sends wait for the last
 * receive of the round before (receives of a round are chained: they come from
 * one peer in order anyway) and the last send of the round before, which
 * waited for everything earlier in the same way. */
#include "algorithms/algo_builders.h"

typedef struct bruck {
    const hc_algo_ctx_t *c;
    hc_sched_t          *s;
    int                  dep[2]; /* done: every block held so far is in RECV */
    int                  last;   /* last step of the current round's kind */
} bruck_t;

/* Sends (recv == 0) or receives blocks [b0, b0 + m) mod n, in pieces. */
static void bruck_blocks(bruck_t *B, int peer, int b0, int m, int recv, uint32_t from)
{
    const hc_algo_ctx_t *c   = B->c;
    size_t               cnt = c->args->count, n = (size_t)c->nranks;
    size_t               seg[2][2] = {{(size_t)b0 * cnt, 0}, {0, 0}};

    seg[0][1] = ((size_t)b0 + (size_t)m < n ? (size_t)b0 + (size_t)m : n) * cnt;
    if ((size_t)b0 + (size_t)m > n)
        seg[1][1] = ((size_t)b0 + (size_t)m - n) * cnt;
    for (int j = 0; j < 2; j++) {
        /* advanced by len: an unchunked chunk_elems is SIZE_MAX and wraps */
        for (size_t o = seg[j][0], len; o < seg[j][1]; o += len) {
            len            = seg[j][1] - o < c->chunk_elems ? seg[j][1] - o : c->chunk_elems;
            hc_slice_t at  = hc_algo_at(c, from, from == HC_BUF_SEND ? o - seg[0][0] : o);
            if (recv)
                B->last = hc_sched_recv(B->s, peer, at, len * c->esize, B->last, HC_STEP_NODEP);
            else
                B->last = hc_sched_send(B->s, peer, at, len * c->esize, B->dep[0], B->dep[1]);
        }
    }
}

hcomm_status_t hc_algo_bruck_allgather(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    int     n = c->nranks, r = c->rank, copy;
    size_t  cnt = c->args->count;
    bruck_t B   = {.c = c, .s = s, .dep = {HC_STEP_NODEP, HC_STEP_NODEP}};

    if (n == 1)
        return hc_algo_local_copy(c, s);
    if (cnt == 0)
        return HCOMM_SUCCESS;
    /* own block into place (skipped in place); round 0 sends it from SEND */
    copy =
        hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, (size_t)r * cnt), hc_algo_at(c, HC_BUF_SEND, 0),
                      cnt * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
    for (int d = 1; d < n; d *= 2) {
        int m  = d < n - d ? d : n - d, sent, got;
        B.last = HC_STEP_NODEP;
        /* a round-0 send reads SEND only: the chunk offsets are into the own block */
        bruck_blocks(&B, hc_algo_mod(r - d, n), r, m, 0, d == 1 ? HC_BUF_SEND : HC_BUF_RECV);
        sent   = B.last;
        B.last = HC_STEP_NODEP;
        bruck_blocks(&B, (r + d) % n, (r + d) % n, m, 1, HC_BUF_RECV);
        got      = B.last;
        B.dep[0] = d == 1 ? copy : sent;
        B.dep[1] = got;
    }
    return HCOMM_SUCCESS;
}
