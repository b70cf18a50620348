/* cast.h - float32 arrays to float16 / bfloat16 and back, vectorised (AVX2,
 * F16C) where the CPU has it and bit-identical to the scalar conversions of
 * reduce.h: the fp16 / bf16 codecs (with error feedback) and the MoE combine
 * (without) use them. */
#ifndef HC_BASE_CAST_H
#define HC_BASE_CAST_H

#include <stddef.h>
#include <stdint.h>

/* out[i] = round(v) as float16 (half = 1) or bfloat16 (half = 0), v = in[i] +
 * residual[i]; residual becomes v - (float)out[i] (residual NULL: v = in[i],
 * nothing kept). A residual that is not finite is stored as 0. */
void hc_cast_encode(const float *in, float *residual, size_t n, int half, uint16_t *out);
/* out[i] = (float)msg[i] (add = 0) or out[i] += (float)msg[i] (add = 1). */
void hc_cast_decode(const uint16_t *msg, size_t n, int half, float *out, int add);

#endif
