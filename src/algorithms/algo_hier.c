/* algo_hier.c - hierarchical allreduce, allgather and reduce_scatter over the
 * node groups of an hc_hier_t, and the entry point hc_algo_hier.
 *
 * Rails are derived from the node groups: rail l is one rank per node, local
 * rank l % (ranks on that node). With equal nodes that is hc_hier_t's rail l;
 * with unequal nodes a node short of ranks lends one of its ranks to the rails
 * it lacks (a "proxy" that relays data but owns no block there), so every rail
 * spans every node and each node splits its work over its own ranks only.
 *
 * The data is cut into pieces (at most one chunk each). Every piece remembers
 * the last step that wrote it and the last that read it; a step depends on
 * whichever is later, so phases and rings chain piece by piece and pipeline. */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/algo_builders.h"
#include "algorithms/algo_hier.h"
#include "algorithms/algo_plan.h"
#include "base/log.h"

typedef struct hier_track {
    size_t *off, *len; /* elements, in the tracked buffer */
    int    *w, *r;     /* last write, last read (reads are chained) */
} hier_track_t;

/* A ring over m ranks g[]; segment i is pieces segq[seg[i] .. seg[i + 1]). The
 * own contribution is read from in, partial results live in acc, both at the
 * piece's offset; in_tracked: in is the tracked memory (acc, or aliases it). */
typedef struct hier_ring {
    const int    *g;
    int           m, pos;
    const size_t *seg, *segq;
    uint32_t      in, acc;
    int           in_tracked;
} hier_ring_t;

static int trk_dep(const hier_track_t *t, size_t q)
{
    return t->r[q] != HC_STEP_NODEP ? t->r[q] : t->w[q];
}

static void trk_read(hier_track_t *t, size_t q, int id)
{
    if (id >= 0)
        t->r[q] = id;
}

static void trk_write(hier_track_t *t, size_t q, int id)
{
    t->w[q] = id;
    t->r[q] = HC_STEP_NODEP;
}

static void trk_free(hier_track_t *t)
{
    free(t->off);
    free(t->len);
    free(t->w);
    free(t->r);
}

