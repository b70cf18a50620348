/* tuning.h - the tuning file (HCOMM_TUNING_FILE, written by hcomm-perf --tune):
 * per collective, rank count and size range, the algorithm and chunk size that
 * measured fastest. Selection prefers it to the built-in rules, but not to
 * HCOMM_ALGO. Format: docs/tuning.md. */
#ifndef HC_CORE_TUNING_H
#define HC_CORE_TUNING_H

#include <stddef.h>
#include <stdio.h>

#include "algorithms/algo.h"

/* The tuned choice for coll on nranks ranks at bytes; 0 when the file has one
 * (then *algo and *chunk are set), -1 otherwise. The file is read once. */
int hc_tuning_lookup(hc_coll_t coll, int nranks, size_t bytes, hc_algo_t *algo, size_t *chunk);

/* Parses a tuning file from f (path for messages); returns the number of
 * entries, or -1 after logging the first bad line. For tests. */
int hc_tuning_parse(FILE *f, const char *path);

#endif
