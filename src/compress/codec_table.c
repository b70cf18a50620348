/* codec_table.c - every codec as a compressed allreduce: its program (local
 * steps between collectives), the buffers a state needs, and the same call
 * computed serially (the model tests and hcomm-perf check against). Each
 * returns the average of the ranks' compensated inputs; every rank decodes
 * the same messages in the same order, so all get the same bits. The input is
 * read in full by the first step and the output written by the last one, so
 * in place works. A codec is one block here and a line in the table below. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/slice.h"
#include "compress/compress.h"
#include "compress/compress_model.h"

/* The float32 input: the caller's buffer, or float16/bfloat16 converted into
 * s->work (residuals are float32 anyway) by the codecs' vectorised cast,
 * which widens exactly as hc_half_to_float / hc_bf16_to_float do. */
static const float *input_f32(const hc_compress_call_t *c)
{
    struct hcomm_compress *s = c->s;
    if (s->dtype == HCOMM_FLOAT32)
        return c->in;
    hc_cast_decode(c->in, s->count, s->dtype == HCOMM_FLOAT16, s->work, 0);
    return s->work;
}

/* Where the float32 result goes; output_done converts it for half tensors. */
static float *output_f32(const hc_compress_call_t *c)
{
    return c->s->dtype == HCOMM_FLOAT32 ? c->out : c->s->work;
}

/* The last step of every call: converts half results. */
static hcomm_status_t output_done(hc_compress_call_t *c, hcomm_status_t st)
{
    struct hcomm_compress *s = c->s;
    /* rounds to nearest even, NaN quieted, as hc_float_to_half / _bf16 */
    if (st == HCOMM_SUCCESS && s->dtype != HCOMM_FLOAT32)
        hc_cast_encode(s->work, NULL, s->count, s->dtype == HCOMM_FLOAT16, c->out);
    return st;
}

/* ---- onebit: 1-bit Adam's two phases. Every rank compresses its whole
 * tensor (worker error feedback) and sends chunk j to rank j; rank j averages
 * the n versions of its chunk, compresses the average again (server error
 * feedback) and the ranks allgather those; all decode. ---- */
