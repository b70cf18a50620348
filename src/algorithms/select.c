/* select.c - the selection pipeline (its stages are listed in select.h). */
#include "algorithms/select.h"

#include <math.h>
#include <stdatomic.h>

#include "base/log.h"

static const char *const chosen_names[HC_CHOSEN_COUNT] = {
    "timing", "forced", "tuned", "calibrated", "modelled", "rule"};

const char *hc_chosen_by_name(hc_chosen_by_t by)
{
    return (unsigned)by < HC_CHOSEN_COUNT ? chosen_names[by] : "unknown";
}

/* The algorithm of each collective that has one (allreduce chooses by size). */
static const hc_algo_t rule_default[HC_COLL_COUNT] = {
    [HC_COLL_ALLREDUCE] = HC_ALGO_RING,      [HC_COLL_BROADCAST] = HC_ALGO_CHAIN,
    [HC_COLL_REDUCE] = HC_ALGO_CHAIN,        [HC_COLL_ALLGATHER] = HC_ALGO_RING,
    [HC_COLL_REDUCE_SCATTER] = HC_ALGO_RING, [HC_COLL_ALLTOALL] = HC_ALGO_PAIRWISE,
    [HC_COLL_SEND] = HC_ALGO_DIRECT,         [HC_COLL_RECV] = HC_ALGO_DIRECT,
    [HC_COLL_BARRIER] = HC_ALGO_DISSEM,      [HC_COLL_ALLTOALLV] = HC_ALGO_PAIRWISE,
};

/* Stage 5: allreduce by size as measured on one node (recursive doubling up
 * to allreduce_rd_max bytes, then on 4, 8, 16... ranks Rabenseifner up to
 * allreduce_rab_max, then the ring); the one algorithm of the others. */
static hc_algo_t select_rule(const hc_select_ctx_t *sc, const hc_coll_args_t *a, size_t bytes)
{
    const hc_params_t *p = sc->params;
    int                n = sc->nranks;
    if (a->coll != HC_COLL_ALLREDUCE)
        return rule_default[a->coll];
    if (bytes <= p->allreduce_rd_max)
        return HC_ALGO_RD;
    if (n >= 4 && (n & (n - 1)) == 0 && bytes <= p->allreduce_rab_max)
        return HC_ALGO_RABENSEIFNER;
    return HC_ALGO_RING;
}

/* Stage 4: the cheapest algorithm the cost model prices that the plans serve;
 * HC_ALGO_AUTO when it prices none (or the ranks share one node, where the
 * measured rule is better than the model). */
static hc_algo_t select_model(const hc_select_ctx_t *sc, const hc_coll_args_t *a, size_t bytes)
{
    const hc_cluster_t *cl   = sc->plans != NULL ? sc->plans->cluster : NULL;
    hc_algo_t           best = HC_ALGO_AUTO;
    double              best_us = INFINITY;
    if (cl == NULL || cl->nnodes < 2)
        return HC_ALGO_AUTO;
    for (int al = 1; al < HC_ALGO_COUNT; al++) {
        hc_cost_algo_t cost = hc_algo_cost(a->coll, (hc_algo_t)al);
        if (cost == HC_COST_NONE || !hc_algo_serves(a->coll, (hc_algo_t)al, sc->plans))
            continue;
        double us = hc_cost_us(cl, cost, bytes, sc->params->chunk_bytes);
        hc_debug(ALGO, "%s of %zu bytes: %s predicted %.1f us", hc_coll_name(a->coll), bytes,
                 hc_algo_name((hc_algo_t)al), us);
        if (us < best_us)
            best = (hc_algo_t)al, best_us = us;
    }
    return best;
}

/* An algorithm HCOMM_ALGO or the tuning file names that these plans cannot
 * serve: said once, then selection goes on without it. */
static void select_pass_over(const char *who, const hc_coll_args_t *a, hc_algo_t algo)
{
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        hc_info(ALGO, "%s names %s for %s, which this communicator's plans cannot serve; "
                      "selecting without it", who, hc_algo_name(algo), hc_coll_name(a->coll));
}

hc_choice_t hc_select(const hc_select_ctx_t *in, const hc_coll_args_t *a)
{
    hc_select_ctx_t sc     = *in;
    hc_choice_t     choice = {HC_ALGO_COUNT, 0, HC_CHOSEN_RULE};
    if ((unsigned)a->coll >= HC_COLL_COUNT)
        return choice;
    if (sc.params == NULL)
        sc.params = hc_params_get();
    choice.chunk = sc.params->chunk_bytes;
    size_t bytes = a->count * hcomm_dtype_size(a->dtype);

    /* 1. calibration's measurement */
    if (sc.timing != HC_ALGO_AUTO && hc_algo_serves(a->coll, sc.timing, sc.plans))
        return (hc_choice_t){sc.timing, choice.chunk, HC_CHOSEN_TIMING};
    /* 2. HCOMM_ALGO */
    hc_algo_t forced = hc_select_forced(sc.params->algo, a->coll);
    if (forced != HC_ALGO_AUTO && hc_algo_serves(a->coll, forced, sc.plans))
        return (hc_choice_t){forced, choice.chunk, HC_CHOSEN_FORCED};
    if (forced != HC_ALGO_AUTO)
        select_pass_over("HCOMM_ALGO", a, forced);
    /* 3. the tuning file; not for alltoallv, whose count is this rank's own
     * (ranks would find different lines and cut one message differently) */
    hc_algo_t tuned;
    size_t    tchunk;
    if (a->coll != HC_COLL_ALLTOALLV &&
        hc_tuning_lookup(a->coll, sc.nranks, bytes, &tuned, &tchunk) == 0) {
        if (hc_algo_serves(a->coll, tuned, sc.plans))
            return (hc_choice_t){tuned,
                                 tchunk == HC_TUNING_CHUNK_NONE ? 0
                                 : tchunk != 0                  ? tchunk
                                                                : choice.chunk,
                                 HC_CHOSEN_TUNED};
        select_pass_over("HCOMM_TUNING_FILE", a, tuned);
    }
    /* 4. the cost model, across nodes */
    hc_algo_t modelled = select_model(&sc, a, bytes);
    if (modelled != HC_ALGO_AUTO)
        return (hc_choice_t){modelled, choice.chunk,
                             sc.plans->cluster->step_us > 0 ? HC_CHOSEN_CALIBRATED
                                                            : HC_CHOSEN_MODELLED};
    /* 5. the rule */
    choice.algo = select_rule(&sc, a, bytes);
    return choice;
}
