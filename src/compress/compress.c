/* compress.c - compression configs and states (public API of
 * hcomm_compress.h), and the checks of a compressed allreduce call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/extent.h"
#include "base/log.h"
#include "base/slice.h"
#include "compress/compress.h"
#include "core/group.h"
#include "core/handles.h"
#include "device/device.h"
#include "overlap/overlap.h"

hcomm_status_t hcomm_compress_parse(const char *spec, hcomm_compress_config_t *config)
{
    hcomm_compress_config_t c = {HCOMM_COMPRESS_NONE, 0};
    const char             *colon;
    size_t                  len;
    int                     k;

    if (spec == NULL || config == NULL) {
        hc_error(COMPRESS, "hcomm_compress_parse: NULL argument");
        return HCOMM_ERR_INVALID_ARG;
    }
    colon = strchr(spec, ':');
    len   = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
    for (k = 0; k < HCOMM_COMPRESS_COUNT; k++) {
        const char *name = hc_codec_of((hcomm_compress_kind_t)k)->name;
        if (strlen(name) == len && strncasecmp(spec, name, len) == 0)
            break;
    }
    c.kind = (hcomm_compress_kind_t)k;
    if (k == HCOMM_COMPRESS_TOPK) {
        char *end = NULL;
        c.ratio   = colon != NULL ? strtod(colon + 1, &end) : 0;
        if (colon == NULL || end == colon + 1 || *end != '\0' || !(c.ratio > 0 && c.ratio <= 1)) {
            hc_error(COMPRESS, "compression '%s': topk needs a ratio in (0, 1], as topk:0.01",
                     spec);
            return HCOMM_ERR_INVALID_ARG;
        }
    } else if (k == HCOMM_COMPRESS_COUNT || colon != NULL) {
        hc_error(COMPRESS, "compression '%s': expected none, onebit, topk:RATIO, fp16 or bf16",
                 spec);
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
    if (config->kind == HCOMM_COMPRESS_TOPK) {
        char spec[40];
        /* the shortest that hcomm_compress_parse reads back as the same ratio */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(spec, sizeof(spec), "topk:%.*g", prec, config->ratio);
            if (strtod(spec + 5, NULL) == config->ratio)
                break;
        }
        snprintf(buf, len, "%s", spec);
    } else
        snprintf(buf, len, "%s", hc_codec_of(config->kind)->name);
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

