/* algo_hier_a2a.c - hierarchical alltoall on the node groups of an hc_hier_t.
 *
 * N nodes of p ranks each. Blocks between ranks of one node go directly
 * (pairwise inside the node). For every ordered pair of nodes (A, B), with
 * j = (B - A) mod N, one rank of A forwards and one rank of B receives: each
 * rank of A sends the forwarder the p blocks it holds for B's ranks, which go
 * to B as ONE message (p * p blocks), and the receiver hands each rank of B
 * its p blocks. So N (N - 1) messages cross the network instead of
 * p^2 N (N - 1).
 *
 * The forwarded message is cut into K chunks (piece k of each of its p * p
 * blocks), laid out source-major: piece k of the block from A's local s to B's
 * local d is segment s * p + d of chunk k. Chunk k of pair j is forwarded and
 * received by local rank (j - 1 + k) % p of A and of B: a pair's two ends sit
 * on the same rail, small messages (one chunk) spread the pairs over the
 * ranks, and large ones spread every pair's chunks. Ranks of a node need not
 * have consecutive numbers, so small pieces are packed into TMP (copy steps)
 * before a send and unpacked after a receive, except where they are
 * contiguous already; large pieces go between ranks of a node one by one,
 * straight from and to where they belong.
 *
 * Messages are emitted in one global order (intra-node exchange; gather of
 * chunk 0; then per chunk k: gather of k + 1, cross and scatter of k; pairs by
 * j), so every pair's sends and receives match; a step only depends on earlier
 * steps of its own chunk. In place,
 * the blocks a rank sends to node A (piece k) are read by copies before
 * anything writes the blocks received from A (piece k) into the same memory. */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/algo_builders.h"
#include "algorithms/algo_plan.h"
#include "base/log.h"

/* Pieces from this size on move inside a node one message each instead of
 * being packed: copying them costs more than the extra messages. */
#define A2A_PIECE_MSG_MIN (16 * 1024)

typedef struct a2a {
    const hc_algo_ctx_t *c;
    const hc_hier_t     *h;
    hc_sched_t          *s;
    int                  N, p, node, local, in_place;
    size_t               cnt, K; /* elements per pair; chunks of a forwarded message */
    /* TMP regions, in elements: in-place slots for local peers, packs for each
     * remote node, forwarded and received messages, the receiver's packs for
     * its node's ranks, unpack areas for each remote node. Only my chunks are
     * forwarded and received here, stored pair after pair: tcum[j] elements
     * per block for pairs 1 .. j, mine_before() within pair j. */
    size_t  t_slot, t_pack, t_fwd, t_rcv, t_spk, t_unp, t_end;
    size_t *tcum;     /* [N] */
    int    *pack_dep; /* [node * K + k]: last read of SEND for that node, chunk k */
    int    *fwd_dep;  /* [(k % 2) * N + j]: what pair j's forward of chunk k waits for */
    int    *rcv_dep;  /* [j]: the receive of pair j's message, this chunk */
    int    *ids;      /* [p]: scratch */
} a2a_t;

static int a_rank(const a2a_t *a, int node, int l)
{
    return a->h->node_ranks[a->h->node_first[node] + l];
}

static size_t po(const a2a_t *a, size_t k)
{
    return hc_algo_chunk_off(a->cnt, a->K, k);
}

static size_t pl(const a2a_t *a, size_t k)
{
    return hc_algo_chunk_len(a->cnt, a->K, k);
}

static hc_slice_t at(const a2a_t *a, uint32_t buf, size_t elem)
{
    return hc_algo_at(a->c, buf, elem);
}

/* Piece k of the block for (or from) local rank l of node, in SEND or RECV. */
static hc_slice_t blk(const a2a_t *a, uint32_t buf, int node, int l, size_t k)
{
    return at(a, buf, (size_t)a_rank(a, node, l) * a->cnt + po(a, k));
}

/* Node's ranks are consecutive numbers in local order. */
static int consecutive(const a2a_t *a, int node)
{
    for (int l = 1; l < a->p; l++)
        if (a_rank(a, node, l) != a_rank(a, node, 0) + l)
            return 0;
    return 1;
}

