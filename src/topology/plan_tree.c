/* plan_tree.c - spanning trees: a binary tree across nodes over one leader rank
 * per node, and a chain through each node's ranks starting at its leader. The
 * double tree follows the NCCL idea: two in-order binary trees over the nodes
 * in which the interior positions of one are leaves of the other, so every
 * node forwards (sends to children) in at most one of the two trees. */
#include <stdlib.h>

#include "base/log.h"
#include "topology/plan.h"

/* Where each node's chain starts (an index into its node_ranks slice) and
 * which way it runs (+1 or -1); the start rank is the node's leader. */
typedef struct chain_spec {
    int *nparent; /* [nnodes]: parent node in the cross-node tree, -1 at the root */
    int *start;   /* [nnodes] */
    int  dir;
} chain_spec_t;

static int cluster_ok(const hc_cluster_t *c)
{
    return c && c->nranks > 0 && c->nnodes > 0 && c->nnodes <= c->nranks && c->node_first &&
           c->node_ranks && c->node_first[0] == 0 && c->node_first[c->nnodes] == c->nranks;
}

static int chain_rank(const hc_cluster_t *c, const chain_spec_t *sp, int n, int j)
{
    int first = c->node_first[n], s = c->node_first[n + 1] - first;
    return c->node_ranks[first + ((sp->start[n] + sp->dir * j) % s + s) % s];
}

static hcomm_status_t tree_alloc(hc_tree_t *t, int nranks)
{
    t->parent    = malloc((size_t)nranks * sizeof(int));
    t->nchildren = calloc((size_t)nranks, sizeof(int));
    t->children  = malloc((size_t)nranks * HC_TREE_MAX_CHILDREN * sizeof(int));
    if (!t->parent || !t->nchildren || !t->children) {
        hc_error(TOPO, "plan tree: out of memory for %d ranks", nranks);
        free(t->children);
        free(t->nchildren);
        free(t->parent);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int r = 0; r < nranks; r++)
        t->parent[r] = -1;
    for (int i = 0; i < nranks * HC_TREE_MAX_CHILDREN; i++)
        t->children[i] = -1;
    t->nranks = nranks;
    return HCOMM_SUCCESS;
}

static void tree_link(hc_tree_t *t, int parent, int child)
{
    t->parent[child]                                                    = parent;
    t->children[parent * HC_TREE_MAX_CHILDREN + t->nchildren[parent]++] = child;
}

/* Cross-node edges first, so a leader's first children are the remote ones:
 * they lead the deeper subtrees and the slower links. */
static hcomm_status_t tree_fill(const hc_cluster_t *c, const chain_spec_t *sp, hc_tree_t *out)
{
    hc_tree_t      t  = {0};
    hcomm_status_t st = tree_alloc(&t, c->nranks);
    if (st != HCOMM_SUCCESS)
        return st;
    t.root = -1;
    for (int n = 0; n < c->nnodes; n++) {
        if (sp->nparent[n] < 0)
            t.root = chain_rank(c, sp, n, 0);
        else
            tree_link(&t, chain_rank(c, sp, sp->nparent[n], 0), chain_rank(c, sp, n, 0));
    }
    for (int n = 0; n < c->nnodes; n++) {
        int s = c->node_first[n + 1] - c->node_first[n];
        for (int j = 1; j < s; j++)
            tree_link(&t, chain_rank(c, sp, n, j - 1), chain_rank(c, sp, n, j));
    }
    *out = t;
    return HCOMM_SUCCESS;
}

static hcomm_status_t spec_alloc(const hc_cluster_t *c, chain_spec_t *sp)
{
    sp->nparent = malloc((size_t)c->nnodes * sizeof(int));
    sp->start   = malloc((size_t)c->nnodes * sizeof(int));
    if (!sp->nparent || !sp->start) {
        hc_error(TOPO, "plan tree: out of memory for %d nodes", c->nnodes);
        free(sp->start);
        free(sp->nparent);
        return HCOMM_ERR_NO_MEMORY;
    }
    return HCOMM_SUCCESS;
}

static void spec_free(chain_spec_t *sp)
{
    free(sp->start);
    free(sp->nparent);
}

