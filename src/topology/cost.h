/* cost.h - the alpha-beta-gamma cost model: predicted time of a collective
 * algorithm on a cluster model, per message size. Selection and hcomm-topo
 * read it; calibration (a measurement at init, or a topology file) only
 * changes the link costs in hc_cluster_t. */
#ifndef HC_COST_H
#define HC_COST_H

#include "topology/topo.h"

typedef enum {
    HC_COST_RING = 0,     /* ring in node-contiguous order */
    HC_COST_RD,           /* recursive doubling */
    HC_COST_RABENSEIFNER, /* recursive halving + doubling */
    HC_COST_TREE,         /* pipelined double binary tree */
    HC_COST_HIER,         /* intra-node reduce-scatter, rails, intra-node allgather */
    HC_COST_LEADER,       /* reduce to node leaders, rd among them, broadcast */
    HC_COST_A2A_PAIRWISE, /* alltoall: pairwise exchange */
    HC_COST_A2A_HIER,     /* alltoall: gather per node pair, one message per node pair */
    HC_COST_ALGO_COUNT,
    HC_COST_NONE = -1     /* an algorithm the model does not price */
} hc_cost_algo_t;

const char *hc_cost_algo_name(hc_cost_algo_t a);

/* Predicted allreduce time in microseconds of bytes on c with algo, pipelined
 * in chunks of chunk_bytes where the algorithm pipelines. */
double hc_cost_allreduce_us(const hc_cluster_t *c, hc_cost_algo_t algo, size_t bytes,
                            size_t chunk_bytes);

/* Predicted time in microseconds of algo on bytes: the allreduce's buffer, or
 * an alltoall's bytes per pair of ranks (HC_COST_A2A_*). */
double hc_cost_us(const hc_cluster_t *c, hc_cost_algo_t algo, size_t bytes, size_t chunk_bytes);

/* Predicted alltoall time in microseconds with bytes_per_peer bytes per pair of
 * ranks: pairwise exchange (hier 0) or hierarchical (hier 1: gather per node
 * pair, one message per node pair across the network, scatter). Nodes are
 * taken as equal, c->nranks / c->nnodes ranks each. */
double hc_cost_alltoall_us(const hc_cluster_t *c, int hier, size_t bytes_per_peer);

#endif