static hcomm_status_t onebit_encode(hc_compress_call_t *c)
{
    struct hcomm_compress *s  = c->s;
    const float           *in = input_f32(c);
    for (int j = 0; j < s->nranks; j++) {
        size_t off = hc_compress_chunk_off(s, j);
        hc_onebit_encode(in + off, s->worker_res + off, hc_compress_chunk_len(s, j),
                         (uint8_t *)s->sendbuf + (size_t)j * s->msg_bytes);
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t onebit_server(hc_compress_call_t *c)
{
    struct hcomm_compress *s    = c->s;
    size_t                 mine = hc_compress_chunk_len(s, s->rank);
    for (int i = 0; i < s->nranks; i++)
        hc_onebit_decode((uint8_t *)s->recvbuf + (size_t)i * s->msg_bytes, mine, s->avg, i != 0);
    for (size_t x = 0; x < mine; x++)
        s->avg[x] /= (float)s->nranks;
    hc_onebit_encode(s->avg, s->server_res, mine, s->sendbuf);
    return HCOMM_SUCCESS;
}

static hcomm_status_t onebit_decode(hc_compress_call_t *c)
{
    struct hcomm_compress *s   = c->s;
    float                 *out = output_f32(c);
    for (int j = 0; j < s->nranks; j++)
        hc_onebit_decode((uint8_t *)s->recvbuf + (size_t)j * s->msg_bytes,
                         hc_compress_chunk_len(s, j), out + hc_compress_chunk_off(s, j), 0);
    return output_done(c, HCOMM_SUCCESS);
}

static void onebit_size(const hcomm_compress_config_t *cfg, size_t count, int nranks,
                        hc_codec_sizes_t *z)
{
    (void)cfg;
    z->msg_bytes  = hc_onebit_bytes(hc_part_len(count, nranks, 0)); /* the longest chunk */
    z->send_bytes = z->recv_bytes = (size_t)nranks * z->msg_bytes;
}

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

/* ---- topk: a sparse allgather of every rank's k pairs, added up in rank
 * order. A sparse reduce-scatter would move fewer bytes only where the ranks'
 * indexes overlap much, which error feedback works against. ---- */
static hcomm_status_t topk_encode(hc_compress_call_t *c)
{
    struct hcomm_compress *s = c->s;
    if (hc_topk_encode(input_f32(c), s->worker_res, s->count, s->k, s->scratch, s->sendbuf) != 0) {
        hc_error(COMPRESS, "topk: k %zu > %zu elements", s->k, s->count);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t topk_decode(hc_compress_call_t *c)
{
    struct hcomm_compress *s   = c->s;
    float                 *out = output_f32(c);
    size_t                 bad = 0;
    memset(out, 0, s->count * sizeof(*out));
    for (int r = 0; r < s->nranks; r++)
        bad += hc_topk_decode_add((hc_topk_pair_t *)s->recvbuf + (size_t)r * s->k, s->k, out,
                                  s->count);
    if (bad != 0) {
        hc_error(COMPRESS, "topk: %zu received indexes out of range (%zu elements)", bad, s->count);
        return output_done(c, HCOMM_ERR_PROTOCOL);
    }
    for (size_t x = 0; x < s->count; x++)
        out[x] /= (float)s->nranks;
    return output_done(c, HCOMM_SUCCESS);
}

static void topk_size(const hcomm_compress_config_t *cfg, size_t count, int nranks,
                      hc_codec_sizes_t *z)
{
    z->k             = hc_compress_topk_k(cfg->ratio, count);
    z->msg_bytes     = z->k * sizeof(hc_topk_pair_t);
    z->send_bytes    = z->msg_bytes;
    z->recv_bytes    = (size_t)nranks * z->msg_bytes;
    z->scratch_bytes = hc_topk_scratch_bytes(count);
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

/* ---- fp16 / bf16: the cast on the ordinary allreduce (summed in half
 * precision, as NCCL users do). Each rank casts its input divided by the
 * number of ranks (the residual is in those units), so the sum is the
 * average and no partial sum exceeds the largest input: a sum of the inputs
 * themselves would overflow fp16 where the average fits (4 x 20000). ---- */
static void cast_scale(const float *in, float *out, size_t n, int nranks)
{
    for (size_t x = 0; x < n; x++)
        out[x] = in[x] / (float)nranks;
}

static hcomm_status_t cast_encode(hc_compress_call_t *c)
{
    struct hcomm_compress *s = c->s;
    cast_scale(input_f32(c), s->work, s->count, s->nranks); /* input_f32 may be s->work */
    hc_cast_encode(s->work, s->worker_res, s->count, s->cfg.kind == HCOMM_COMPRESS_FP16,
                   s->sendbuf);
    return HCOMM_SUCCESS;
}

static hcomm_status_t cast_decode(hc_compress_call_t *c)
{
    struct hcomm_compress *s = c->s;
    hc_cast_decode(s->sendbuf, s->count, s->cfg.kind == HCOMM_COMPRESS_FP16, output_f32(c), 0);
    return output_done(c, HCOMM_SUCCESS);
}

static void cast_size(const hcomm_compress_config_t *cfg, size_t count, int nranks,
                      hc_codec_sizes_t *z)
{
    (void)cfg, (void)nranks;
    z->send_bytes = count * sizeof(uint16_t);
}

static hcomm_status_t model_cast(const hc_compress_model_t *m, const float *const *in,
                                 float *out)
{
    int       half = m->kind == HCOMM_COMPRESS_FP16;
    uint16_t *msg  = malloc((m->count ? m->count : 1) * sizeof(*msg));
    float    *v    = malloc((m->count ? m->count : 1) * sizeof(*v));

    if (msg == NULL || v == NULL) {
        free(msg);
        free(v);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int r = 0; r < m->nranks; r++) {
        cast_scale(in[r], v, m->count, m->nranks);
        hc_cast_encode(v, m->worker_res[r], m->count, half, msg);
        hc_cast_decode(msg, m->count, half, out, r != 0);
    }
    free(msg);
    free(v);
    return HCOMM_SUCCESS;
}

/* ---- none: the plain allreduce (avg), for comparison ---- */
static void none_size(const hcomm_compress_config_t *cfg, size_t count, int nranks,
                      hc_codec_sizes_t *z)
{
    (void)cfg, (void)count, (void)nranks, (void)z;
}

static hcomm_status_t model_none(const hc_compress_model_t *m, const float *const *in,
                                 float *out)
{
    memset(out, 0, m->count * sizeof(*out));
    for (int r = 0; r < m->nranks; r++)
        for (size_t x = 0; x < m->count; x++)
            out[x] += in[r][x];
    for (size_t x = 0; x < m->count; x++)
        out[x] /= (float)m->nranks;
    return HCOMM_SUCCESS;
}

/* ---- the table ---- */

static const hc_cstep_t onebit_steps[] = {
    {HC_CSTEP_LOCAL, onebit_encode}, {HC_CSTEP_ALLTOALL, NULL},
    {HC_CSTEP_LOCAL, onebit_server}, {HC_CSTEP_ALLGATHER, NULL},
    {HC_CSTEP_LOCAL, onebit_decode}, {HC_CSTEP_END, NULL}};
static const hc_cstep_t topk_steps[] = {{HC_CSTEP_LOCAL, topk_encode},
                                        {HC_CSTEP_ALLGATHER, NULL},
                                        {HC_CSTEP_LOCAL, topk_decode},
                                        {HC_CSTEP_END, NULL}};
static const hc_cstep_t cast_steps[] = {{HC_CSTEP_LOCAL, cast_encode},
                                        {HC_CSTEP_ALLREDUCE, NULL},
                                        {HC_CSTEP_LOCAL, cast_decode},
                                        {HC_CSTEP_END, NULL}};
static const hc_cstep_t none_steps[] = {{HC_CSTEP_AVERAGE, NULL}, {HC_CSTEP_END, NULL}};

static const hc_codec_t codecs[HCOMM_COMPRESS_COUNT] = {
    [HCOMM_COMPRESS_NONE]   = {"none", HCOMM_COMPRESS_NONE, HCOMM_FLOAT32, none_steps,
                               none_size, model_none},
    [HCOMM_COMPRESS_ONEBIT] = {"onebit", HCOMM_COMPRESS_ONEBIT, HCOMM_UINT8, onebit_steps,
                               onebit_size, model_onebit},
    [HCOMM_COMPRESS_TOPK]   = {"topk", HCOMM_COMPRESS_TOPK, HCOMM_UINT8, topk_steps, topk_size,
                               model_topk},
    [HCOMM_COMPRESS_FP16]   = {"fp16", HCOMM_COMPRESS_FP16, HCOMM_FLOAT16, cast_steps, cast_size,
                               model_cast},
    [HCOMM_COMPRESS_BF16]   = {"bf16", HCOMM_COMPRESS_BF16, HCOMM_BFLOAT16, cast_steps, cast_size,
                               model_cast},
};

const hc_codec_t *hc_codec_of(hcomm_compress_kind_t kind)
{
    return (unsigned)kind < HCOMM_COMPRESS_COUNT ? &codecs[kind] : NULL;
}
