/* algo_hier_tree.c - hierarchical broadcast and reduce: a chain across the
 * nodes' leaders starting at the root's node (the root leads its node, the
 * first rank leads the others), and a chain inside each node from its leader.
 * A leader thus has up to two children. Pipelined chunk by chunk. */
#include "algorithms/algo_hier.h"

/* Partial-sum chunks a middle rank of the reduce keeps in flight (TMP slots). */
#define HIER_SLOTS 8

typedef struct hier_tree {
    int parent, nchildren, children[2];
} hier_tree_t;

/* Leader of node n, as a local index. */
static int tree_leader(int n, int root_node, int root_local)
{
    return n == root_node ? root_local : 0;
}

static hier_tree_t tree_of(const hc_hier_geo_t *geo, int root)
{
    const hc_hier_t *h = geo->h;
    int              m = geo->nnodes, rn = 0, rl = 0;
    hier_tree_t      t = {-1, 0, {-1, -1}};

    for (int n = 0; n < m; n++)
        for (int l = 0; l < hc_hier_node_size(h, n); l++)
            if (hc_hier_rank(h, n, l) == root)
                rn = n, rl = l;
    int v    = hc_algo_mod(geo->node - rn, m); /* my node's place in the leaders' chain */
    int lead = tree_leader(geo->node, rn, rl);
    int cp   = hc_algo_mod(geo->local - lead, geo->p); /* my place in the node's chain */

    if (cp == 0) {
        if (v > 0) {
            int pn   = hc_algo_mod(geo->node - 1, m);
            t.parent = hc_hier_rank(h, pn, tree_leader(pn, rn, rl));
        }
        if (v < m - 1) {
            int nn                    = (geo->node + 1) % m;
            t.children[t.nchildren++] = hc_hier_rank(h, nn, tree_leader(nn, rn, rl));
        }
    } else {
        t.parent = hc_hier_rank(h, geo->node, (lead + cp - 1) % geo->p);
    }
    if (cp < geo->p - 1)
        t.children[t.nchildren++] = hc_hier_rank(h, geo->node, (lead + cp + 1) % geo->p);
    return t;
}

hcomm_status_t hc_algo_hier_broadcast(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo,
                                      hc_sched_t *s)
{
    size_t      cnt = c->args->count, nc = hc_algo_nchunks(c, cnt);
    hier_tree_t t = tree_of(geo, c->args->root);

    if (t.parent < 0 && cnt != 0)
        hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, 0), hc_algo_at(c, HC_BUF_SEND, 0),
                      cnt * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
    for (size_t k = 0; k < nc; k++) {
        size_t co = hc_algo_chunk_off(cnt, nc, k), bytes = hc_algo_chunk_len(cnt, nc, k) * c->esize;
        int    rv = HC_STEP_NODEP;
        if (t.parent >= 0)
            rv = hc_sched_recv(s, t.parent, hc_algo_at(c, HC_BUF_RECV, co), bytes, HC_STEP_NODEP,
                               HC_STEP_NODEP);
        for (int i = 0; i < t.nchildren; i++)
            hc_sched_send(s, t.children[i],
                          hc_algo_at(c, t.parent < 0 ? HC_BUF_SEND : HC_BUF_RECV, co), bytes, rv,
                          HC_STEP_NODEP);
    }
    return HCOMM_SUCCESS;
}

/* Chunk k is reduced from the children into RECV at the root, into a TMP slot
 * elsewhere (once the send that read the slot's previous chunk is done), then
 * passed to the parent. A leaf sends its SEND straight up. */
hcomm_status_t hc_algo_hier_reduce(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo, hc_sched_t *s)
{
    const hc_coll_args_t *a          = c->args;
    size_t                nc         = hc_algo_nchunks(c, a->count);
    size_t                slots      = nc < HIER_SLOTS ? nc : HIER_SLOTS;
    size_t                slot_elems = nc == 0 ? 0 : hc_algo_chunk_len(a->count, nc, 0);
    hier_tree_t           t          = tree_of(geo, a->root);
    int                   sent[HIER_SLOTS];

    if (t.parent >= 0 && t.nchildren > 0)
        s->tmp_bytes = slots * slot_elems * c->esize;
    for (size_t k = 0; k < nc; k++) {
        size_t     co    = hc_algo_chunk_off(a->count, nc, k);
        size_t     bytes = hc_algo_chunk_len(a->count, nc, k) * c->esize;
        hc_slice_t in    = hc_algo_at(c, HC_BUF_SEND, co);
        hc_slice_t acc   = t.parent < 0 ? hc_algo_at(c, HC_BUF_RECV, co)
                                        : hc_algo_at(c, HC_BUF_TMP, (k % slots) * slot_elems);
        int        id    = t.parent >= 0 && k >= slots ? sent[k % slots] : HC_STEP_NODEP;

        if (t.nchildren == 0) {
            hc_sched_send(s, t.parent, in, bytes, HC_STEP_NODEP, HC_STEP_NODEP);
            continue;
        }
        for (int i = 0; i < t.nchildren; i++)
            id = hc_sched_recv_reduce(s, t.children[i], acc, i == 0 ? in : acc, bytes, a->dtype,
                                      a->op, id, HC_STEP_NODEP);
        if (t.parent >= 0)
            sent[k % slots] = hc_sched_send(s, t.parent, acc, bytes, id, HC_STEP_NODEP);
    }
    if (t.parent < 0)
        hc_algo_avg_div(c, s, a->count);
    return HCOMM_SUCCESS;
}
