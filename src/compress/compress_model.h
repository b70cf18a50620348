/* compress_model.h - a serial model of the compressed allreduce (all ranks in
 * one process, each with its own residuals) for tests and hcomm-perf. */
#ifndef HC_COMPRESS_MODEL_H
#define HC_COMPRESS_MODEL_H

#include <float.h>
#include <math.h>

#include "compress/codec.h"
#include "hcomm_compress.h"

typedef struct hc_compress_model {
    hcomm_compress_kind_t kind;
    int                   nranks;
    size_t                count, k;
    float               **worker_res; /* [rank][count] */
    float               **server_res; /* [rank][its onebit chunk] */
} hc_compress_model_t;

/* Pairs topk sends of count elements: ceil(ratio x count), at most count.
 * A product a rounding above a whole number is that number (0.07 x 100 is
 * 7.000000000000001 in doubles: 7 pairs, not 8). */
static inline size_t hc_compress_topk_k(double ratio, size_t count)
{
    double x = ratio * (double)count, n = nearbyint(x);
    size_t k = (size_t)(fabs(x - n) <= 4 * DBL_EPSILON * x ? n : ceil(x));
    return k > count ? count : k;
}

hcomm_status_t hc_compress_model_init(hc_compress_model_t *m, const hcomm_compress_config_t *cfg,
                                      int nranks, size_t count);
void           hc_compress_model_free(hc_compress_model_t *m);

/* One step: in[r] is rank r's float32 input; out (count) receives what every
 * rank's hcomm_allreduce_compressed returns, residuals advance as theirs do. */
hcomm_status_t hc_compress_model_step(hc_compress_model_t *m, const float *const *in, float *out);

#endif
