/* select.h - which algorithm serves a collective. One pipeline (select.c),
 * read top to bottom; the first stage with an answer decides:
 *   1. timing:      calibration is timing this algorithm (comm_calibrate.c);
 *   2. forced:      HCOMM_ALGO names one for the collective (select_forced.c);
 *   3. tuned:       HCOMM_TUNING_FILE has an entry for the collective, rank
 *                   count and size (select_tuning.c, written by hcomm-perf --tune);
 *   4. calibrated / modelled: across nodes, the cost model's cheapest
 *                   algorithm, on link costs measured at init (calibrated) or
 *                   on the model's own or a topology file's (modelled);
 *   5. rule:        the measured size rule for allreduce inside one node, the
 *                   collective's only algorithm otherwise.
 * Every stage passes over an algorithm the plans cannot serve
 * (hc_algo_serves): it is never chosen, so nothing falls back after the choice.
 * The communicator, hcomm-topo and hcomm-perf --tune all ask this pipeline. */
#ifndef HC_ALGO_SELECT_H
#define HC_ALGO_SELECT_H

#include <stdint.h>
#include <stdio.h>

#include "algorithms/algo.h"
#include "base/params.h"

typedef enum {
    HC_CHOSEN_TIMING = 0,
    HC_CHOSEN_FORCED,
    HC_CHOSEN_TUNED,
    HC_CHOSEN_CALIBRATED,
    HC_CHOSEN_MODELLED,
    HC_CHOSEN_RULE,
    HC_CHOSEN_COUNT
} hc_chosen_by_t;

typedef struct hc_select_ctx {
    int                nranks;
    const hc_plans_t  *plans;  /* NULL: none (then only plan-free algorithms serve) */
    const hc_params_t *params; /* NULL: hc_params_get() */
    hc_algo_t          timing; /* the algorithm calibration times, or HC_ALGO_AUTO */
} hc_select_ctx_t;

typedef struct hc_choice {
    hc_algo_t      algo;
    size_t         chunk; /* pipelining chunk to build with */
    hc_chosen_by_t by;
} hc_choice_t;

hc_choice_t hc_select(const hc_select_ctx_t *sc, const hc_coll_args_t *args);
const char *hc_chosen_by_name(hc_chosen_by_t by);

/* The algorithm spec (HCOMM_ALGO: "name" or "coll:name,...") forces for coll,
 * or HC_ALGO_AUTO; only algorithms that implement coll count. An entry naming
 * coll wins over a bare name. Parts it cannot use are warned about once. */
hc_algo_t hc_select_forced(const char *spec, hc_coll_t coll);

/* A tuning entry's chunk "none": schedules not pipelined (HCOMM_CHUNK_BYTES=0). */
#define HC_TUNING_CHUNK_NONE SIZE_MAX
/* The tuning file's choice for coll on nranks ranks at bytes: 0 with *algo and
 * *chunk set (0: the default; HC_TUNING_CHUNK_NONE), -1 when it has none. Read
 * once. */
int hc_tuning_lookup(hc_coll_t coll, int nranks, size_t bytes, hc_algo_t *algo, size_t *chunk);
/* Parses a tuning file (path for messages); the number of entries, or -1
 * after logging the first bad line. For tests. */
int hc_tuning_parse(FILE *f, const char *path);
/* A digest of the entries lookups use (loading them first): what a
 * communicator's ranks compare for HCOMM_TUNING_FILE. The table is read once
 * per process, so the file as it is now may no longer be what selects. */
uint64_t hc_tuning_digest(void);

#endif
