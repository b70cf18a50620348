/* algo_ring.c - ring allreduce (reduce-scatter then allgather), ring allgather
 * and ring reduce_scatter, in rank order or along any order (algo_plan.h).
 *
 * The rank at ring position v sends to position v+1 and receives from v-1; in
 * rank order position and rank agree. Blocks are cut into the same
 * number of chunks, and chunk k of one ring step depends only on chunk k of
 * the step before, so the chunks travel round the ring one behind another. */
#include <stdlib.h>

#include "algorithms/algo_builders.h"
#include "algorithms/algo_plan.h"
#include "base/log.h"

/* This rank's place in the ring; order NULL: rank order. */
typedef struct ring {
    int        pos, right, left;
    const int *order;
} ring_t;

/* The block (rank) at ring position p, any p. */
static int ring_block(const hc_algo_ctx_t *c, const ring_t *g, int p)
{
    p = hc_algo_mod(p, c->nranks);
    return g->order != NULL ? g->order[p] : p;
}

static ring_t ring_identity(const hc_algo_ctx_t *c)
{
    ring_t g = {c->rank, (c->rank + 1) % c->nranks, hc_algo_mod(c->rank - 1, c->nranks), NULL};
    return g;
}

typedef struct ring_span {
    size_t off, len; /* elements */
} ring_span_t;

/* Chunk k (of nc) of block b when count elements are cut into n blocks. */
static ring_span_t ring_chunk(size_t count, int n, int b, size_t nc, size_t k)
{
    size_t      bl = hc_part_len(count, n, b);
    ring_span_t sp = {hc_part_off(count, n, b) + hc_algo_chunk_off(bl, nc, k),
                      hc_algo_chunk_len(bl, nc, k)};
    return sp;
}

/* Several rings share an allreduce: ring q of nr carries part q of the buffer,
 * and the schedule interleaves the rings' chunks step by step ("lanes": lane
 * L is chunk L / nr of ring L % nr), so every ring's pipeline runs at once. */
typedef struct ring_set {
    const ring_t *g;
    int           nr;
    size_t        nc; /* chunks per block of one ring's part */
} ring_set_t;

/* Lane L's span of block b (ring positions) of its ring's part. */
static ring_span_t ring_lane(const hc_algo_ctx_t *c, const ring_set_t *rs, size_t L, int b)
{
    int         q     = (int)(L % (size_t)rs->nr);
    size_t      plen  = hc_part_len(c->args->count, rs->nr, q);
    ring_span_t sp    = ring_chunk(plen, c->nranks, b, rs->nc, L / (size_t)rs->nr);
    sp.off           += hc_part_off(c->args->count, rs->nr, q);
    return sp;
}

/* Reduce-scatter into RECV: at step t position r sends block r-t-1 and reduces
 * the incoming block r-t-2, ending with block r complete (blocks numbered by
 * position: the result is the whole buffer). rs_send[t * lanes + L] and last[L]
 * (the final reduce of block r) are filled for the allgather. */
static void ring_ar_reduce_scatter(const hc_algo_ctx_t *c, const ring_set_t *rs, hc_sched_t *s,
                                   int *rs_send, int *last)
{
    const hc_coll_args_t *a     = c->args;
    int                   n     = c->nranks;
    size_t                lanes = rs->nc * (size_t)rs->nr;

    for (size_t L = 0; L < lanes; L++)
        last[L] = HC_STEP_NODEP;
    for (int t = 0; t < n - 1; t++) {
        for (size_t L = 0; L < lanes; L++) {
            const ring_t *g  = &rs->g[L % (size_t)rs->nr];
            ring_span_t   ss = ring_lane(c, rs, L, hc_algo_mod(g->pos - t - 1, n));
            ring_span_t   rv = ring_lane(c, rs, L, hc_algo_mod(g->pos - t - 2, n));
            int           sd = HC_STEP_NODEP;

            /* step 0 sends our own contribution straight from SEND */
            if (ss.len != 0)
                sd = hc_sched_send(s, g->right,
                                   hc_algo_at(c, t == 0 ? HC_BUF_SEND : HC_BUF_RECV, ss.off),
                                   ss.len * c->esize, last[L], HC_STEP_NODEP);
            rs_send[(size_t)t * lanes + L] = sd;
            if (rv.len != 0)
                last[L] = hc_sched_recv_reduce(
                    s, g->left, hc_algo_at(c, HC_BUF_RECV, rv.off),
                    hc_algo_at(c, HC_BUF_SEND, rv.off), rv.len * c->esize, a->dtype, a->op,
                    HC_STEP_NODEP, HC_STEP_NODEP);
            else
                last[L] = HC_STEP_NODEP;
        }
    }
}

/* Allgather of the reduced blocks within RECV: at step t rank r forwards block
 * r-t and receives block r-t-1, which it last sent at reduce-scatter step t (the
 * receive waits for that send, so the block is not overwritten while it goes). */
