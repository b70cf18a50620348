/* comm_select.c - which algorithm serves a collective on a communicator
 * (HCOMM_ALGO, the tuning file, the size rule inside a node, the cost model
 * across nodes) and building its schedule on the communicator's plans. */
#include <string.h>

#include "algorithms/algo_plan.h"
#include "core/comm.h"
#include "base/log.h"
#include "core/tuning.h"
#include "topology/cost.h"

static const hc_algo_t cost_to_algo[HC_COST_ALGO_COUNT] = {
    [HC_COST_RING] = HC_ALGO_RING, [HC_COST_RD] = HC_ALGO_RD,
    [HC_COST_RABENSEIFNER] = HC_ALGO_RABENSEIFNER, [HC_COST_TREE] = HC_ALGO_TREE,
    [HC_COST_HIER] = HC_ALGO_HIER, [HC_COST_LEADER] = HC_ALGO_LEADER};

hc_algo_t hc_comm_algo_of_cost(int cost_algo)
{
    return (unsigned)cost_algo < HC_COST_ALGO_COUNT ? cost_to_algo[cost_algo] : HC_ALGO_AUTO;
}

/* HCOMM_ALGO first, then the tuning file; inside one node the measured size
 * rule; across nodes the cost model picks the allreduce algorithm. */
hc_algo_t hc_comm_select(hcomm_comm_t comm, const hc_coll_args_t *args, const hc_params_t *p,
                         size_t *chunk)
{
    hc_algo_t forced = comm->cal_algo != HC_ALGO_AUTO ? comm->cal_algo : hc_algo_forced(args, p);
    hc_algo_t tuned;
    size_t    tchunk;
    *chunk = p->chunk_bytes;
    if (forced == HC_ALGO_HIER && args->coll == HC_COLL_ALLTOALL &&
        (comm->cluster == NULL || !hc_cluster_nodes_equal(comm->cluster))) {
        hc_info(ALGO, "alltoall:hier needs nodes of equal size; pairwise instead");
        return HC_ALGO_PAIRWISE;
    }
    if (forced != HC_ALGO_AUTO)
        return forced;
    size_t bytes = args->count * hcomm_dtype_size(args->dtype);
    if (hc_tuning_lookup(args->coll, comm->nranks, bytes, &tuned, &tchunk) == 0) {
        *chunk = tchunk != 0 ? tchunk : p->chunk_bytes;
        return tuned;
    }
    if (comm->cluster != NULL && comm->cluster->nnodes > 1 && args->coll == HC_COLL_ALLTOALL)
        return hc_cost_alltoall_us(comm->cluster, 1, bytes) <
                       hc_cost_alltoall_us(comm->cluster, 0, bytes)
                   ? HC_ALGO_HIER
                   : HC_ALGO_PAIRWISE;
    if (comm->cluster == NULL || comm->cluster->nnodes < 2 || args->coll != HC_COLL_ALLREDUCE)
        return hc_algo_select(args, comm->nranks, p);
    int    best = HC_COST_RING;
    double t[HC_COST_ALGO_COUNT];
    for (int a = 0; a < HC_COST_ALGO_COUNT; a++) {
        t[a] = hc_cost_allreduce_us(comm->cluster, (hc_cost_algo_t)a, bytes, p->chunk_bytes);
        if (t[a] < t[best])
            best = a;
    }
    hc_debug(ALGO, "allreduce of %zu bytes, predicted us: ring %.1f rd %.1f rabenseifner %.1f "
             "tree %.1f hier %.1f leader %.1f", bytes, t[HC_COST_RING], t[HC_COST_RD],
             t[HC_COST_RABENSEIFNER], t[HC_COST_TREE], t[HC_COST_HIER], t[HC_COST_LEADER]);
    return cost_to_algo[best];
}

/* Builds with the communicator's plans where the algorithm follows one. */
hcomm_status_t hc_comm_build(hcomm_comm_t comm, const hc_coll_args_t *args, hc_algo_t algo,
                             size_t chunk, hc_sched_t **s)
{
    int multi = comm->cluster != NULL && comm->cluster->nnodes > 1;
    int ringy = args->coll == HC_COLL_ALLREDUCE || args->coll == HC_COLL_ALLGATHER ||
                args->coll == HC_COLL_REDUCE_SCATTER;

    if (algo == HC_ALGO_HIER && args->coll == HC_COLL_ALLTOALL)
        return hc_algo_hier_alltoall(args, &comm->hier, comm->rank, chunk, s);
    if (algo == HC_ALGO_HIER)
        return hc_algo_hier(args, &comm->hier, comm->rank, chunk, s);
    if (algo == HC_ALGO_LEADER)
        return hc_algo_hier_leader(args, &comm->hier, comm->rank, chunk, s);
    if (algo == HC_ALGO_TREE && args->coll == HC_COLL_ALLREDUCE)
        return hc_algo_double_tree(args, comm->trees, comm->rank, chunk, s);
    if (algo == HC_ALGO_TREE) {
        hc_tree_t      t;
        hcomm_status_t st = hc_plan_tree(comm->cluster, args->root, &t);
        if (st == HCOMM_SUCCESS) {
            st = hc_algo_tree(args, &t, comm->rank, chunk, s);
            hc_plan_tree_free(&t);
        }
        return st;
    }
    /* node-contiguous rings: each node boundary crossed once per ring; on one
     * node the plan's rings only matter when there are several */
    if (algo == HC_ALGO_RING && ringy && (multi || comm->rings.nrings > 1) &&
        comm->rings.order != NULL && strcmp(hc_params_get()->ring_order, "rank") != 0)
        return hc_algo_ring_ordered(args, comm->rings.order, comm->rings.nrings, comm->nranks,
                                    comm->rank, chunk, s);
    return hc_algo_build(args, algo, comm->nranks, comm->rank, chunk, s);
}
