/* reduce.h - element-wise reduction kernels for every dtype and op, and the
 * float16 / bfloat16 conversions they use. */
#ifndef HC_BASE_REDUCE_H
#define HC_BASE_REDUCE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hcomm.h"

/* dst[i] = a[i] OP b[i] for i < count. dst may alias a and/or b exactly (not
 * partially). HCOMM_AVG reduces as HCOMM_SUM: the caller divides at the end with
 * hc_reduce_div. Integer sum/prod wrap (unsigned arithmetic); float16/bfloat16
 * compute in float32 and round to nearest even. dtype and op must be valid. */
void hc_reduce(void *dst, const void *a, const void *b, size_t count, hcomm_dtype_t dtype,
               hcomm_op_t op);

/* buf[i] /= n: the avg finalisation; integers truncate toward zero. */
void hc_reduce_div(void *buf, size_t count, hcomm_dtype_t dtype, int n);

/* IEEE binary16 <-> float32, round to nearest even; NaN stays NaN, overflow
 * gives infinity, subnormals are exact. */
float    hc_half_to_float(uint16_t h);
uint16_t hc_float_to_half(float f);
/* bfloat16 <-> float32, round to nearest even; NaN stays (quiet) NaN. */
float    hc_bf16_to_float(uint16_t b);
uint16_t hc_float_to_bf16(float f);

/* A float's bits and back, without aliasing rules broken. */
static inline uint32_t hc_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float hc_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

#endif