static void ring_ar_allgather(const hc_algo_ctx_t *c, const ring_set_t *rs, hc_sched_t *s,
                              const int *rs_send, int *last)
{
    int    n     = c->nranks;
    size_t lanes = rs->nc * (size_t)rs->nr;

    for (int t = 0; t < n - 1; t++) {
        for (size_t L = 0; L < lanes; L++) {
            const ring_t *g  = &rs->g[L % (size_t)rs->nr];
            ring_span_t   ss = ring_lane(c, rs, L, hc_algo_mod(g->pos - t, n));
            ring_span_t   rv = ring_lane(c, rs, L, hc_algo_mod(g->pos - t - 1, n));

            if (ss.len != 0)
                hc_sched_send(s, g->right, hc_algo_at(c, HC_BUF_RECV, ss.off),
                              ss.len * c->esize, last[L], HC_STEP_NODEP);
            last[L] = HC_STEP_NODEP;
            if (rv.len != 0)
                last[L] = hc_sched_recv(s, g->left, hc_algo_at(c, HC_BUF_RECV, rv.off),
                                        rv.len * c->esize, rs_send[(size_t)t * lanes + L],
                                        HC_STEP_NODEP);
        }
    }
}

static hcomm_status_t ring_allreduce(const hc_algo_ctx_t *c, const ring_t *g, int nr,
                                     hc_sched_t *s)
{
    int        n  = c->nranks;
    ring_set_t rs = {g, nr, 0};
    size_t     lanes;
    int       *deps;

    if (n == 1)
        return hc_algo_local_copy(c, s);
    rs.nc = hc_algo_nchunks(c, hc_part_len(hc_part_len(c->args->count, nr, 0), n, 0));
    if (rs.nc == 0)
        return HCOMM_SUCCESS;
    lanes = rs.nc * (size_t)nr;
    deps  = malloc((size_t)n * lanes * sizeof(*deps));
    if (deps == NULL)
        return HCOMM_ERR_NO_MEMORY;
    /* deps: (n-1) * lanes reduce-scatter sends, then one chain head per lane */
    ring_ar_reduce_scatter(c, &rs, s, deps, deps + (size_t)(n - 1) * lanes);
    ring_ar_allgather(c, &rs, s, deps, deps + (size_t)(n - 1) * lanes);
    free(deps);
    hc_algo_avg_div(c, s, c->args->count);
    return HCOMM_SUCCESS;
}

/* Own block copied into place (a no-op in place), then n-1 forwarding steps. */
static hcomm_status_t ring_allgather(const hc_algo_ctx_t *c, const ring_t *g, hc_sched_t *s)
{
    int    n = c->nranks, r = c->rank, v = g->pos, right = g->right, left = g->left;
    size_t cnt = c->args->count, nc;
    int   *last;

    if (n == 1)
        return hc_algo_local_copy(c, s);
    nc = hc_algo_nchunks(c, cnt);
    if (nc == 0)
        return HCOMM_SUCCESS;
    last = malloc(nc * sizeof(*last));
    if (last == NULL)
        return HCOMM_ERR_NO_MEMORY;
    hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, (size_t)r * cnt), hc_algo_at(c, HC_BUF_SEND, 0),
                  cnt * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
    for (int t = 0; t < n - 1; t++) {
        size_t sb = (size_t)ring_block(c, g, v - t), rb = (size_t)ring_block(c, g, v - t - 1);
        for (size_t k = 0; k < nc; k++) {
            size_t co = hc_algo_chunk_off(cnt, nc, k), cl = hc_algo_chunk_len(cnt, nc, k);
            if (t == 0)
                hc_sched_send(s, right, hc_algo_at(c, HC_BUF_SEND, co), cl * c->esize,
                              HC_STEP_NODEP, HC_STEP_NODEP);
            else
                hc_sched_send(s, right, hc_algo_at(c, HC_BUF_RECV, sb * cnt + co), cl * c->esize,
                              last[k], HC_STEP_NODEP);
            last[k] = hc_sched_recv(s, left, hc_algo_at(c, HC_BUF_RECV, rb * cnt + co),
                                    cl * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
        }
    }
    free(last);
    return HCOMM_SUCCESS;
}

/* Partial sums travel in TMP, two block-sized slots used in turn: the reduce of
 * step t into a slot waits for the send of step t-1, which read that slot's
 * previous contents. The last step reduces straight into RECV. */
