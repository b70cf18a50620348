/* algo.h - schedule builders for each collective, and the selection among them.
 * Builders see only counts, ranks and the schedule API: never a transport. */
#ifndef HC_ALGO_H
#define HC_ALGO_H

#include "algorithms/sched.h"
#include "base/params.h"

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
    HC_ALGO_TREE,         /* plan-based (algo_plan.h): double tree allreduce, tree bcast/reduce */
    HC_ALGO_HIER,         /* plan-based: node groups then rails (algo_plan.h) */
    HC_ALGO_LEADER,       /* plan-based allreduce: through one leader per node (algo_plan.h) */
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

/*
 * Builds rank's schedule for nranks ranks. Buffer sizes the executor provides:
 * HC_BUF_SEND / HC_BUF_RECV as the public API defines them for the collective,
 * HC_BUF_TMP of sched->tmp_bytes. Chunks are at most chunk_bytes (pipelining).
 * Returns HCOMM_ERR_UNSUPPORTED for an algorithm that does not implement coll.
 */
hcomm_status_t hc_algo_build(const hc_coll_args_t *args, hc_algo_t algo, int nranks, int rank,
                             size_t chunk_bytes, hc_sched_t **sched_p);

/* The algorithm for args: HCOMM_ALGO when it names one for this collective,
 * else by size (allreduce: recursive doubling up to allreduce_rd_max bytes, then on
 * 4, 8, 16... ranks Rabenseifner up to allreduce_rab_max, then the ring). */
hc_algo_t hc_algo_select(const hc_coll_args_t *args, int nranks, const hc_params_t *params);

/* The algorithm HCOMM_ALGO forces for args, or HC_ALGO_AUTO. */
hc_algo_t hc_algo_forced(const hc_coll_args_t *args, const hc_params_t *params);

/* Nonzero when algo needs a plan (tree, hier): built by the communicator with
 * algo_plan.h, not by hc_algo_build. */
int hc_algo_needs_plan(hc_coll_t coll, hc_algo_t algo);

const char *hc_algo_name(hc_algo_t algo);
const char *hc_coll_name(hc_coll_t coll);
/* Parses "ring" etc.; HC_ALGO_COUNT when unknown. */
hc_algo_t hc_algo_parse(const char *name);

#endif