/* The p pieces k for (or from) node's ranks lie in one run of SEND or RECV. */
static int contiguous(const a2a_t *a, int node)
{
    return a->p == 1 || (a->K == 1 && consecutive(a, node));
}

/* Sources send straight from SEND; out of place only, since in place the
 * copies are what orders reads before the writes into the same memory. */
static int src_direct(const a2a_t *a, int node)
{
    return !a->in_place && contiguous(a, node);
}

static int big_piece(const a2a_t *a, size_t k)
{
    return pl(a, k) * a->c->esize >= A2A_PIECE_MSG_MIN;
}

/* Chunk k of my blocks for node B goes to the forwarder piece by piece. The
 * forwarder decides the same without knowing whether I run in place: each
 * rank of an NCCL job chooses that for itself. */
static int gather_pieces(const a2a_t *a, int B, size_t k)
{
    return !contiguous(a, B) && big_piece(a, k);
}

/* Chunk k of the blocks from node A comes from the receiver piece by piece. */
static int scatter_pieces(const a2a_t *a, int A, size_t k)
{
    return !contiguous(a, A) && big_piece(a, k);
}

static int mod(int x, int n)
{
    return hc_algo_mod(x, n);
}

/* The local rank that forwards (on the sending node) and receives (on the
 * receiving node) chunk k of pair j. */
static int end_local(const a2a_t *a, int j, size_t k)
{
    return (int)(((size_t)j - 1 + k) % (size_t)a->p);
}

static int mine(const a2a_t *a, int j, size_t k)
{
    return end_local(a, j, k) == a->local;
}

/* Chunks k' < x of pair j that are mine. */
static size_t n_mine(const a2a_t *a, int j, size_t x)
{
    size_t r0 = (size_t)mod(a->local - (j - 1), a->p);
    return x > r0 ? (x - r0 - 1) / (size_t)a->p + 1 : 0;
}

/* Elements per block in my chunks k' < k of pair j (chunk k' has
 * cnt / K + (k' < cnt % K) elements per block). */
static size_t mine_before(const a2a_t *a, int j, size_t k)
{
    size_t rem = a->cnt % a->K;
    return a->cnt / a->K * n_mine(a, j, k) + n_mine(a, j, k < rem ? k : rem);
}

/* Chunk k of a region of p blocks starting at base; of a region of p * p
 * blocks holding only my chunks of each pair (pair j's after pair j - 1's). */
static size_t ln_chunk(const a2a_t *a, size_t base, size_t k)
{
    return base + (size_t)a->p * po(a, k);
}

static size_t sq_mine(const a2a_t *a, size_t base, int j, size_t k)
{
    return base + (size_t)a->p * (size_t)a->p * (a->tcum[j - 1] + mine_before(a, j, k));
}

/* ---- layout ---- */

/* Places the TMP regions (a2a_run checked that they fit). */
static void a2a_layout(a2a_t *a)
{
    size_t p = (size_t)a->p, c = a->cnt, rem = (size_t)(a->N - 1), nm;
    size_t sizes[6]  = {0, 0, 0, 0, 0, 0};
    int    need_pack = 0, need_unp = 0, need_spk = 0;

    a->tcum[0] = 0;
    for (int j = 1; j < a->N; j++) { /* the last chunk has the smallest pieces */
        int B = mod(a->node + j, a->N), A = mod(a->node - j, a->N);
        need_pack |= !src_direct(a, B) && (a->in_place || !gather_pieces(a, B, a->K - 1));
        need_unp |= !contiguous(a, A) && !scatter_pieces(a, A, a->K - 1);
        need_spk |= !scatter_pieces(a, A, a->K - 1);
        a->tcum[j] = a->tcum[j - 1] + mine_before(a, j, a->K);
    }
    nm = a->tcum[a->N - 1]; /* elements per block in all my chunks */
    if (a->in_place)
        sizes[0] = (p - 1) * c;
    if (need_pack && p > 1)
        sizes[1] = rem * p * c;
    if (p > 1 || a->in_place)
        sizes[2] = nm * p * p;
    if (p > 1)
        sizes[3] = nm * p * p;
    if (p > 1 && need_spk)
        sizes[4] = nm * (p - 1) * p;
    if (need_unp && p > 1)
        sizes[5] = rem * p * c;
    size_t *off[6] = {&a->t_slot, &a->t_pack, &a->t_fwd, &a->t_rcv, &a->t_spk, &a->t_unp};
    size_t  end    = 0;
    for (int i = 0; i < 6; i++) {
        *off[i] = end;
        end += sizes[i];
    }
    a->t_end = end;
}