static hcomm_status_t trk_alloc(hier_track_t *t, size_t n)
{
    t->off = malloc(n * sizeof(*t->off));
    t->len = malloc(n * sizeof(*t->len));
    t->w   = malloc(n * sizeof(*t->w));
    t->r   = malloc(n * sizeof(*t->r));
    if (t->off == NULL || t->len == NULL || t->w == NULL || t->r == NULL) {
        trk_free(t);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (size_t q = 0; q < n; q++)
        t->w[q] = t->r[q] = HC_STEP_NODEP;
    return HCOMM_SUCCESS;
}

static void ring_send(const hc_algo_ctx_t *c, hc_sched_t *s, hier_track_t *tk, int peer,
                      uint32_t buf, int tracked, size_t q)
{
    int id = hc_sched_send(s, peer, hc_algo_at(c, buf, tk->off[q]), tk->len[q] * c->esize,
                           tracked ? trk_dep(tk, q) : HC_STEP_NODEP, HC_STEP_NODEP);
    if (tracked)
        trk_read(tk, q, id);
}

/* Ring reduce-scatter: at step t send segment pos-t-1, reduce segment pos-t-2;
 * ends with segment pos complete in acc. */
static void ring_rs(const hc_algo_ctx_t *c, hc_sched_t *s, const hier_ring_t *rg, hier_track_t *tk)
{
    int m = rg->m, right = rg->g[(rg->pos + 1) % m], left = rg->g[hc_algo_mod(rg->pos - 1, m)];

    for (int t = 0; t < m - 1; t++) {
        int    sb = hc_algo_mod(rg->pos - t - 1, m), rb = hc_algo_mod(rg->pos - t - 2, m);
        size_t ns = rg->seg[sb + 1] - rg->seg[sb], nr = rg->seg[rb + 1] - rg->seg[rb];
        for (size_t j = 0; j < ns || j < nr; j++) {
            if (j < ns && tk->len[rg->segq[rg->seg[sb] + j]] != 0)
                ring_send(c, s, tk, right, t == 0 ? rg->in : rg->acc, t > 0 || rg->in_tracked,
                          rg->segq[rg->seg[sb] + j]);
            if (j < nr && tk->len[rg->segq[rg->seg[rb] + j]] != 0) {
                size_t q  = rg->segq[rg->seg[rb] + j];
                int    id = hc_sched_recv_reduce(s, left, hc_algo_at(c, rg->acc, tk->off[q]),
                                                 hc_algo_at(c, rg->in, tk->off[q]),
                                                 tk->len[q] * c->esize, c->args->dtype, c->args->op,
                                                 trk_dep(tk, q), HC_STEP_NODEP);
                trk_write(tk, q, id);
            }
        }
    }
}

/* Ring allgather within acc: at step t forward segment pos-t, receive pos-t-1. */
static void ring_ag(const hc_algo_ctx_t *c, hc_sched_t *s, const hier_ring_t *rg, hier_track_t *tk)
{
    int m = rg->m, right = rg->g[(rg->pos + 1) % m], left = rg->g[hc_algo_mod(rg->pos - 1, m)];

    for (int t = 0; t < m - 1; t++) {
        int    sb = hc_algo_mod(rg->pos - t, m), rb = hc_algo_mod(rg->pos - t - 1, m);
        size_t ns = rg->seg[sb + 1] - rg->seg[sb], nr = rg->seg[rb + 1] - rg->seg[rb];
        for (size_t j = 0; j < ns || j < nr; j++) {
            if (j < ns && tk->len[rg->segq[rg->seg[sb] + j]] != 0)
                ring_send(c, s, tk, right, rg->acc, 1, rg->segq[rg->seg[sb] + j]);
            if (j < nr && tk->len[rg->segq[rg->seg[rb] + j]] != 0) {
                size_t q  = rg->segq[rg->seg[rb] + j];
                int    id = hc_sched_recv(s, left, hc_algo_at(c, rg->acc, tk->off[q]),
                                          tk->len[q] * c->esize, trk_dep(tk, q), HC_STEP_NODEP);
                trk_write(tk, q, id);
            }
        }
    }
}

/* Scratch for one build: pieces, segment lists and a group. */
typedef struct hier_work {
    hier_track_t tk;
    size_t      *seg, *segq;
    int         *g;
} hier_work_t;

static void work_free(hier_work_t *w)
{
    trk_free(&w->tk);
    free(w->seg);
    free(w->segq);
    free(w->g);
}

static hcomm_status_t work_alloc(hier_work_t *w, const hc_hier_geo_t *geo, size_t npieces)
{
    int most = geo->nnodes > geo->ppn_max ? geo->nnodes : geo->ppn_max;

    w->seg  = malloc(((size_t)most + 1) * sizeof(*w->seg));
    w->segq = malloc(npieces * sizeof(*w->segq));
    w->g    = malloc((size_t)most * sizeof(*w->g));
    if (w->seg == NULL || w->segq == NULL || w->g == NULL ||
        trk_alloc(&w->tk, npieces) != HCOMM_SUCCESS) {
        free(w->seg);
        free(w->segq);
        free(w->g);
        return HCOMM_ERR_NO_MEMORY;
    }
    return HCOMM_SUCCESS;
}

/* The node ring: my node's ranks in local order. */
static void node_ring(const hc_hier_geo_t *geo, hier_work_t *w, hier_ring_t *rg)
{
    for (int i = 0; i < geo->p; i++)
        w->g[i] = hc_hier_rank(geo->h, geo->node, i);
    rg->g = w->g, rg->m = geo->p, rg->pos = geo->local;
    rg->seg = w->seg, rg->segq = w->segq;
}

/* Rail l's ring: one rank per node, in node order; I sit at my node. */
static void rail_ring(const hc_hier_geo_t *geo, int l, hier_work_t *w, hier_ring_t *rg)
{
    for (int n = 0; n < geo->nnodes; n++)
        w->g[n] = hc_hier_rail_member(geo->h, n, l);
    rg->g = w->g, rg->m = geo->nnodes, rg->pos = geo->node;
    rg->seg = w->seg, rg->segq = w->segq;
}

/* ---- allreduce ---- */

/* ppn_max blocks, block b held on each node by local rank b % p; block b is
 * cut into nnodes sub-blocks (the rail ring's segments) of nc chunks each. */
static void ar_pieces(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo, size_t nc, hier_track_t *tk)
{
    size_t cnt = c->args->count, q = 0;
    int    nb = geo->ppn_max, m = geo->nnodes;

    for (int b = 0; b < nb; b++) {
        size_t bo = hc_part_off(cnt, nb, b), bl = hc_part_len(cnt, nb, b);
        for (int j = 0; j < m; j++) {
            size_t so = bo + hc_part_off(bl, m, j), sl = hc_part_len(bl, m, j);
            for (size_t k = 0; k < nc; k++, q++) {
                tk->off[q] = so + hc_algo_chunk_off(sl, nc, k);
                tk->len[q] = hc_algo_chunk_len(sl, nc, k);
            }
        }
    }
}

/* Node ring segments for allreduce: local rank i gets blocks b % p == i. */
static void ar_node_segs(const hc_hier_geo_t *geo, size_t per_block, hier_work_t *w)
{
    size_t at = 0;

    for (int i = 0; i < geo->p; i++) {
        w->seg[i] = at;
        for (int b = i; b < geo->ppn_max; b += geo->p)
            for (size_t x = 0; x < per_block; x++)
                w->segq[at++] = (size_t)b * per_block + x;
    }
    w->seg[geo->p] = at;
}

static hcomm_status_t hier_allreduce(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo,
                                     hc_sched_t *s)
{
    int         m = geo->nnodes, p = geo->p, nb = geo->ppn_max;
    size_t      sl0 = hc_part_len(hc_part_len(c->args->count, nb, 0), m, 0);
    size_t      nc = hc_algo_nchunks(c, sl0), per_block = (size_t)m * nc;
    hier_work_t w;
    hier_ring_t rg;

    if (nc == 0)
        return HCOMM_SUCCESS;
    if (work_alloc(&w, geo, (size_t)nb * per_block) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    ar_pieces(c, geo, nc, &w.tk);
    if (p > 1) { /* 1: reduce-scatter inside the node */
        node_ring(geo, &w, &rg);
        ar_node_segs(geo, per_block, &w);
        rg.in = HC_BUF_SEND, rg.acc = HC_BUF_RECV, rg.in_tracked = c->args->in_place;
        ring_rs(c, s, &rg, &w.tk);
    }
    for (int b = geo->local; m > 1 && b < nb; b += p) { /* 2: allreduce along rails */
        rail_ring(geo, b, &w, &rg);
        for (int j = 0; j <= m; j++)
            w.seg[j] = (size_t)j * nc;
        for (size_t x = 0; x < per_block; x++)
            w.segq[x] = (size_t)b * per_block + x;
        rg.in         = p > 1 ? HC_BUF_RECV : HC_BUF_SEND;
        rg.acc        = HC_BUF_RECV;
        rg.in_tracked = p > 1 || c->args->in_place;
        ring_rs(c, s, &rg, &w.tk);
        ring_ag(c, s, &rg, &w.tk);
    }
    if (p > 1) { /* 3: allgather inside the node */
        node_ring(geo, &w, &rg);
        ar_node_segs(geo, per_block, &w);
        rg.acc = HC_BUF_RECV;
        ring_ag(c, s, &rg, &w.tk);
    }
    work_free(&w);
    hc_algo_avg_div(c, s, c->args->count);
    return HCOMM_SUCCESS;
}

/* ---- allgather and reduce_scatter: blocks of count elements, one per rank ---- */

static void blk_pieces(const hc_algo_ctx_t *c, int nranks, size_t nc, hier_track_t *tk)
{
    size_t cnt = c->args->count;

    for (size_t x = 0, q = 0; x < (size_t)nranks; x++)
        for (size_t k = 0; k < nc; k++, q++) {
            tk->off[q] = x * cnt + hc_algo_chunk_off(cnt, nc, k);
            tk->len[q] = hc_algo_chunk_len(cnt, nc, k);
        }
}

static size_t blk_add(hier_work_t *w, size_t at, int rank, size_t nc)
{
    for (size_t k = 0; k < nc; k++)
        w->segq[at++] = (size_t)rank * nc + k;
    return at;
}

/* Node ring segments: local rank i gets the blocks of rails l % p == i. */
static void blk_node_segs(const hc_hier_geo_t *geo, size_t nc, hier_work_t *w)
{
    size_t at = 0;

    for (int i = 0; i < geo->p; i++) {
        w->seg[i] = at;
        for (int l = i; l < geo->ppn_max; l += geo->p)
            for (int n = 0; n < geo->nnodes; n++)
                if (l < hc_hier_node_size(geo->h, n))
                    at = blk_add(w, at, hc_hier_rank(geo->h, n, l), nc);
    }
    w->seg[geo->p] = at;
}

/* Rail l's segments: each node's block of local rank l, empty for a proxy. */
static void blk_rail_segs(const hc_hier_geo_t *geo, int l, size_t nc, hier_work_t *w)
{
    size_t at = 0;

    for (int n = 0; n < geo->nnodes; n++) {
        w->seg[n] = at;
        if (l < hc_hier_node_size(geo->h, n))
            at = blk_add(w, at, hc_hier_rank(geo->h, n, l), nc);
    }
    w->seg[geo->nnodes] = at;
}

/* Own block into place, allgather along the rails, then inside the node. */
static hcomm_status_t hier_allgather(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo,
                                     hc_sched_t *s)
{
    size_t      cnt = c->args->count, nc = hc_algo_nchunks(c, cnt);
    hier_work_t w;
    hier_ring_t rg;
    int         id;

    if (nc == 0)
        return HCOMM_SUCCESS;
    if (work_alloc(&w, geo, (size_t)c->nranks * nc) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    blk_pieces(c, c->nranks, nc, &w.tk);
    id = hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, (size_t)c->rank * cnt),
                       hc_algo_at(c, HC_BUF_SEND, 0), cnt * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
    for (size_t k = 0; k < nc; k++)
        trk_write(&w.tk, (size_t)c->rank * nc + k, id);
    for (int l = geo->local; geo->nnodes > 1 && l < geo->ppn_max; l += geo->p) {
        rail_ring(geo, l, &w, &rg);
        blk_rail_segs(geo, l, nc, &w);
        rg.acc = HC_BUF_RECV;
        ring_ag(c, s, &rg, &w.tk);
    }
    if (geo->p > 1) {
        node_ring(geo, &w, &rg);
        blk_node_segs(geo, nc, &w);
        rg.acc = HC_BUF_RECV;
        ring_ag(c, s, &rg, &w.tk);
    }
    work_free(&w);
    return HCOMM_SUCCESS;
}

/* Partial sums in TMP, laid out like SEND: reduce-scatter inside the node (each
 * rank collects its rails' blocks), then along each rail; own block to RECV. */
static hcomm_status_t hier_reduce_scatter(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo,
                                          hc_sched_t *s)
{
    size_t      cnt = c->args->count, nc = hc_algo_nchunks(c, cnt);
    hier_work_t w;
    hier_ring_t rg;

    if (nc == 0)
        return HCOMM_SUCCESS;
    if (work_alloc(&w, geo, (size_t)c->nranks * nc) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    blk_pieces(c, c->nranks, nc, &w.tk);
    s->tmp_bytes = (size_t)c->nranks * cnt * c->esize;
    if (geo->p > 1) {
        node_ring(geo, &w, &rg);
        blk_node_segs(geo, nc, &w);
        rg.in = HC_BUF_SEND, rg.acc = HC_BUF_TMP, rg.in_tracked = 0;
        ring_rs(c, s, &rg, &w.tk);
    }
    for (int l = geo->local; geo->nnodes > 1 && l < geo->ppn_max; l += geo->p) {
        rail_ring(geo, l, &w, &rg);
        blk_rail_segs(geo, l, nc, &w);
        rg.in = geo->p > 1 ? HC_BUF_TMP : HC_BUF_SEND, rg.acc = HC_BUF_TMP;
        rg.in_tracked = geo->p > 1;
        ring_rs(c, s, &rg, &w.tk);
    }
    for (size_t k = 0; k < nc; k++) {
        size_t q = (size_t)c->rank * nc + k;
        if (w.tk.len[q] != 0)
            hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, hc_algo_chunk_off(cnt, nc, k)),
                          hc_algo_at(c, HC_BUF_TMP, w.tk.off[q]), w.tk.len[q] * c->esize,
                          trk_dep(&w.tk, q), HC_STEP_NODEP);
    }
    work_free(&w);
    hc_algo_avg_div(c, s, cnt);
    return HCOMM_SUCCESS;
}

/* ---- entry ---- */

/* Checks that h's node groups hold every rank of nranks once; finds mine. */
static hcomm_status_t hier_geo(const hc_hier_t *h, int rank, int *nranks, hc_hier_geo_t *geo)
{
    int  n = h->nnodes < 1 ? 0 : h->node_first[h->nnodes], ok = h->nnodes >= 1 && n >= 1;
    int *seen = ok ? calloc((size_t)n, sizeof(*seen)) : NULL;

    if (ok && seen == NULL)
        return HCOMM_ERR_NO_MEMORY;
    geo->h = h, geo->nnodes = h->nnodes, geo->ppn_max = 0, geo->node = -1;
    for (int nd = 0; ok && nd < h->nnodes; nd++) {
        int sz       = hc_hier_node_size(h, nd);
        ok           = sz >= 1;
        geo->ppn_max = sz > geo->ppn_max ? sz : geo->ppn_max;
        for (int l = 0; ok && l < sz; l++) {
            int r = hc_hier_rank(h, nd, l);
            ok    = r >= 0 && r < n && !seen[r]++;
            if (ok && r == rank)
                geo->node = nd, geo->local = l, geo->p = sz;
        }
    }
    free(seen);
    if (!ok || geo->node < 0) {
        hc_error(ALGO, "hierarchy: node groups do not hold rank %d and every rank once", rank);
        return HCOMM_ERR_INVALID_ARG;
    }
    *nranks = n;
    return HCOMM_SUCCESS;
}

static hcomm_status_t hier_check_args(const hc_coll_args_t *a, int leader, int nranks,
                                      size_t *esize)
{
    size_t es = hcomm_dtype_size(a->dtype);

    if (leader ? a->coll != HC_COLL_ALLREDUCE
               : a->coll != HC_COLL_ALLREDUCE && a->coll != HC_COLL_BROADCAST &&
                     a->coll != HC_COLL_REDUCE && a->coll != HC_COLL_ALLGATHER &&
                     a->coll != HC_COLL_REDUCE_SCATTER) {
        hc_error(ALGO, "%s does not implement %s", leader ? "leader" : "hier",
                 hc_coll_name(a->coll));
        return HCOMM_ERR_UNSUPPORTED;
    }
    if (es == 0 || (a->coll != HC_COLL_BROADCAST && a->coll != HC_COLL_ALLGATHER &&
                    (unsigned)a->op >= HCOMM_OP_COUNT)) {
        hc_error(ALGO, "%s: invalid datatype %d or op %d", hc_coll_name(a->coll), (int)a->dtype,
                 (int)a->op);
        return es == 0 ? HCOMM_ERR_INVALID_DTYPE : HCOMM_ERR_INVALID_OP;
    }
    if ((a->coll == HC_COLL_BROADCAST || a->coll == HC_COLL_REDUCE) &&
        (a->root < 0 || a->root >= nranks)) {
        hc_error(ALGO, "%s: root %d of %d ranks", hc_coll_name(a->coll), a->root, nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    if (a->count > SIZE_MAX / es / (size_t)(nranks < 2 ? 2 : nranks)) {
        hc_error(ALGO, "%s: %zu elements overflow", hc_coll_name(a->coll), a->count);
        return HCOMM_ERR_OVERFLOW;
    }
    *esize = es;
    return HCOMM_SUCCESS;
}

static hcomm_status_t hier_run(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo, int leader,
                               hc_sched_t *s)
{
    if (c->nranks == 1)
        return hc_algo_local_copy(c, s);
    if (leader)
        return hc_algo_hier_leader_allreduce(c, geo, s);
    switch (c->args->coll) {
    case HC_COLL_ALLREDUCE:
        return hier_allreduce(c, geo, s);
    case HC_COLL_BROADCAST:
        return hc_algo_hier_broadcast(c, geo, s);
    case HC_COLL_REDUCE:
        return hc_algo_hier_reduce(c, geo, s);
    case HC_COLL_ALLGATHER:
        return hier_allgather(c, geo, s);
    default:
        return hier_reduce_scatter(c, geo, s);
    }
}

/* Both public builders: the hier collectives, or (leader) the leaders' allreduce. */
static hcomm_status_t hier_build(const hc_coll_args_t *args, const hc_hier_t *h, int rank,
                                 size_t chunk_bytes, int leader, hc_sched_t **sched_p)
{
    hc_algo_ctx_t  c = {.args = args, .rank = rank};
    hc_hier_geo_t  geo;
    hc_sched_t    *s;
    hcomm_status_t status;

    if (args == NULL || h == NULL || sched_p == NULL) {
        hc_error(ALGO, "building a hierarchical schedule: NULL argument");
        return HCOMM_ERR_INVALID_ARG;
    }
    status = hier_geo(h, rank, &c.nranks, &geo);
    if (status == HCOMM_SUCCESS)
        status = hier_check_args(args, leader, c.nranks, &c.esize);
    if (status != HCOMM_SUCCESS)
        return status;
    /* chunk_bytes 0: no pipelining */
    c.chunk_elems = chunk_bytes == 0 ? SIZE_MAX : chunk_bytes / c.esize;
    if (c.chunk_elems == 0)
        c.chunk_elems = 1;
    s = hc_sched_create(c.nranks, rank);
    if (s == NULL)
        return HCOMM_ERR_NO_MEMORY;
    status = hier_run(&c, &geo, leader, s);
    if (status != HCOMM_SUCCESS)
        hc_error(ALGO, "%s/%s: out of memory building the schedule", hc_coll_name(args->coll),
                 leader ? "leader" : "hier");
    else
        status = hc_sched_finalize(s);
    if (status != HCOMM_SUCCESS) {
        hc_sched_destroy(s);
        return status;
    }
    *sched_p = s;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_algo_hier(const hc_coll_args_t *args, const hc_hier_t *h, int rank,
                            size_t chunk_bytes, hc_sched_t **sched_p)
{
    return hier_build(args, h, rank, chunk_bytes, 0, sched_p);
}

hcomm_status_t hc_algo_hier_leader(const hc_coll_args_t *args, const hc_hier_t *h, int rank,
                                   size_t chunk_bytes, hc_sched_t **sched_p)
{
    return hier_build(args, h, rank, chunk_bytes, 1, sched_p);
}
