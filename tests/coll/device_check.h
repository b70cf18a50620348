/* device_check.h - what device_check asks of the memory kind it tests: the
 * test kind (device_check_test.c) or CUDA device memory
 * (device_check_cuda.c). */
#ifndef HC_DEVICE_CHECK_H
#define HC_DEVICE_CHECK_H

#include <stddef.h>

#include "hcomm.h"

/* device_check.c's counters, for test_comm.h's CHECK */
extern int g_rank, g_nranks, g_failed, g_checks;

/* The kind's name in messages. */
extern const char *const dc_kind_name;

/* NULL when buffers of the kind can be made here; else why not (a skip). */
const char *dc_unusable(void);

/* After init: picks the rank's device. */
void dc_bind(int rank);

/* len bytes of the kind (contents undefined), or NULL; freed by dc_free. */
void *dc_alloc(size_t len);
void  dc_free(void *p);

/* The kind's own checks: the test kind faults when touched directly; CUDA
 * memory is classified as such and calls on a CUDA stream are ordered. */
void dc_kind_checks(hcomm_comm_t comm);

/* Rank 0 of --copies BYTES: the rates of the kind's own copies, for the
 * staging's figures to be read against. */
void dc_copy_rates(size_t bytes);

#endif