/* ---- phases ---- */

/* Pairwise exchange inside the node (at step t local rank l pairs with
 * (t - l) mod p, which pairs with l), chunked; in place each piece lands in a
 * TMP slot and is copied into place once its own send is done. */
static void a2a_intra(const a2a_t *a)
{
    const hc_algo_ctx_t *c  = a->c;
    size_t               nc = hc_algo_nchunks(c, a->cnt);

    if (!a->in_place)
        hc_sched_copy(a->s, at(a, HC_BUF_RECV, (size_t)c->rank * a->cnt),
                      at(a, HC_BUF_SEND, (size_t)c->rank * a->cnt), a->cnt * c->esize,
                      HC_STEP_NODEP, HC_STEP_NODEP);
    for (int t = 0; t < a->p; t++) {
        int ql = mod(t - a->local, a->p), q = a_rank(a, a->node, ql);
        if (ql == a->local)
            continue;
        size_t slot = a->t_slot + (size_t)mod(ql - a->local - 1, a->p) * a->cnt;
        for (size_t k = 0; k < nc; k++) {
            size_t     o = hc_algo_chunk_off(a->cnt, nc, k), len = hc_algo_chunk_len(a->cnt, nc, k);
            hc_slice_t blq = at(a, HC_BUF_RECV, (size_t)q * a->cnt + o);
            int        sd  = hc_sched_send(a->s, q, at(a, HC_BUF_SEND, (size_t)q * a->cnt + o),
                                           len * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
            if (!a->in_place) {
                hc_sched_recv(a->s, q, blq, len * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
                continue;
            }
            int rv = hc_sched_recv(a->s, q, at(a, HC_BUF_TMP, slot + o), len * c->esize,
                                   HC_STEP_NODEP, HC_STEP_NODEP);
            hc_sched_copy(a->s, blq, at(a, HC_BUF_TMP, slot + o), len * c->esize, sd, rv);
        }
    }
}

/* Copies piece k of my blocks for node B's ranks to dst + d * pl, one after
 * another; the first may wait for first_dep, copy d also for extra[d] (up to
 * nextra of them). Returns the last copy. */
static int a2a_pack(const a2a_t *a, int B, size_t k, size_t dst, int first_dep, const int *extra,
                    int nextra)
{
    size_t len  = pl(a, k);
    int    last = first_dep;

    for (int d = 0; d < a->p; d++)
        last = hc_sched_copy(a->s, at(a, HC_BUF_TMP, dst + (size_t)d * len),
                             blk(a, HC_BUF_SEND, B, d, k), len * a->c->esize, last,
                             d < nextra ? extra[d] : HC_STEP_NODEP);
    return last;
}

/* Gather of pair j (my node to B), chunk k: a source sends the forwarder its
 * pieces for B's ranks (as they lie, packed, or one by one); the forwarder
 * receives every other source's segment of the message and copies its own in. */
static void a2a_gather(const a2a_t *a, int j, size_t k)
{
    int    B = mod(a->node + j, a->N), fl = end_local(a, j, k), f = a_rank(a, a->node, fl), n = 0;
    size_t len = pl(a, k), es = a->c->esize, p = (size_t)a->p;

    if (fl != a->local) {
        if (src_direct(a, B) || (gather_pieces(a, B, k) && !a->in_place)) {
            for (int d = 0; d < (src_direct(a, B) ? 1 : a->p); d++)
                hc_sched_send(a->s, f, blk(a, HC_BUF_SEND, B, d, k),
                              (src_direct(a, B) ? p : 1) * len * es, HC_STEP_NODEP, HC_STEP_NODEP);
            return;
        }
        /* packed; in place also for pieces, sent from the pack one by one */
        size_t dst = ln_chunk(a, a->t_pack + (size_t)(j - 1) * p * a->cnt, k);
        int    id = a2a_pack(a, B, k, dst, HC_STEP_NODEP, NULL, 0), np = gather_pieces(a, B, k);
        a->pack_dep[(size_t)B * a->K + k] = id;
        for (int d = 0; d < (np ? a->p : 1); d++)
            hc_sched_send(a->s, f, at(a, HC_BUF_TMP, dst + (size_t)d * len),
                          (np ? 1 : p) * len * es, id, HC_STEP_NODEP);
        return;
    }
    if (src_direct(a, B) && a->p == 1)
        return; /* the forward sends straight from SEND */
    size_t msg = sq_mine(a, a->t_fwd, j, k);
    for (int s = 0; s < a->p; s++) {
        int pieces = gather_pieces(a, B, k), last = HC_STEP_NODEP;
        if (s == a->local)
            continue;
        /* pieces: each waits for the one before, so the last covers all */
        for (int d = 0; d < (pieces ? a->p : 1); d++)
            last = hc_sched_recv(a->s, a_rank(a, a->node, s),
                                 at(a, HC_BUF_TMP, msg + ((size_t)s * p + (size_t)d) * len),
                                 (pieces ? 1 : p) * len * es, last, HC_STEP_NODEP);
        a->ids[n++] = last;
    }
    int id = a2a_pack(a, B, k, msg + (size_t)a->local * p * len, HC_STEP_NODEP, a->ids, n);
    a->pack_dep[(size_t)B * a->K + k]      = id;
    a->fwd_dep[(size_t)(k % 2) * a->N + j] = id;
}

/* Chunk k of every pair's message across nodes: mine to forward, mine to receive. */
static void a2a_cross(const a2a_t *a, size_t k)
{
    size_t len = pl(a, k), es = a->c->esize, p = (size_t)a->p;

    for (int j = 1; j < a->N; j++) {
        int B = mod(a->node + j, a->N);
        if (!mine(a, j, k))
            continue;
        hc_slice_t src = src_direct(a, B) && a->p == 1
                             ? blk(a, HC_BUF_SEND, B, 0, k)
                             : at(a, HC_BUF_TMP, sq_mine(a, a->t_fwd, j, k));
        hc_sched_send(a->s, a_rank(a, B, a->local), src, p * p * len * es,
                      a->p == 1 && src_direct(a, B) ? HC_STEP_NODEP
                                                    : a->fwd_dep[(size_t)(k % 2) * a->N + j],
                      HC_STEP_NODEP);
    }
    for (int j = 1; j < a->N; j++) {
        int A = mod(a->node - j, a->N), f = a_rank(a, A, a->local);
        if (!mine(a, j, k))
            continue;
        if (a->p == 1) { /* one block: straight into RECV, after my own read of it */
            hc_sched_recv(a->s, f, blk(a, HC_BUF_RECV, A, 0, k), len * es,
                          a->in_place ? a->pack_dep[(size_t)A * a->K + k] : HC_STEP_NODEP,
                          HC_STEP_NODEP);
            continue;
        }
        a->rcv_dep[j] = hc_sched_recv(a->s, f, at(a, HC_BUF_TMP, sq_mine(a, a->t_rcv, j, k)),
                                      p * p * len * es, HC_STEP_NODEP, HC_STEP_NODEP);
    }
}

/* The receiver of chunk k of pair j (A to my node): my own pieces into RECV,
 * every other rank's sent to it packed, or one by one. */
static void a2a_scatter_recv(const a2a_t *a, int j, size_t k)
{
    int    A   = mod(a->node - j, a->N);
    size_t len = pl(a, k), es = a->c->esize, p = (size_t)a->p;
    size_t msg = sq_mine(a, a->t_rcv, j, k), mb = mine_before(a, j, k);
    size_t tj   = a->tcum[j] - a->tcum[j - 1]; /* elements per block in my chunks of pair j */
    int    wdep = a->in_place ? a->pack_dep[(size_t)A * a->K + k] : HC_STEP_NODEP;

    for (int d = 0; d < a->p; d++) {
        if (d == a->local) {
            for (int s = 0; s < a->p; s++)
                hc_sched_copy(a->s, blk(a, HC_BUF_RECV, A, s, k),
                              at(a, HC_BUF_TMP, msg + ((size_t)s * p + (size_t)d) * len), len * es,
                              a->rcv_dep[j], wdep);
            continue;
        }
        if (scatter_pieces(a, A, k)) {
            for (int s = 0; s < a->p; s++)
                hc_sched_send(a->s, a_rank(a, a->node, d),
                              at(a, HC_BUF_TMP, msg + ((size_t)s * p + (size_t)d) * len), len * es,
                              a->rcv_dep[j], HC_STEP_NODEP);
            continue;
        }
        size_t di   = (size_t)mod(d - a->local - 1, a->p);
        size_t dst  = a->t_spk + (p - 1) * p * a->tcum[j - 1] + (di * tj + mb) * p;
        int    last = a->rcv_dep[j];
        for (int s = 0; s < a->p; s++)
            last = hc_sched_copy(a->s, at(a, HC_BUF_TMP, dst + (size_t)s * len),
                                 at(a, HC_BUF_TMP, msg + ((size_t)s * p + (size_t)d) * len),
                                 len * es, last, HC_STEP_NODEP);
        hc_sched_send(a->s, a_rank(a, a->node, d), at(a, HC_BUF_TMP, dst), p * len * es, last,
                      HC_STEP_NODEP);
    }
}

/* A rank of my node other than the receiver of chunk k of pair j: its p
 * pieces from A's ranks. */
static void a2a_scatter_dest(const a2a_t *a, int j, size_t k)
{
    int    A = mod(a->node - j, a->N), r = a_rank(a, a->node, end_local(a, j, k));
    size_t len = pl(a, k), es = a->c->esize, p = (size_t)a->p;
    int    wdep = a->in_place ? a->pack_dep[(size_t)A * a->K + k] : HC_STEP_NODEP;

    if (contiguous(a, A) || scatter_pieces(a, A, k)) {
        for (int s = 0; s < (contiguous(a, A) ? 1 : a->p); s++)
            hc_sched_recv(a->s, r, blk(a, HC_BUF_RECV, A, s, k),
                          (contiguous(a, A) ? p : 1) * len * es, wdep, HC_STEP_NODEP);
        return;
    }
    size_t u = ln_chunk(a, a->t_unp + (size_t)(j - 1) * p * a->cnt, k);
    int    rv =
        hc_sched_recv(a->s, r, at(a, HC_BUF_TMP, u), p * len * es, HC_STEP_NODEP, HC_STEP_NODEP);
    for (int s = 0; s < a->p; s++)
        hc_sched_copy(a->s, blk(a, HC_BUF_RECV, A, s, k), at(a, HC_BUF_TMP, u + (size_t)s * len),
                      len * es, rv, wdep);
}

/* The gather runs a chunk ahead, so that its messages between two ranks of a
 * node are not queued behind the previous chunk's scatter between them. */
static void a2a_chunks(const a2a_t *a)
{
    for (int j = 1; j < a->N; j++)
        a2a_gather(a, j, 0);
    for (size_t k = 0; k < a->K; k++) {
        for (int j = 1; j < a->N && k + 1 < a->K; j++)
            a2a_gather(a, j, k + 1);
        a2a_cross(a, k);
        for (int j = 1; j < a->N && a->p > 1; j++) {
            if (mine(a, j, k))
                a2a_scatter_recv(a, j, k);
            else
                a2a_scatter_dest(a, j, k);
        }
    }
}

/* ---- entry ---- */

/* Node groups of equal size holding every rank once: fills N, p, node, local
 * and *nranks. HCOMM_ERR_UNSUPPORTED for unequal nodes. */
static hcomm_status_t a2a_geo(const hc_hier_t *h, int rank, a2a_t *a, int *nranks)
{
    int N = h->nnodes, n = N >= 1 ? h->node_first[N] - h->node_first[0] : 0;
    int ok = N >= 1 && n >= 1 && h->node_first[0] == 0, p = ok ? n / N : 0, *seen;

    for (int nd = 0; ok && nd < N; nd++)
        if (h->node_first[nd + 1] - h->node_first[nd] != p) {
            hc_debug(ALGO, "alltoall/hier: nodes of unequal size (node %d has %d ranks, not %d)",
                     nd, h->node_first[nd + 1] - h->node_first[nd], p);
            return HCOMM_ERR_UNSUPPORTED;
        }
    seen = ok ? calloc((size_t)n, sizeof(*seen)) : NULL;
    if (ok && seen == NULL)
        return HCOMM_ERR_NO_MEMORY;
    a->node = -1;
    for (int i = 0; ok && i < n; i++) {
        int r = h->node_ranks[i];
        ok    = r >= 0 && r < n && !seen[r]++;
        if (ok && r == rank)
            a->node = i / p, a->local = i % p;
    }
    free(seen);
    if (!ok || a->node < 0) {
        hc_error(ALGO, "alltoall/hier: node groups do not hold rank %d and every rank once", rank);
        return HCOMM_ERR_INVALID_ARG;
    }
    a->h = h, a->N = N, a->p = p, *nranks = n;
    return HCOMM_SUCCESS;
}

/* Chunks of the forwarded message: pieces of at most chunk_elems / p^2 elements. */
static size_t a2a_nchunks(const a2a_t *a)
{
    size_t pp = (size_t)a->p * (size_t)a->p, m = a->c->chunk_elems / pp;
    if (m == 0)
        m = 1;
    return a->cnt / m + (a->cnt % m != 0);
}

static hcomm_status_t a2a_run(a2a_t *a)
{
    size_t nn = (size_t)a->N, p = (size_t)a->p;

    /* TMP holds at most (6 n + 3 p^2) blocks */
    if (a->cnt > SIZE_MAX / a->c->esize / (6 * nn * p + 3 * p * p)) {
        hc_error(ALGO, "alltoall/hier: %zu elements overflow the scratch buffer", a->cnt);
        return HCOMM_ERR_OVERFLOW;
    }
    a->K        = a2a_nchunks(a);
    a->tcum     = malloc(nn * sizeof(size_t));
    a->pack_dep = malloc(nn * a->K * sizeof(int));
    a->fwd_dep  = malloc(2 * nn * sizeof(int));
    a->rcv_dep  = malloc(nn * sizeof(int));
    a->ids      = malloc((size_t)a->p * sizeof(int));
    if (a->tcum == NULL || a->pack_dep == NULL || a->fwd_dep == NULL || a->rcv_dep == NULL ||
        a->ids == NULL) {
        free(a->tcum), free(a->pack_dep), free(a->fwd_dep), free(a->rcv_dep), free(a->ids);
        return HCOMM_ERR_NO_MEMORY;
    }
    a2a_layout(a);
    for (size_t i = 0; i < nn * a->K; i++)
        a->pack_dep[i] = HC_STEP_NODEP;
    a->s->tmp_bytes = a->t_end * a->c->esize;
    a2a_intra(a);
    a2a_chunks(a);
    free(a->tcum), free(a->pack_dep), free(a->fwd_dep), free(a->rcv_dep), free(a->ids);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_algo_hier_alltoall(const hc_coll_args_t *args, const hc_hier_t *h, int rank,
                                     size_t chunk_bytes, hc_sched_t **sched_p)
{
    hc_algo_ctx_t  c;
    a2a_t          a = {0};
    hc_sched_t    *s;
    int            nranks = 0;
    hcomm_status_t st;

    if (args == NULL || h == NULL || sched_p == NULL) {
        hc_error(ALGO, "building a hierarchical alltoall: NULL argument");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (args->coll != HC_COLL_ALLTOALL) {
        hc_error(ALGO, "hier alltoall builder called for %s", hc_coll_name(args->coll));
        return HCOMM_ERR_UNSUPPORTED;
    }
    st = a2a_geo(h, rank, &a, &nranks);
    if (st == HCOMM_SUCCESS)
        st = hc_algo_ctx_init(&c, args, nranks, rank, chunk_bytes);
    if (st != HCOMM_SUCCESS)
        return st;
    s = hc_sched_create(nranks, rank);
    if (s == NULL)
        return HCOMM_ERR_NO_MEMORY;
    a.c = &c, a.s = s, a.cnt = args->count, a.in_place = args->in_place != 0;
    st = args->count == 0 ? HCOMM_SUCCESS : a2a_run(&a);
    return hc_algo_finish(&c, "hier", st, s, sched_p);
}
