/* compress_model.c - the compressed allreduce computed serially, in one
 * process, from every rank's input: what tests and hcomm-perf's checks
 * compare the distributed result with. It calls the same codecs in the same
 * order as compress_allreduce.c, so onebit and topk agree bit for bit; the
 * casts sum in float here where the real allreduce sums in half precision. */
#include <stdlib.h>
#include <string.h>

#include "base/slice.h"
#include "compress/compress_model.h"

static hcomm_status_t model_onebit(const hc_compress_model_t *m, const float *const *in,
                                   float *out)
{
    int     n   = m->nranks;
    size_t  c0  = hc_part_len(m->count, n, 0), slot = hc_onebit_bytes(c0);
    uint8_t *msg = malloc((size_t)n * slot + 1);
    float   *avg = malloc((c0 ? c0 : 1) * sizeof(float));

    if (msg == NULL || avg == NULL) {
        free(msg);
        free(avg);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int j = 0; j < n; j++) { /* server j */
        size_t off = hc_part_off(m->count, n, j), len = hc_part_len(m->count, n, j);
        for (int r = 0; r < n; r++)
            hc_onebit_encode(in[r] + off, m->worker_res[r] + off, len, msg + (size_t)r * slot);
        for (int r = 0; r < n; r++)
            hc_onebit_decode(msg + (size_t)r * slot, len, avg, r != 0);
        for (size_t x = 0; x < len; x++)
            avg[x] /= (float)n;
        hc_onebit_encode(avg, m->server_res[j], len, msg);
        hc_onebit_decode(msg, len, out + off, 0);
    }
    free(msg);
    free(avg);
    return HCOMM_SUCCESS;
}

static hcomm_status_t model_topk(const hc_compress_model_t *m, const float *const *in,
                                 float *out)
{
    size_t          k = m->k;
    hc_topk_pair_t *pairs = malloc((k ? k : 1) * sizeof(*pairs));
    void           *scratch = malloc(hc_topk_scratch_bytes(m->count) + 1);
    hcomm_status_t  st = HCOMM_SUCCESS;

    if (pairs == NULL || scratch == NULL)
        st = HCOMM_ERR_NO_MEMORY;
    memset(out, 0, m->count * sizeof(*out));
    for (int r = 0; r < m->nranks && st == HCOMM_SUCCESS; r++) {
        if (hc_topk_encode(in[r], m->worker_res[r], m->count, k, scratch, pairs) != 0)
            st = HCOMM_ERR_INVALID_ARG;
        else
            hc_topk_decode_add(pairs, k, out, m->count);
    }
    for (size_t x = 0; x < m->count; x++)
        out[x] /= (float)m->nranks;
    free(pairs);
    free(scratch);
    return st;
}

static hcomm_status_t model_cast(const hc_compress_model_t *m, const float *const *in,
                                 float *out)
{
    int       half = m->kind == HCOMM_COMPRESS_FP16;
    uint16_t *msg  = malloc((m->count ? m->count : 1) * sizeof(*msg));

    if (msg == NULL)
        return HCOMM_ERR_NO_MEMORY;
    for (int r = 0; r < m->nranks; r++) {
        hc_cast_encode(in[r], m->worker_res[r], m->count, half, msg);
        hc_cast_decode(msg, m->count, half, out, r != 0);
    }
    for (size_t x = 0; x < m->count; x++)
        out[x] /= (float)m->nranks;
    free(msg);
    return HCOMM_SUCCESS;
}

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
    switch (m->kind) {
    case HCOMM_COMPRESS_ONEBIT: return model_onebit(m, in, out);
    case HCOMM_COMPRESS_TOPK: return model_topk(m, in, out);
    case HCOMM_COMPRESS_FP16:
    case HCOMM_COMPRESS_BF16: return model_cast(m, in, out);
    default:
        memset(out, 0, m->count * sizeof(*out));
        for (int r = 0; r < m->nranks; r++)
            for (size_t x = 0; x < m->count; x++)
                out[x] += in[r][x];
        for (size_t x = 0; x < m->count; x++)
            out[x] /= (float)m->nranks;
        return HCOMM_SUCCESS;
    }
}
