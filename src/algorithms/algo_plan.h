/* algo_plan.h - schedule builders that follow a plan from src/topology/:
 * ordered rings, trees, double trees and the node/rail hierarchy. Same rules
 * as algo.h: counts in args, buffers HC_BUF_SEND/RECV/TMP, chunks of at most
 * chunk_bytes, and every rank's sends to p match p's receives in order. */
#ifndef HC_ALGO_PLAN_H
#define HC_ALGO_PLAN_H

#include "algorithms/algo.h"
#include "topology/plan.h"

/* Ring allreduce, allgather or reduce_scatter along order[0..nranks-1] (the
 * position of a rank in the ring is where it appears in order). Results are
 * laid out by rank, as the public API defines them, whatever the order.
 * Allreduce splits the buffer over nrings rings, ring q along
 * order[q * nranks ...]; the others use the first ring only. */
hcomm_status_t hc_algo_ring_ordered(const hc_coll_args_t *args, const int *order, int nrings,
                                    int nranks, int rank, size_t chunk_bytes,
                                    hc_sched_t **sched_p);

/* Pipelined tree: reduce (to tree->root, which must be args->root), broadcast
 * (from tree->root == args->root) or allreduce (reduce up then broadcast down,
 * chunk by chunk). */
hcomm_status_t hc_algo_tree(const hc_coll_args_t *args, const hc_tree_t *tree, int rank,
                            size_t chunk_bytes, hc_sched_t **sched_p);

/* Allreduce over two trees, each carrying half of the buffer. */
hcomm_status_t hc_algo_double_tree(const hc_coll_args_t *args, const hc_tree_t trees[2], int rank,
                                   size_t chunk_bytes, hc_sched_t **sched_p);

/* Hierarchical collectives on h: allreduce (intra-node reduce-scatter,
 * inter-node allreduce of each rank's block along its rail, intra-node
 * allgather), broadcast, reduce, allgather and reduce_scatter. */
hcomm_status_t hc_algo_hier(const hc_coll_args_t *args, const hc_hier_t *h, int rank,
                            size_t chunk_bytes, hc_sched_t **sched_p);

/* Allreduce through the nodes' leaders (the first rank of each node group of
 * h): binomial reduce inside each node, recursive doubling among the leaders,
 * binomial broadcast. For small messages across nodes. */
hcomm_status_t hc_algo_hier_leader(const hc_coll_args_t *args, const hc_hier_t *h, int rank,
                                   size_t chunk_bytes, hc_sched_t **sched_p);

/* Hierarchical alltoall on h: gather per node pair, one message per node pair
 * across nodes, scatter. HCOMM_ERR_UNSUPPORTED (no error logged) when the
 * nodes have different rank counts (selection never asks for it then). */
hcomm_status_t hc_algo_hier_alltoall(const hc_coll_args_t *args, const hc_hier_t *h, int rank,
                                     size_t chunk_bytes, hc_sched_t **sched_p);

#endif
