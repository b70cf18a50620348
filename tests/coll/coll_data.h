/* coll_data.h - deterministic inputs, the serial reference and the comparison
 * for coll_check. Every rank can generate every rank's input from
 * (rank, index, seed), so each rank checks its own result locally. */
#ifndef HCT_COLL_DATA_H
#define HCT_COLL_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"

/* One element, logically: integers in u (the bits, masked to the width),
 * floating types in f (the exact value). */
typedef struct {
    uint64_t u;
    double   f;
} ct_val_t;

int    ct_is_float(hcomm_dtype_t dt);
int    ct_is_signed(hcomm_dtype_t dt);
size_t ct_size(hcomm_dtype_t dt);

/* The input of rank at element idx. op selects the value set: prod draws from
 * {1, 2, -1} ({1, 2, 3} unsigned); otherwise integers are full-width random
 * bits (exercising wrap-around and signed/unsigned comparisons) and floats are
 * integers in [-4, 4]. */
ct_val_t ct_input(hcomm_dtype_t dt, hcomm_op_t op, int rank, size_t idx, uint64_t seed);

void     ct_store(void *buf, size_t i, hcomm_dtype_t dt, ct_val_t v);
ct_val_t ct_load(const void *buf, size_t i, hcomm_dtype_t dt);

/* buf[i] = ct_input(dt, op, rank, base + i, seed) for i < count. */
void ct_fill(void *buf, size_t count, hcomm_dtype_t dt, hcomm_op_t op, int rank, size_t base,
             uint64_t seed);

/* op over ranks 0..nranks-1 of ct_input(dt, op, r, idx, seed), serially:
 * integers in unsigned arithmetic of the dtype's width; avg truncates the
 * wrapped sum toward zero; floats exactly, in double, then avg = sum / nranks. */
ct_val_t ct_reduce_ref(hcomm_dtype_t dt, hcomm_op_t op, int nranks, size_t idx, uint64_t seed);

/* Absolute tolerance for a reduction result (see coll_data.c for the reasoning);
 * 0 means exact. */
double ct_tolerance(hcomm_dtype_t dt, hcomm_op_t op, int nranks, ct_val_t expected);
/* The relative epsilon behind ct_tolerance, for printing. */
double ct_tolerance_eps(hcomm_dtype_t dt);

int  ct_equal(hcomm_dtype_t dt, ct_val_t got, ct_val_t expected, double tol);
void ct_format(char *s, size_t n, hcomm_dtype_t dt, ct_val_t v);

/* IEEE binary16 and bfloat16 conversions, round to nearest even. */
uint16_t ct_float_to_half(float f);
float    ct_half_to_float(uint16_t h);
uint16_t ct_float_to_bf16(float f);
float    ct_bf16_to_float(uint16_t b);

#endif
