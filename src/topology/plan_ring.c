/* plan_ring.c - rings in node-contiguous order. Every ring visits the nodes in
 * index order and each node's ranks back to back, so it crosses every node
 * boundary exactly once. Rings differ in the order inside each node: ring k
 * leaves a node of s ranks through local rank (k - 1) mod s for k < s, so the
 * ranks (and rails) carrying cross-node traffic differ between rings, and odd
 * rings run the node's internal links opposite to even ones. */
#include <stdlib.h>

#include "base/log.h"
#include "topology/plan.h"

/* More rings than this buys nothing: each needs its own channel of buffers. */
#define HC_PLAN_RINGS_MAX 64

static int cluster_ok(const hc_cluster_t *c)
{
    return c && c->nranks > 0 && c->nnodes > 0 && c->nnodes <= c->nranks && c->node_first &&
           c->node_ranks && c->node_first[0] == 0 && c->node_first[c->nnodes] == c->nranks;
}

static int max_node_size(const hc_cluster_t *c)
{
    int m = 0;
    for (int n = 0; n < c->nnodes; n++) {
        int s = c->node_first[n + 1] - c->node_first[n];
        if (s > m)
            m = s;
    }
    return m;
}

/* Distinct rings a node of s ranks allows: s rotations in two directions,
 * fewer for s <= 2 where a rotation equals a reversal. */
static int distinct_rings(int s)
{
    return s <= 2 ? s : 2 * s;
}

/* Ring k inside a node of s ranks, position j -> local index. Even rings run
 * forward, odd ones backward, each direction leaving through every local rank
 * once over k < 2s: the exit is k - 1 (plus one from k = s on when s is even,
 * where k and k + s have the same parity). */
static int ring_local(int k, int s, int j)
{
    int e = (k - 1 + (k >= s && s % 2 == 0)) % s;
    if (e < 0)
        e += s;
    if (k % 2 == 0)
        return (e + 1 + j) % s;
    return ((e - 1 - j) % s + s) % s;
}

hcomm_status_t hc_plan_rings(const hc_cluster_t *c, int nrings, hc_rings_t *out)
{
    if (!cluster_ok(c) || nrings < 1 || !out) {
        hc_error(TOPO, "plan rings: invalid cluster or nrings %d", nrings);
        return HCOMM_ERR_INVALID_ARG;
    }
    int maxr = distinct_rings(max_node_size(c));
    if (nrings > maxr)
        nrings = maxr;
    if (nrings > HC_PLAN_RINGS_MAX)
        nrings = HC_PLAN_RINGS_MAX;

    int *order = malloc((size_t)nrings * (size_t)c->nranks * sizeof(*order));
    if (!order) {
        hc_error(TOPO, "plan rings: out of memory for %d x %d ranks", nrings, c->nranks);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int k = 0; k < nrings; k++) {
        int *o   = order + (size_t)k * (size_t)c->nranks;
        int  pos = 0;
        for (int n = 0; n < c->nnodes; n++) {
            int first = c->node_first[n], s = c->node_first[n + 1] - first;
            for (int j = 0; j < s; j++)
                o[pos++] = c->node_ranks[first + ring_local(k, s, j)];
        }
    }
    out->nrings = nrings;
    out->nranks = c->nranks;
    out->order  = order;
    return HCOMM_SUCCESS;
}

void hc_plan_rings_free(hc_rings_t *r)
{
    if (!r)
        return;
    free(r->order);
    r->order  = NULL;
    r->nrings = 0;
    r->nranks = 0;
}
