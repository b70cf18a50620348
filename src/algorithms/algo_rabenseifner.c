/* algo_rabenseifner.c - Rabenseifner allreduce: reduce-scatter by recursive
 * halving, then allgather by recursive doubling, for large messages.
 *
 * Non-power-of-two rank counts fold as in algo_rd.c: with p the largest power
 * of two <= n and rem = n - p, each even rank below 2*rem hands its data to
 * the odd rank above it and gets the result back. The p remaining ranks split
 * the buffer into p blocks; in the halving round at distance d a rank keeps
 * the half of its window holding its own block, sends the other half to its
 * partner and reduces the partner's copy of the kept half into RECV. Every
 * block is reduced by one rank only, so all ranks end with the same bits.
 *
 * Messages are cut at fixed multiples of the chunk size (cells), and ranges
 * only shrink while halving and grow while doubling, so within a cell each
 * round has at most one piece sent and one received, and the dependencies of
 * a piece are the one or two steps that last touched its cell. */
#include <stdlib.h>

#include "algorithms/algo_builders.h"

#define RAB_MAX_ROUNDS 32

typedef struct rab {
    const hc_algo_ctx_t *c;
    hc_sched_t          *s;
    size_t               cell, ncells; /* elements per cell, cells */
    hc_fold_t            fold;    /* ranks that fold, and the p that exchange */
    int                  nr, rounds;
    size_t               keep_lo[RAB_MAX_ROUNDS], keep_hi[RAB_MAX_ROUNDS];
    size_t               send_lo[RAB_MAX_ROUNDS], send_hi[RAB_MAX_ROUNDS];
    int                  peer[RAB_MAX_ROUNDS];
    int                 *w;       /* [ncells] last write of RECV in the cell */
    int                 *wy;      /* [ncells] second step that, with w, completes the cell */
    int                 *rs_send; /* [rounds * ncells] halving sends, read RECV until done */
} rab_t;

/* The piece of [lo, hi) in cell g: sets *off and returns its length (0: none). */
static size_t rab_piece(const rab_t *R, size_t lo, size_t hi, size_t g, size_t *off)
{
    size_t a = g * R->cell, b = a + R->cell;

    a    = a > lo ? a : lo;
    b    = b < hi ? b : hi;
    *off = a;
    return b > a ? b - a : 0;
}

/* Block ranges of every round: the window halves around the rank's own block. */
static void rab_plan_rounds(rab_t *R)
{
    size_t cnt  = R->c->args->count;
    int    base = 0, t = 0;

    for (int d = R->fold.p / 2; d >= 1; d /= 2, t++) {
        int low = (R->nr & d) == 0, kb = low ? base : base + d, sb = low ? base + d : base;
        R->peer[t]    = hc_fold_rank(R->fold, R->nr ^ d);
        R->keep_lo[t] = hc_part_off(cnt, R->fold.p, kb);
        R->keep_hi[t] = hc_part_off(cnt, R->fold.p, kb + d);
        R->send_lo[t] = hc_part_off(cnt, R->fold.p, sb);
        R->send_hi[t] = hc_part_off(cnt, R->fold.p, sb + d);
        base          = kb;
    }
    R->rounds = t;
}

/* Halving rounds; the data starts in SEND (from_recv == 0) or in RECV. */
static void rab_reduce_scatter(rab_t *R, int from_recv)
{
    const hc_algo_ctx_t  *c = R->c;
    const hc_coll_args_t *a = c->args;

    for (int t = 0; t < R->rounds; t++) {
        uint32_t from = t == 0 && !from_recv ? HC_BUF_SEND : HC_BUF_RECV;
        for (size_t g = 0; g < R->ncells; g++) {
            size_t so, sl = rab_piece(R, R->send_lo[t], R->send_hi[t], g, &so);
            size_t ko, kl = rab_piece(R, R->keep_lo[t], R->keep_hi[t], g, &ko);
            int    sd = HC_STEP_NODEP;
            if (sl != 0)
                sd = hc_sched_send(R->s, R->peer[t], hc_algo_at(c, from, so), sl * c->esize,
                                   R->w[g], HC_STEP_NODEP);
            R->rs_send[(size_t)t * R->ncells + g] = sd;
            if (kl != 0)
                R->w[g] = hc_sched_recv_reduce(R->s, R->peer[t], hc_algo_at(c, HC_BUF_RECV, ko),
                                               hc_algo_at(c, from, ko), kl * c->esize, a->dtype,
                                               a->op, R->w[g], HC_STEP_NODEP);
        }
    }
}

/* Doubling rounds in reverse: send the kept range, receive the one sent while
 * halving (once that send is done). Afterwards (w, wy) complete every cell. */