static hcomm_status_t ring_reduce_scatter(const hc_algo_ctx_t *c, const ring_t *g, hc_sched_t *s)
{
    const hc_coll_args_t *a = c->args;
    int                   n = c->nranks, v = g->pos, right = g->right, left = g->left;
    size_t                cnt = a->count, nc;
    int                  *dep;

    if (n == 1)
        return hc_algo_local_copy(c, s);
    nc = hc_algo_nchunks(c, cnt);
    if (nc == 0)
        return HCOMM_SUCCESS;
    dep = malloc(2 * nc * sizeof(*dep)); /* [k]: last reduce, [nc + k]: last send */
    if (dep == NULL)
        return HCOMM_ERR_NO_MEMORY;
    s->tmp_bytes = (size_t)(n - 2 < 2 ? n - 2 : 2) * cnt * c->esize;
    for (int t = 0; t < n - 1; t++) {
        size_t sb = (size_t)ring_block(c, g, v - t - 1), rb = (size_t)ring_block(c, g, v - t - 2);
        for (size_t k = 0; k < nc; k++) {
            size_t     co = hc_algo_chunk_off(cnt, nc, k), cl = hc_algo_chunk_len(cnt, nc, k);
            hc_slice_t from = t == 0 ? hc_algo_at(c, HC_BUF_SEND, sb * cnt + co)
                                     : hc_algo_at(c, HC_BUF_TMP, (size_t)((t - 1) % 2) * cnt + co);
            hc_slice_t into = t == n - 2 ? hc_algo_at(c, HC_BUF_RECV, co)
                                         : hc_algo_at(c, HC_BUF_TMP, (size_t)(t % 2) * cnt + co);
            int sd = hc_sched_send(s, right, from, cl * c->esize, t == 0 ? HC_STEP_NODEP : dep[k],
                                   HC_STEP_NODEP);
            dep[k] = hc_sched_recv_reduce(s, left, into, hc_algo_at(c, HC_BUF_SEND, rb * cnt + co),
                                          cl * c->esize, a->dtype, a->op,
                                          t >= 2 ? dep[nc + k] : HC_STEP_NODEP, HC_STEP_NODEP);
            dep[nc + k] = sd;
        }
    }
    free(dep);
    hc_algo_avg_div(c, s, cnt);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_algo_ring_allreduce(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    ring_t g = ring_identity(c);
    return ring_allreduce(c, &g, 1, s);
}

hcomm_status_t hc_algo_ring_allgather(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    ring_t g = ring_identity(c);
    return ring_allgather(c, &g, s);
}

hcomm_status_t hc_algo_ring_reduce_scatter(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    ring_t g = ring_identity(c);
    return ring_reduce_scatter(c, &g, s);
}

/* Finds rank's position in order, which must be a permutation of 0..n-1. */
static hcomm_status_t ring_place(const int *order, int n, int rank, ring_t *g)
{
    unsigned char *seen = calloc((size_t)n, 1);
    int            bad  = -1;

    if (seen == NULL)
        return HCOMM_ERR_NO_MEMORY;
    g->pos = -1;
    for (int p = 0; p < n && bad < 0; p++) {
        if (order[p] < 0 || order[p] >= n || seen[order[p]])
            bad = p;
        else
            seen[order[p]] = 1;
        if (order[p] == rank)
            g->pos = p;
    }
    free(seen);
    if (bad >= 0) {
        hc_error(ALGO, "ring order: entry %d (rank %d) out of range or repeated", bad, order[bad]);
        return HCOMM_ERR_INVALID_ARG;
    }
    g->right = order[(g->pos + 1) % n];
    g->left  = order[hc_algo_mod(g->pos - 1, n)];
    g->order = order;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_algo_ring_ordered(const hc_coll_args_t *args, const int *order, int nrings,
                                    int nranks, int rank, size_t chunk_bytes, hc_sched_t **sched_p)
{
    hc_algo_ctx_t  c;
    ring_t        *g;
    hc_sched_t    *s = NULL;
    hcomm_status_t st;

    if (args == NULL || order == NULL || sched_p == NULL || nrings < 1) {
        hc_error(ALGO, "ordered ring: NULL argument or %d rings", nrings);
        return HCOMM_ERR_INVALID_ARG;
    }
    st = hc_algo_ctx_init(&c, args, nranks, rank, chunk_bytes);
    if (st != HCOMM_SUCCESS)
        return st;
    if (args->coll != HC_COLL_ALLREDUCE && args->coll != HC_COLL_ALLGATHER &&
        args->coll != HC_COLL_REDUCE_SCATTER) {
        hc_error(ALGO, "ordered ring does not implement %s", hc_coll_name(args->coll));
        return HCOMM_ERR_UNSUPPORTED;
    }
    if (args->coll != HC_COLL_ALLREDUCE)
        nrings = 1; /* their blocks are laid out by rank: one ring carries them */
    g = malloc((size_t)nrings * sizeof(*g));
    if (g == NULL)
        return HCOMM_ERR_NO_MEMORY;
    for (int q = 0; q < nrings && st == HCOMM_SUCCESS; q++)
        st = ring_place(order + (size_t)q * (size_t)nranks, nranks, rank, &g[q]);
    if (st == HCOMM_SUCCESS && (s = hc_sched_create(nranks, rank)) == NULL)
        st = HCOMM_ERR_NO_MEMORY;
    if (st != HCOMM_SUCCESS) {
        free(g);
        return st;
    }
    if (args->coll == HC_COLL_ALLREDUCE)
        st = ring_allreduce(&c, g, nrings, s);
    else if (args->coll == HC_COLL_ALLGATHER)
        st = ring_allgather(&c, g, s);
    else
        st = ring_reduce_scatter(&c, g, s);
    free(g);
    return hc_algo_finish(&c, "ring", st, s, sched_p);
}
