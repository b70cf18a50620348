/* reduce_half.h - float16 / bfloat16 kernels behind hc_reduce and hc_reduce_div
 * (internal to base/reduce*.c and their tests), and the cached CPU
 * feature checks that src/compress/ and src/moe/ share. */
#ifndef HC_BASE_REDUCE_HALF_H
#define HC_BASE_REDUCE_HALF_H

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
/* Whether hc_reduce_f16 takes the F16C path on this CPU (AVX and F16C). */
int hc_reduce_f16c_usable(void);
/* Whether the CPU and OS run AVX2 code. Both probed once, then cached. */
int hc_cpu_has_avx2(void);

#endif