static void rab_allgather(rab_t *R)
{
    const hc_algo_ctx_t *c = R->c;

    for (size_t g = 0; g < R->ncells; g++)
        R->wy[g] = HC_STEP_NODEP;
    for (int t = R->rounds - 1; t >= 0; t--) {
        for (size_t g = 0; g < R->ncells; g++) {
            size_t ko, kl = rab_piece(R, R->keep_lo[t], R->keep_hi[t], g, &ko);
            size_t so, sl = rab_piece(R, R->send_lo[t], R->send_hi[t], g, &so);
            int    sd = HC_STEP_NODEP, rv = HC_STEP_NODEP;
            if (kl != 0)
                sd = hc_sched_send(R->s, R->peer[t], hc_algo_at(c, HC_BUF_RECV, ko), kl * c->esize,
                                   R->w[g], R->wy[g]);
            if (sl != 0)
                rv = hc_sched_recv(R->s, R->peer[t], hc_algo_at(c, HC_BUF_RECV, so), sl * c->esize,
                                   R->rs_send[(size_t)t * R->ncells + g], HC_STEP_NODEP);
            /* what the cell holds is the kept range (sent, so done) plus rv */
            if (kl != 0)
                R->w[g] = sd, R->wy[g] = rv;
            else if (sl != 0)
                R->w[g] = rv, R->wy[g] = HC_STEP_NODEP;
        }
    }
}

/* Even ranks below 2*rem: data out to r+1, the result back (after the send,
 * since in place the result lands where the data was). */
static void rab_folded_out(rab_t *R)
{
    const hc_algo_ctx_t *c   = R->c;
    size_t               cnt = c->args->count;

    for (size_t g = 0; g < R->ncells; g++) {
        size_t o, l = rab_piece(R, 0, cnt, g, &o);
        R->w[g] = hc_sched_send(R->s, c->rank + 1, hc_algo_at(c, HC_BUF_SEND, o), l * c->esize,
                                HC_STEP_NODEP, HC_STEP_NODEP);
    }
    for (size_t g = 0; g < R->ncells; g++) {
        size_t o, l = rab_piece(R, 0, cnt, g, &o);
        hc_sched_recv(R->s, c->rank + 1, hc_algo_at(c, HC_BUF_RECV, o), l * c->esize, R->w[g],
                      HC_STEP_NODEP);
    }
}

static void rab_run(rab_t *R)
{
    const hc_algo_ctx_t  *c = R->c;
    const hc_coll_args_t *a = c->args;
    int                   r = c->rank, folds = r < 2 * R->fold.rem;

    for (size_t g = 0; g < R->ncells; g++)
        R->w[g] = HC_STEP_NODEP;
    if (folds && r % 2 == 0) {
        rab_folded_out(R);
        return;
    }
    if (folds) { /* take the even neighbour's data in */
        for (size_t g = 0; g < R->ncells; g++) {
            size_t o, l = rab_piece(R, 0, a->count, g, &o);
            R->w[g] = hc_sched_recv_reduce(R->s, r - 1, hc_algo_at(c, HC_BUF_RECV, o),
                                           hc_algo_at(c, HC_BUF_SEND, o), l * c->esize, a->dtype,
                                           a->op, HC_STEP_NODEP, HC_STEP_NODEP);
        }
    }
    rab_plan_rounds(R);
    rab_reduce_scatter(R, folds);
    rab_allgather(R);
    for (size_t g = 0; folds && g < R->ncells; g++) {
        size_t o, l = rab_piece(R, 0, a->count, g, &o);
        hc_sched_send(R->s, r - 1, hc_algo_at(c, HC_BUF_RECV, o), l * c->esize, R->w[g], R->wy[g]);
    }
}

hcomm_status_t hc_algo_rabenseifner_allreduce(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    size_t cnt = c->args->count;
    rab_t  R   = {.c = c, .s = s};
    int    lg  = 0;

    if (c->nranks == 1)
        return hc_algo_local_copy(c, s);
    if (cnt == 0)
        return HCOMM_SUCCESS;
    R.fold = hc_fold(c->nranks);
    R.nr   = hc_fold_index(R.fold, c->rank);
    while ((2 << lg) <= R.fold.p)
        lg++;
    R.cell    = c->chunk_elems < cnt ? c->chunk_elems : cnt;
    R.ncells  = cnt / R.cell + (cnt % R.cell != 0);
    R.w       = malloc(R.ncells * sizeof(*R.w));
    R.wy      = malloc(R.ncells * sizeof(*R.wy));
    R.rs_send = malloc((size_t)lg * R.ncells * sizeof(*R.rs_send));
    if (R.w == NULL || R.wy == NULL || R.rs_send == NULL) {
        free(R.w), free(R.wy), free(R.rs_send);
        return HCOMM_ERR_NO_MEMORY;
    }
    rab_run(&R);
    free(R.w), free(R.wy), free(R.rs_send);
    hc_algo_avg_div(c, s, cnt);
    return HCOMM_SUCCESS;
}