hcomm_status_t hc_plan_tree(const hc_cluster_t *c, int root, hc_tree_t *out)
{
    if (!cluster_ok(c) || !c->node_of || !out || root < 0 || root >= c->nranks) {
        hc_error(TOPO, "plan tree: invalid cluster or root %d", root);
        return HCOMM_ERR_INVALID_ARG;
    }
    int rn = c->node_of[root], nn = c->nnodes;
    if (rn < 0 || rn >= nn) {
        hc_error(TOPO, "plan tree: root %d on invalid node %d", root, rn);
        return HCOMM_ERR_INVALID_ARG;
    }
    chain_spec_t   sp = {.dir = 1};
    hcomm_status_t st = spec_alloc(c, &sp);
    if (st != HCOMM_SUCCESS)
        return st;
    /* Heap order over the nodes counted from the root's node: depth log2. */
    for (int n = 0; n < nn; n++) {
        int v         = (n - rn + nn) % nn;
        sp.nparent[n] = v == 0 ? -1 : ((v - 1) / 2 + rn) % nn;
        sp.start[n]   = 0;
    }
    sp.start[rn] = -1;
    for (int i = c->node_first[rn]; i < c->node_first[rn + 1]; i++)
        if (c->node_ranks[i] == root)
            sp.start[rn] = i - c->node_first[rn];
    if (sp.start[rn] < 0) {
        hc_error(TOPO, "plan tree: root %d missing from node %d's ranks", root, rn);
        st = HCOMM_ERR_INVALID_ARG;
        goto out_spec;
    }
    st = tree_fill(c, &sp, out);
out_spec:
    spec_free(&sp);
    return st;
}

/* In-order binary tree over positions 0..n-1 (1-based i = p + 1): odd i are
 * leaves, even i interior; the root is the highest power of two <= n. Parents
 * beyond n are skipped by climbing on. Returns the parent position, -1 at the
 * root. Depth is floor(log2 n). */
static int btree_parent(int p, int n)
{
    int i = p + 1, b = i & -i, root = 1;
    while (root * 2 <= n)
        root *= 2;
    if (i == root)
        return -1;
    do {
        i = (i & (b << 1)) ? i - b : i + b;
        b <<= 1;
    } while (i > n);
    return i - 1;
}

/* Tree 1 places node x at a position whose parity differs from tree 0's
 * (interior positions are odd): mirrored for even n, shifted by one for odd n
 * (where node 0 lands on the even position n - 1, a leaf in both). */
static int dtree_pos(int t, int x, int n)
{
    if (t == 0)
        return x;
    return n % 2 == 0 ? n - 1 - x : (x - 1 + n) % n;
}

static int dtree_node(int t, int p, int n)
{
    if (t == 0)
        return p;
    return n % 2 == 0 ? n - 1 - p : (p + 1) % n;
}

hcomm_status_t hc_plan_double_tree(const hc_cluster_t *c, hc_tree_t trees[2])
{
    if (!cluster_ok(c) || !trees) {
        hc_error(TOPO, "plan double tree: invalid cluster");
        return HCOMM_ERR_INVALID_ARG;
    }
    int            nn   = c->nnodes;
    chain_spec_t   sp   = {0};
    hc_tree_t      t[2] = {{0}, {0}};
    hcomm_status_t st   = spec_alloc(c, &sp);
    if (st != HCOMM_SUCCESS)
        return st;
    for (int k = 0; k < 2; k++) {
        for (int x = 0; x < nn; x++) {
            int pp        = btree_parent(dtree_pos(k, x, nn), nn);
            int s         = c->node_first[x + 1] - c->node_first[x];
            sp.nparent[x] = pp < 0 ? -1 : dtree_node(k, pp, nn);
            sp.start[x]   = k == 0 ? 0 : s - 1;
        }
        sp.dir = k == 0 ? 1 : -1;
        st     = tree_fill(c, &sp, &t[k]);
        if (st != HCOMM_SUCCESS)
            goto err_trees;
    }
    spec_free(&sp);
    trees[0] = t[0];
    trees[1] = t[1];
    return HCOMM_SUCCESS;

err_trees:
    hc_plan_tree_free(&t[0]);
    spec_free(&sp);
    return st;
}

void hc_plan_tree_free(hc_tree_t *t)
{
    if (!t)
        return;
    free(t->children);
    free(t->nchildren);
    free(t->parent);
    t->children  = NULL;
    t->nchildren = NULL;
    t->parent    = NULL;
    t->nranks    = 0;
    t->root      = -1;
}
