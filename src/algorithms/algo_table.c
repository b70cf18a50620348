/* algo_table.c - the one table of schedule builders: for every collective,
 * the algorithms that implement it, what each needs of the plans, and how the
 * cost model prices it. An algorithm either follows no plan (steps: it adds
 * its steps to a schedule for any rank count) or follows the communicator's
 * plans (planned: rings, trees, the node/rail hierarchy). A new algorithm is
 * one row here and its builder's file. */
#include <string.h>
#include <strings.h>

#include "algorithms/algo_builders.h"
#include "algorithms/algo_plan.h"
#include "algorithms/select.h"
#include "base/log.h"
#include "base/params.h"

/* A builder that follows the plans (plans may be NULL where needs is 0). */
typedef hcomm_status_t (*algo_planned_fn)(const hc_coll_args_t *args, const hc_plans_t *plans,
                                          int nranks, int rank, size_t chunk_bytes,
                                          hc_sched_t **sched_p);

enum {
    NEEDS_MODEL       = 1u << 0, /* a cluster model and its plans */
    NEEDS_EQUAL_NODES = 1u << 1, /* every node with as many ranks */
};

typedef struct algo_row {
    hc_algo_steps_fn steps;   /* follows no plan, or */
    algo_planned_fn  planned; /* follows the plans */
    unsigned         needs;   /* what the plans must offer (NEEDS_*) */
    hc_cost_algo_t   cost;    /* how the cost model prices it */
} algo_row_t;

static const char *const algo_names[HC_ALGO_COUNT] = {
    "auto", "ring", "rd", "chain", "pairwise", "direct", "dissem", "rabenseifner", "bruck",
    "tree", "hier", "leader"};

static const char *const coll_names[HC_COLL_COUNT] = {
    "allreduce", "broadcast", "reduce",  "allgather", "reduce_scatter",
    "alltoall",  "send",      "recv",    "barrier",   "alltoallv"};

/* ---- builders on the plans ---- */

/* The ring follows the plan's node-contiguous rings where they matter (across
 * nodes, or several rings; HCOMM_RING_ORDER=rank turns that off), rank order
 * otherwise. */
static hcomm_status_t ring_build(const hc_coll_args_t *a, const hc_plans_t *p, int nranks,
                                 int rank, size_t chunk, hc_sched_t **s)
{
    if (p != NULL && p->rings.order != NULL && (p->cluster->nnodes > 1 || p->rings.nrings > 1) &&
        strcmp(hc_params_get()->ring_order, "rank") != 0)
        return hc_algo_ring_ordered(a, p->rings.order, p->rings.nrings, nranks, rank, chunk, s);
    hc_algo_steps_fn steps = a->coll == HC_COLL_ALLREDUCE ? hc_algo_ring_allreduce
                             : a->coll == HC_COLL_ALLGATHER ? hc_algo_ring_allgather
                                                            : hc_algo_ring_reduce_scatter;
    return hc_algo_build_steps(a, steps, "ring", nranks, rank, chunk, s);
}

/* Allreduce over the double tree; broadcast and reduce over a tree rooted at
 * the call's root, planned per call (trees are cheap to plan). */
static hcomm_status_t tree_build(const hc_coll_args_t *a, const hc_plans_t *p, int nranks,
                                 int rank, size_t chunk, hc_sched_t **s)
{
    hc_tree_t t;
    (void)nranks;
    if (a->coll == HC_COLL_ALLREDUCE)
        return hc_algo_double_tree(a, p->trees, rank, chunk, s);
    hcomm_status_t st = hc_plan_tree(p->cluster, a->root, &t);
    if (st == HCOMM_SUCCESS) {
        st = hc_algo_tree(a, &t, rank, chunk, s);
        hc_plan_tree_free(&t);
    }
    return st;
}

static hcomm_status_t hier_build(const hc_coll_args_t *a, const hc_plans_t *p, int nranks,
                                 int rank, size_t chunk, hc_sched_t **s)
{
    (void)nranks;
    if (a->coll == HC_COLL_ALLTOALL)
        return hc_algo_hier_alltoall(a, &p->hier, rank, chunk, s);
    return hc_algo_hier(a, &p->hier, rank, chunk, s);
}

