/* algo.h - the collectives, their algorithms, and building one rank's
 * schedule with one of them. algo_table.c holds the one table of builders,
 * plan-based ones included; select.h chooses among them. Builders see counts,
 * ranks, plans and the schedule API: never a transport. */
#ifndef HC_ALGO_H
#define HC_ALGO_H

#include "algorithms/sched.h"
#include "topology/cost.h"
#include "topology/plan.h"

typedef enum {
    HC_COLL_ALLREDUCE = 0,
    HC_COLL_BROADCAST,
    HC_COLL_REDUCE,
    HC_COLL_ALLGATHER,
    HC_COLL_REDUCE_SCATTER,
    HC_COLL_ALLTOALL,
    HC_COLL_SEND,
    HC_COLL_RECV,
    HC_COLL_BARRIER,
    HC_COLL_ALLTOALLV,
    HC_COLL_COUNT
} hc_coll_t;

typedef enum {
    HC_ALGO_AUTO = 0,
    HC_ALGO_RING,         /* allreduce (reduce-scatter + allgather), allgather, reduce_scatter */
    HC_ALGO_RD,           /* recursive doubling allreduce (small messages) */
    HC_ALGO_CHAIN,        /* pipelined chain broadcast and reduce */
    HC_ALGO_PAIRWISE,     /* pairwise-exchange alltoall */
    HC_ALGO_DIRECT,       /* send / recv: one step */
    HC_ALGO_DISSEM,       /* dissemination barrier */
    HC_ALGO_RABENSEIFNER, /* reduce-scatter by recursive halving + allgather by doubling */
    HC_ALGO_BRUCK,        /* Bruck allgather: ceil(log2 n) rounds, any rank count */
    HC_ALGO_TREE,         /* on the plans: double tree allreduce, tree broadcast and reduce */
    HC_ALGO_HIER,         /* on the plans: node groups then rails; alltoall per node pair */
    HC_ALGO_LEADER,       /* on the plans: allreduce through one leader per node */
    HC_ALGO_COUNT
} hc_algo_t;

/* What a schedule depends on (also the schedule cache key). */
typedef struct hc_coll_args {
    hc_coll_t     coll;
    size_t        count;    /* elements: per rank block for allgather/reduce_scatter/alltoall */
    hcomm_dtype_t dtype;
    hcomm_op_t    op;       /* reductions only */
    int           root;     /* broadcast/reduce root; send/recv peer */
    int           in_place; /* nonzero when the caller passed in-place buffers */
    /* alltoallv: sendcounts, sdispls, recvcounts, rdispls, nranks elements each
     * (elements of dtype); read while building, never cached */
    const size_t *v;
} hc_coll_args_t;

/* Whether algo implements coll at all: it has a row in the table. */
int hc_algo_implements(hc_coll_t coll, hc_algo_t algo);

/* Whether algo can build coll on plans (NULL: none): it implements coll and
 * the plans offer what it follows (a cluster model; nodes of equal size for
 * the hierarchical alltoall). Selection never chooses one that cannot. */
int hc_algo_serves(hc_coll_t coll, hc_algo_t algo, const hc_plans_t *plans);

/* How the cost model prices algo for coll, or HC_COST_NONE. */
hc_cost_algo_t hc_algo_cost(hc_coll_t coll, hc_algo_t algo);

/*
 * Builds rank's schedule for nranks ranks (plans: the communicator's, whose
 * model must have nranks ranks; NULL: none, then only algorithms that follow
 * no plan build). Buffer sizes the executor provides: HC_BUF_SEND / HC_BUF_RECV
 * as the public API defines them for the collective, HC_BUF_TMP of
 * sched->tmp_bytes. Chunks are at most chunk_bytes (0: one chunk). algo
 * HC_ALGO_AUTO builds selection's choice. HCOMM_ERR_UNSUPPORTED (logged) for
 * an algorithm that does not serve args->coll on plans.
 */
hcomm_status_t hc_algo_build(const hc_coll_args_t *args, hc_algo_t algo, const hc_plans_t *plans,
                             int nranks, int rank, size_t chunk_bytes, hc_sched_t **sched_p);

const char *hc_algo_name(hc_algo_t algo);
const char *hc_coll_name(hc_coll_t coll);
/* Parse "ring", "allreduce" etc. (case ignored); HC_ALGO_COUNT / HC_COLL_COUNT
 * when unknown. */
hc_algo_t hc_algo_parse(const char *name);
hc_algo_t hc_algo_parse_n(const char *name, size_t len);
hc_coll_t hc_coll_parse_n(const char *name, size_t len);

#endif
