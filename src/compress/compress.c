/* compress.c - compression configs and states (public API of
 * hcomm_compress.h), and the checks of a compressed allreduce call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/slice.h"
#include "compress/compress.h"
#include "compress/compress_model.h"
#include "core/comm.h"
#include "base/log.h"
#include "overlap/overlap.h"

static const char *const kind_names[HCOMM_COMPRESS_COUNT] = {"none", "onebit", "topk", "fp16",
                                                             "bf16"};

hcomm_status_t hcomm_compress_parse(const char *spec, hcomm_compress_config_t *config)
{
    hcomm_compress_config_t c = {HCOMM_COMPRESS_NONE, 0};
    const char             *colon;
    size_t                  len;
    int                     k;

    if (spec == NULL || config == NULL) {
        hc_error(COLL, "hcomm_compress_parse: NULL argument");
        return HCOMM_ERR_INVALID_ARG;
    }
    colon = strchr(spec, ':');
    len   = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
    for (k = 0; k < HCOMM_COMPRESS_COUNT; k++)
        if (strlen(kind_names[k]) == len && strncasecmp(spec, kind_names[k], len) == 0)
            break;
    c.kind = (hcomm_compress_kind_t)k;
    if (k == HCOMM_COMPRESS_TOPK) {
        char *end = NULL;
        c.ratio   = colon != NULL ? strtod(colon + 1, &end) : 0;
        if (colon == NULL || end == colon + 1 || *end != '\0' || !(c.ratio > 0 && c.ratio <= 1)) {
            hc_error(COLL, "compression '%s': topk needs a ratio in (0, 1], as topk:0.01", spec);
            return HCOMM_ERR_INVALID_ARG;
        }
    } else if (k == HCOMM_COMPRESS_COUNT || colon != NULL) {
        hc_error(COLL, "compression '%s': expected none, onebit, topk:RATIO, fp16 or bf16", spec);
        return HCOMM_ERR_INVALID_ARG;
    }
    *config = c;
    return HCOMM_SUCCESS;
}

const char *hcomm_compress_name(const hcomm_compress_config_t *config, char *buf, size_t len)
{
    if (config == NULL || (unsigned)config->kind >= HCOMM_COMPRESS_COUNT || buf == NULL ||
        len == 0)
        return NULL;
    if (config->kind == HCOMM_COMPRESS_TOPK)
        snprintf(buf, len, "topk:%g", config->ratio);
    else
        snprintf(buf, len, "%s", kind_names[config->kind]);
    return buf;
}

size_t hc_compress_chunk_off(const struct hcomm_compress *s, int j)
{
    return hc_part_off(s->count, s->nranks, j);
}

size_t hc_compress_chunk_len(const struct hcomm_compress *s, int j)
{
    return hc_part_len(s->count, s->nranks, j);
}

/* Buffers each kind needs; all sizes in bytes. */
static hcomm_status_t compress_alloc(struct hcomm_compress *s)
{
    size_t n = (size_t)s->nranks, cnt = s->count, out = 0, in = 0, scr = 0, chunk0;

    chunk0 = hc_compress_chunk_len(s, 0); /* the longest chunk */
    switch (s->cfg.kind) {
    case HCOMM_COMPRESS_ONEBIT:
        s->slot = hc_onebit_bytes(chunk0);
        out = in = n * s->slot;
        break;
    case HCOMM_COMPRESS_TOPK:
        s->k = hc_compress_topk_k(s->cfg.ratio, cnt);
        out  = s->k * sizeof(hc_topk_pair_t);
        in   = n * out;
        scr  = hc_topk_scratch_bytes(cnt);
        break;
    case HCOMM_COMPRESS_FP16:
    case HCOMM_COMPRESS_BF16: out = cnt * sizeof(uint16_t); break;
    default: break;
    }
    s->worker_res = calloc(cnt ? cnt : 1, sizeof(float));
    s->work       = malloc((cnt ? cnt : 1) * sizeof(float));
    s->server_res = calloc(chunk0 ? chunk0 : 1, sizeof(float));
    s->avg        = malloc((chunk0 ? chunk0 : 1) * sizeof(float));
    s->sendbuf    = calloc(1, out ? out : 1); /* slack of short chunks goes out too */
    s->recvbuf    = malloc(in ? in : 1);
    s->scratch    = malloc(scr ? scr : 1);
    if (!s->worker_res || !s->work || !s->server_res || !s->avg || !s->sendbuf || !s->recvbuf ||
        !s->scratch) {
        hc_error(COLL, "compression state for %zu elements: out of memory", cnt);
        return HCOMM_ERR_NO_MEMORY;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_compress_create(hcomm_comm_t comm, const hcomm_compress_config_t *config,
                                     size_t count, hcomm_dtype_t dtype, hcomm_compress_t *state)
{
    struct hcomm_compress *s;
    hcomm_status_t         st;

    if (!hc_comm_is_live(comm)) {
        hc_error(COLL, "hcomm_compress_create: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (config == NULL || state == NULL || (unsigned)config->kind >= HCOMM_COMPRESS_COUNT ||
        (config->kind == HCOMM_COMPRESS_TOPK && !(config->ratio > 0 && config->ratio <= 1))) {
        hc_error(COLL, "hcomm_compress_create: NULL argument, unknown kind or topk ratio "
                       "outside (0, 1]");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (dtype != HCOMM_FLOAT32 && dtype != HCOMM_FLOAT16 && dtype != HCOMM_BFLOAT16) {
        hc_error(COLL, "hcomm_compress_create: %s: compression takes float32, float16 or "
                       "bfloat16", hcomm_dtype_name(dtype) ? hcomm_dtype_name(dtype) : "invalid dtype");
        return HCOMM_ERR_INVALID_DTYPE;
    }
    if (count > SIZE_MAX / 2 / sizeof(hc_topk_pair_t) / (size_t)comm->nranks) {
        hc_error(COLL, "hcomm_compress_create: %zu elements overflow", count);
        return HCOMM_ERR_OVERFLOW;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        hc_error(COLL, "hcomm_compress_create: out of memory");
        return HCOMM_ERR_NO_MEMORY;
    }
    *s = (struct hcomm_compress){.comm = comm, .cfg = *config, .count = count, .dtype = dtype,
                                 .nranks = comm->nranks, .rank = comm->rank};
    st = compress_alloc(s);
    if (st != HCOMM_SUCCESS) {
        hcomm_compress_destroy(s);
        return st;
    }
    *state = s;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_compress_reset(hcomm_compress_t s)
{
    if (s == NULL) {
        hc_error(COLL, "hcomm_compress_reset: NULL state");
        return HCOMM_ERR_INVALID_ARG;
    }
    memset(s->worker_res, 0, (s->count ? s->count : 1) * sizeof(float));
    memset(s->server_res, 0, (hc_compress_chunk_len(s, 0) ? hc_compress_chunk_len(s, 0) : 1) *
                                 sizeof(float));
    return HCOMM_SUCCESS;
}

void hcomm_compress_destroy(hcomm_compress_t s)
{
    if (s == NULL)
        return;
    free(s->worker_res);
    free(s->server_res);
    free(s->work);
    free(s->avg);
    free(s->sendbuf);
    free(s->recvbuf);
    free(s->scratch);
    free(s);
}

static hcomm_status_t compress_check(const void *sendbuf, void *recvbuf, size_t count,
                                     hcomm_dtype_t dtype, hcomm_compress_t s, hcomm_comm_t comm,
                                     hcomm_stream_t stream)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(COLL, "hcomm_allreduce_compressed: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (s == NULL || s->comm != comm || s->count != count || s->dtype != dtype) {
        hc_error(COLL, "hcomm_allreduce_compressed: %s (state for %zu x %s, call with %zu x %s)",
                 s == NULL ? "NULL state" : s->comm != comm ? "state of another communicator"
                                                            : "state made for another tensor",
                 s ? s->count : 0, s ? hcomm_dtype_name(s->dtype) : "-", count,
                 hcomm_dtype_name(dtype) ? hcomm_dtype_name(dtype) : "invalid");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (count != 0 && (sendbuf == NULL || recvbuf == NULL)) {
        hc_error(COLL, "hcomm_allreduce_compressed: NULL buffer with %zu elements", count);
        return HCOMM_ERR_NULL_BUFFER;
    }
    if (stream != NULL && hc_stream_check(stream, "hcomm_allreduce_compressed") != 0)
        return HCOMM_ERR_INVALID_ARG;
    if (hc_group_active()) {
        hc_error(COLL, "hcomm_allreduce_compressed: not allowed inside a group");
        return HCOMM_ERR_INVALID_USAGE;
    }
    return comm->error != HCOMM_SUCCESS ? comm->error : HCOMM_SUCCESS;
}

hcomm_status_t hcomm_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count,
                                          hcomm_dtype_t dtype, hcomm_compress_t s,
                                          hcomm_comm_t comm, hcomm_stream_t stream)
{
    hcomm_status_t st = compress_check(sendbuf, recvbuf, count, dtype, s, comm, stream);

    if (st != HCOMM_SUCCESS || count == 0)
        return st;
    return hc_compress_run(s, sendbuf, recvbuf, stream);
}
