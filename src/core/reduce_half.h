/* reduce_half.h - float16 / bfloat16 kernels behind hc_reduce and hc_reduce_div
 * (internal to src/core/reduce*.c and their tests). */
#ifndef HC_CORE_REDUCE_HALF_H
#define HC_CORE_REDUCE_HALF_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"

/* dst[i] = a[i] OP b[i]; F16C instructions when the CPU has them. */
void hc_reduce_f16(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t count,
                   hcomm_op_t op);
/* The same without F16C: the fallback, bit-identical (tests compare the two). */
void hc_reduce_f16_generic(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t count,
                           hcomm_op_t op);
void hc_reduce_bf16(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t count,
                    hcomm_op_t op);
/* buf[i] /= n through float32, n >= 1. */
void hc_reduce_div_f16(uint16_t *buf, size_t count, int n);
void hc_reduce_div_bf16(uint16_t *buf, size_t count, int n);
/* Whether hc_reduce_f16 takes the F16C path on this CPU. */
int hc_reduce_f16c_usable(void);

#endif