static hcomm_status_t leader_build(const hc_coll_args_t *a, const hc_plans_t *p, int nranks,
                                   int rank, size_t chunk, hc_sched_t **s)
{
    (void)nranks;
    return hc_algo_hier_leader(a, &p->hier, rank, chunk, s);
}

/* ---- the table ---- */

#define UNPRICED .cost = HC_COST_NONE
#define ON_PLANS(fn) .planned = fn, .needs = NEEDS_MODEL

static const algo_row_t algo_rows[HC_COLL_COUNT][HC_ALGO_COUNT] = {
    [HC_COLL_ALLREDUCE] = {
        [HC_ALGO_RING]         = {.planned = ring_build, .cost = HC_COST_RING},
        [HC_ALGO_RD]           = {.steps = hc_algo_rd_allreduce, .cost = HC_COST_RD},
        [HC_ALGO_RABENSEIFNER] = {.steps = hc_algo_rabenseifner_allreduce,
                                  .cost = HC_COST_RABENSEIFNER},
        [HC_ALGO_TREE]         = {ON_PLANS(tree_build), .cost = HC_COST_TREE},
        [HC_ALGO_HIER]         = {ON_PLANS(hier_build), .cost = HC_COST_HIER},
        [HC_ALGO_LEADER]       = {ON_PLANS(leader_build), .cost = HC_COST_LEADER},
    },
    [HC_COLL_BROADCAST] = {
        [HC_ALGO_CHAIN] = {.steps = hc_algo_chain_broadcast, UNPRICED},
        [HC_ALGO_TREE]  = {ON_PLANS(tree_build), UNPRICED},
        [HC_ALGO_HIER]  = {ON_PLANS(hier_build), UNPRICED},
    },
    [HC_COLL_REDUCE] = {
        [HC_ALGO_CHAIN] = {.steps = hc_algo_chain_reduce, UNPRICED},
        [HC_ALGO_TREE]  = {ON_PLANS(tree_build), UNPRICED},
        [HC_ALGO_HIER]  = {ON_PLANS(hier_build), UNPRICED},
    },
    [HC_COLL_ALLGATHER] = {
        [HC_ALGO_RING]  = {.planned = ring_build, UNPRICED},
        [HC_ALGO_BRUCK] = {.steps = hc_algo_bruck_allgather, UNPRICED},
        [HC_ALGO_HIER]  = {ON_PLANS(hier_build), UNPRICED},
    },
    [HC_COLL_REDUCE_SCATTER] = {
        [HC_ALGO_RING] = {.planned = ring_build, UNPRICED},
        [HC_ALGO_HIER] = {ON_PLANS(hier_build), UNPRICED},
    },
    [HC_COLL_ALLTOALL] = {
        [HC_ALGO_PAIRWISE] = {.steps = hc_algo_pairwise_alltoall, .cost = HC_COST_A2A_PAIRWISE},
        [HC_ALGO_HIER]     = {.planned = hier_build, .needs = NEEDS_MODEL | NEEDS_EQUAL_NODES,
                              .cost = HC_COST_A2A_HIER},
    },
    [HC_COLL_SEND]      = {[HC_ALGO_DIRECT] = {.steps = hc_algo_direct_send, UNPRICED}},
    [HC_COLL_RECV]      = {[HC_ALGO_DIRECT] = {.steps = hc_algo_direct_recv, UNPRICED}},
    [HC_COLL_BARRIER]   = {[HC_ALGO_DISSEM] = {.steps = hc_algo_dissem_barrier, UNPRICED}},
    [HC_COLL_ALLTOALLV] = {[HC_ALGO_PAIRWISE] = {.steps = hc_algo_pairwise_alltoallv, UNPRICED}},
};

static const algo_row_t *algo_row(hc_coll_t coll, hc_algo_t algo)
{
    if ((unsigned)coll >= HC_COLL_COUNT || (unsigned)algo >= HC_ALGO_COUNT)
        return NULL;
    const algo_row_t *r = &algo_rows[coll][algo];
    return r->steps != NULL || r->planned != NULL ? r : NULL;
}

/* What plans lack of needs: NULL when they offer all of it. */
static const char *plans_lack(unsigned needs, const hc_plans_t *p)
{
    if ((needs & NEEDS_MODEL) && (p == NULL || p->cluster == NULL))
        return "a cluster model and plans";
    if ((needs & NEEDS_EQUAL_NODES) && !hc_cluster_nodes_equal(p->cluster))
        return "nodes of equal size";
    return NULL;
}

