/* plan.h - communication plans built from the cluster model: rings in
 * node-contiguous order, double binary trees across nodes with chains inside
 * nodes, and the hierarchy of node groups and rail groups. Plans are data that
 * the schedule builders in src/algorithms/ consume. */
#ifndef HC_PLAN_H
#define HC_PLAN_H

#include "topology/topo.h"

/* nrings rings; ring k visits order[k * nranks + 0 .. nranks - 1]. Every ring
 * keeps each node's ranks contiguous, so it crosses each node boundary once. */
typedef struct hc_rings {
    int  nrings, nranks;
    int *order;
} hc_rings_t;

/* A spanning tree over all ranks: parent (-1 at the root) and up to two
 * children per rank. */
#define HC_TREE_MAX_CHILDREN 3
typedef struct hc_tree {
    int  nranks, root;
    int *parent;                    /* [nranks] */
    int *nchildren;                 /* [nranks] */
    int *children;                  /* [nranks * HC_TREE_MAX_CHILDREN] */
} hc_tree_t;

/* Node groups (ranks of one node) and rail groups (ranks with the same local
 * rank on every node), for hierarchical algorithms. */
typedef struct hc_hier {
    int  nnodes, ppn_max;
    int *node_first, *node_ranks;   /* as in hc_cluster_t */
    int *rail_first, *rail_ranks;   /* rail l's ranks: rail_ranks[rail_first[l] ..] in node order */
    int  nrails;
} hc_hier_t;

hcomm_status_t hc_plan_rings(const hc_cluster_t *c, int nrings, hc_rings_t *out);
void           hc_plan_rings_free(hc_rings_t *r);

/* Two trees: across nodes a double binary tree over the node leaders (each node
 * interior in at most one of the two), inside each node a chain from its
 * leader. trees[1] uses a different leader per node where a node has > 1 rank. */
hcomm_status_t hc_plan_double_tree(const hc_cluster_t *c, hc_tree_t trees[2]);
/* One tree rooted at root: binary tree across nodes, chains inside nodes. */
hcomm_status_t hc_plan_tree(const hc_cluster_t *c, int root, hc_tree_t *out);
void           hc_plan_tree_free(hc_tree_t *t);

hcomm_status_t hc_plan_hier(const hc_cluster_t *c, hc_hier_t *out);
void           hc_plan_hier_free(hc_hier_t *h);

/* A cluster model and every plan built on it: what a communicator (or
 * hcomm-topo) holds, and what selection and the schedule builders read. */
typedef struct hc_plans {
    hc_cluster_t *cluster;
    hc_rings_t    rings;
    hc_tree_t     trees[2]; /* the double tree */
    hc_hier_t     hier;
} hc_plans_t;

/* Plans nrings rings, the double tree and the hierarchy on cluster, which *out
 * takes over (and frees, also when planning fails). */
hcomm_status_t hc_plans_build(hc_cluster_t *cluster, int nrings, hc_plans_t *out);
void           hc_plans_free(hc_plans_t *p);

#endif
