/* algo_hier.h - what the two files of the hierarchical builders share (private
 * to algorithms/): where the calling rank sits in an hc_hier_t. */
#ifndef HC_ALGO_HIER_H
#define HC_ALGO_HIER_H

#include "algorithms/algo_builders.h"
#include "topology/plan.h"

typedef struct hc_hier_geo {
    const hc_hier_t *h;
    int              nnodes, ppn_max; /* ppn_max: ranks on the largest node */
    int              node, local, p;  /* my node, my index in it, its ranks */
} hc_hier_geo_t;

static inline int hc_hier_node_size(const hc_hier_t *h, int n)
{
    return h->node_first[n + 1] - h->node_first[n];
}

static inline int hc_hier_rank(const hc_hier_t *h, int n, int l)
{
    return h->node_ranks[h->node_first[n] + l];
}

/* Rail l's rank on node n: local rank l, or l % size on a node with fewer ranks. */
static inline int hc_hier_rail_member(const hc_hier_t *h, int n, int l)
{
    return hc_hier_rank(h, n, l % hc_hier_node_size(h, n));
}

hcomm_status_t hc_algo_hier_broadcast(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo,
                                      hc_sched_t *s);
hcomm_status_t hc_algo_hier_reduce(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo, hc_sched_t *s);
hcomm_status_t hc_algo_hier_leader_allreduce(const hc_algo_ctx_t *c, const hc_hier_geo_t *geo,
                                             hc_sched_t *s);

#endif