int hc_algo_implements(hc_coll_t coll, hc_algo_t algo)
{
    return algo_row(coll, algo) != NULL;
}

int hc_algo_serves(hc_coll_t coll, hc_algo_t algo, const hc_plans_t *plans)
{
    const algo_row_t *r = algo_row(coll, algo);
    return r != NULL && plans_lack(r->needs, plans) == NULL;
}

hc_cost_algo_t hc_algo_cost(hc_coll_t coll, hc_algo_t algo)
{
    const algo_row_t *r = algo_row(coll, algo);
    return r != NULL ? r->cost : HC_COST_NONE;
}

hcomm_status_t hc_algo_build(const hc_coll_args_t *args, hc_algo_t algo, const hc_plans_t *plans,
                             int nranks, int rank, size_t chunk_bytes, hc_sched_t **sched_p)
{
    if (args == NULL || sched_p == NULL) {
        hc_error(ALGO, "building a schedule: NULL argument");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (plans != NULL && plans->cluster != NULL && plans->cluster->nranks != nranks) {
        hc_error(ALGO, "building for %d ranks on plans of %d", nranks, plans->cluster->nranks);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (algo == HC_ALGO_AUTO) {
        hc_select_ctx_t sc = {.nranks = nranks, .plans = plans};
        algo               = hc_select(&sc, args).algo;
    }
    const algo_row_t *r = algo_row(args->coll, algo);
    if (r == NULL) {
        hc_error(ALGO, "algorithm %s does not implement %s", hc_algo_name(algo),
                 hc_coll_name(args->coll));
        return HCOMM_ERR_UNSUPPORTED;
    }
    const char *lack = plans_lack(r->needs, plans);
    if (lack != NULL) {
        hc_error(ALGO, "%s/%s needs %s", hc_coll_name(args->coll), hc_algo_name(algo), lack);
        return HCOMM_ERR_UNSUPPORTED;
    }
    hcomm_status_t st = r->planned != NULL
                            ? r->planned(args, plans, nranks, rank, chunk_bytes, sched_p)
                            : hc_algo_build_steps(args, r->steps, algo_names[algo], nranks, rank,
                                                  chunk_bytes, sched_p);
    if (st == HCOMM_SUCCESS) { /* what the operation records name */
        hc_sched_t *sc = *sched_p;
        sc->algo       = (uint8_t)algo;
        sc->coll       = (uint8_t)args->coll;
        sc->dtype      = (uint8_t)args->dtype;
        sc->op         = (uint8_t)args->op;
        sc->peer       = args->coll == HC_COLL_SEND || args->coll == HC_COLL_RECV ||
                           args->coll == HC_COLL_BROADCAST || args->coll == HC_COLL_REDUCE
                             ? args->root
                             : -1;
        sc->count      = args->count;
        sc->bytes      = args->count * hcomm_dtype_size(args->dtype);
    }
    return st;
}

/* ---- names ---- */

const char *hc_algo_name(hc_algo_t algo)
{
    return (unsigned)algo < HC_ALGO_COUNT ? algo_names[algo] : "unknown";
}

const char *hc_coll_name(hc_coll_t coll)
{
    return (unsigned)coll < HC_COLL_COUNT ? coll_names[coll] : "unknown";
}

/* The index of p[0..len) (blanks around it ignored, case too) in names, or n. */
static int name_index(const char *const *names, int n, const char *p, size_t len)
{
    while (len != 0 && (*p == ' ' || *p == '\t'))
        p++, len--;
    while (len != 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
        len--;
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncasecmp(p, names[i], len) == 0)
            return i;
    return n;
}

hc_algo_t hc_algo_parse_n(const char *name, size_t len)
{
    return (hc_algo_t)name_index(algo_names, HC_ALGO_COUNT, name, len);
}

hc_coll_t hc_coll_parse_n(const char *name, size_t len)
{
    return (hc_coll_t)name_index(coll_names, HC_COLL_COUNT, name, len);
}

hc_algo_t hc_algo_parse(const char *name)
{
    return name == NULL ? HC_ALGO_COUNT : hc_algo_parse_n(name, strlen(name));
}