/* The buffers the codec needs for the state's tensor. */
static hcomm_status_t compress_alloc(struct hcomm_compress *s)
{
    hc_codec_sizes_t z      = {0};
    size_t           cnt    = s->count;
    size_t           chunk0 = hc_compress_chunk_len(s, 0); /* the longest chunk */

    s->codec->size(&s->cfg, cnt, s->nranks, &z);
    s->k          = z.k;
    s->msg_bytes  = z.msg_bytes;
    s->worker_res = calloc(cnt ? cnt : 1, sizeof(float));
    s->work       = malloc((cnt ? cnt : 1) * sizeof(float));
    s->server_res = calloc(chunk0 ? chunk0 : 1, sizeof(float));
    s->avg        = malloc((chunk0 ? chunk0 : 1) * sizeof(float));
    s->sendbuf    = calloc(1, z.send_bytes ? z.send_bytes : 1); /* short chunks' slack goes out */
    s->recvbuf    = malloc(z.recv_bytes ? z.recv_bytes : 1);
    s->scratch    = malloc(z.scratch_bytes ? z.scratch_bytes : 1);
    if (!s->worker_res || !s->work || !s->server_res || !s->avg || !s->sendbuf || !s->recvbuf ||
        !s->scratch) {
        hc_error(COMPRESS, "compression state for %zu elements: out of memory", cnt);
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
        hc_error(COMPRESS, "hcomm_compress_create: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    int nranks = hc_comm_nranks(comm);
    if (config == NULL || state == NULL || (unsigned)config->kind >= HCOMM_COMPRESS_COUNT ||
        (config->kind == HCOMM_COMPRESS_TOPK && !(config->ratio > 0 && config->ratio <= 1))) {
        hc_error(COMPRESS, "hcomm_compress_create: NULL argument, unknown kind or topk ratio "
                       "outside (0, 1]");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (dtype != HCOMM_FLOAT32 && dtype != HCOMM_FLOAT16 && dtype != HCOMM_BFLOAT16) {
        hc_error(COMPRESS,
                 "hcomm_compress_create: %s: compression takes float32, float16 or "
                 "bfloat16",
                 hcomm_dtype_name(dtype) ? hcomm_dtype_name(dtype) : "invalid dtype");
        return HCOMM_ERR_INVALID_DTYPE;
    }
    if (count > SIZE_MAX / 2 / sizeof(hc_topk_pair_t) / (size_t)nranks) {
        hc_error(COMPRESS, "hcomm_compress_create: %zu elements overflow", count);
        return HCOMM_ERR_OVERFLOW;
    }
    if (config->kind == HCOMM_COMPRESS_TOPK && count > UINT32_MAX) {
        /* a top-k pair's index is 32 bits: every encode would fail */
        hc_error(COMPRESS, "hcomm_compress_create: top-k takes at most %u elements, not %zu",
                 UINT32_MAX, count);
        return HCOMM_ERR_OVERFLOW;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        hc_error(COMPRESS, "hcomm_compress_create: out of memory");
        return HCOMM_ERR_NO_MEMORY;
    }
    *s = (struct hcomm_compress){.comm        = comm,
                                 .comm_serial = hc_comm_serial(comm),
                                 .cfg         = *config,
                                 .codec       = hc_codec_of(config->kind),
                                 .count       = count,
                                 .dtype       = dtype,
                                 .nranks      = nranks,
                                 .rank        = hc_comm_rank(comm),
                                 .refs        = 1};
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
        hc_error(COMPRESS, "hcomm_compress_reset: NULL state");
        return HCOMM_ERR_INVALID_ARG;
    }
    memset(s->worker_res, 0, (s->count ? s->count : 1) * sizeof(float));
    memset(s->server_res, 0, (hc_compress_chunk_len(s, 0) ? hc_compress_chunk_len(s, 0) : 1) *
                                 sizeof(float));
    return HCOMM_SUCCESS;
}

void hc_compress_unref(struct hcomm_compress *s)
{
    if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
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

void hcomm_compress_destroy(hcomm_compress_t s)
{
    if (s != NULL)
        hc_compress_unref(s); /* the creator's: calls still queued hold theirs */
}

static hcomm_status_t compress_check(const void *sendbuf, void *recvbuf, size_t count,
                                     hcomm_dtype_t dtype, hcomm_compress_t s, hcomm_comm_t comm,
                                     hcomm_stream_t stream)
{
    hcomm_status_t st = hc_comm_check(comm, "hcomm_allreduce_compressed");
    if (st != HCOMM_SUCCESS)
        return st;
    int other = s != NULL && (s->comm != comm || s->comm_serial != hc_comm_serial(comm));
    if (s == NULL || other || s->count != count || s->dtype != dtype) {
        hc_error(COMPRESS,
                 "hcomm_allreduce_compressed: %s (state for %zu x %s, call with %zu x %s)",
                 s == NULL ? "NULL state"
                 : other   ? "state of another communicator"
                           : "state made for another tensor",
                 s ? s->count : 0, s ? hcomm_dtype_name(s->dtype) : "-", count,
                 hcomm_dtype_name(dtype) ? hcomm_dtype_name(dtype) : "invalid");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (count != 0 && (sendbuf == NULL || recvbuf == NULL)) {
        hc_error(COMPRESS, "hcomm_allreduce_compressed: NULL buffer with %zu elements", count);
        return HCOMM_ERR_NULL_BUFFER;
    }
    size_t bytes = count * hcomm_dtype_size(dtype); /* fits: the state holds as much */
    if (sendbuf != recvbuf && hc_extents_overlap(sendbuf, bytes, recvbuf, bytes)) {
        hc_error(COMPRESS,
                 "hcomm_allreduce_compressed: sendbuf %p and recvbuf %p (%zu bytes each) overlap "
                 "without being the same buffer; pass disjoint buffers or in-place ones",
                 sendbuf, (void *)recvbuf, bytes);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (stream != NULL && hc_stream_check(stream, "hcomm_allreduce_compressed") != 0)
        return HCOMM_ERR_INVALID_ARG;
    if (hc_group_active()) {
        hc_group_refuse(HCOMM_ERR_INVALID_USAGE, "hcomm_allreduce_compressed");
        hc_error(COMPRESS, "hcomm_allreduce_compressed: not allowed inside a group");
        return HCOMM_ERR_INVALID_USAGE;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count,
                                          hcomm_dtype_t dtype, hcomm_compress_t s,
                                          hcomm_comm_t comm, hcomm_stream_t stream)
{
    hcomm_status_t st = compress_check(sendbuf, recvbuf, count, dtype, s, comm, stream);

    if (st != HCOMM_SUCCESS || count == 0)
        return st;
    if ((st = hc_mem_host_only("hcomm_allreduce_compressed", sendbuf, count)) != HCOMM_SUCCESS ||
        (st = hc_mem_host_only("hcomm_allreduce_compressed", recvbuf, count)) != HCOMM_SUCCESS)
        return st;
    return hc_compress_run(s, sendbuf, recvbuf, stream);
}
