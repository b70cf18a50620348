/* compress_model.c - the compressed allreduce computed serially, in one
 * process, from every rank's input: what tests and hcomm-perf's checks
 * compare the distributed result with. Each codec's model (codec_table.c)
 * calls the same kernels in the same order as its program, so onebit and topk
 * agree bit for bit; the casts sum in float here where the real allreduce
 * sums in half precision. */
#include <stdlib.h>
#include <string.h>

#include "base/slice.h"
#include "compress/compress_model.h"

hcomm_status_t hc_compress_model_init(hc_compress_model_t *m, const hcomm_compress_config_t *cfg,
                                      int nranks, size_t count)
{
    memset(m, 0, sizeof(*m));
    m->kind   = cfg->kind;
    m->nranks = nranks;
    m->count  = count;
    m->k      = hc_compress_topk_k(cfg->ratio, count);
    m->worker_res = calloc((size_t)nranks, sizeof(float *));
    m->server_res = calloc((size_t)nranks, sizeof(float *));
    if (m->worker_res == NULL || m->server_res == NULL)
        goto err;
    for (int r = 0; r < nranks; r++) {
        m->worker_res[r] = calloc(count + 1, sizeof(float));
        m->server_res[r] = calloc(hc_part_len(count, nranks, 0) + 1, sizeof(float));
        if (m->worker_res[r] == NULL || m->server_res[r] == NULL)
            goto err;
    }
    return HCOMM_SUCCESS;
err:
    hc_compress_model_free(m);
    return HCOMM_ERR_NO_MEMORY;
}

void hc_compress_model_free(hc_compress_model_t *m)
{
    for (int r = 0; r < m->nranks; r++) {
        if (m->worker_res != NULL)
            free(m->worker_res[r]);
        if (m->server_res != NULL)
            free(m->server_res[r]);
    }
    free(m->worker_res);
    free(m->server_res);
    memset(m, 0, sizeof(*m));
}

hcomm_status_t hc_compress_model_step(hc_compress_model_t *m, const float *const *in, float *out)
{
    return hc_codec_of(m->kind)->model(m, in, out);
}
