/* compress_allreduce.c - the compressed allreduces: codecs (codec.h) around
 * the ordinary collectives, so they ride every transport and plan unchanged.
 * Each returns the average of the ranks' compensated inputs; every rank
 * decodes the same messages in the same order, so all get the same bits.
 * in may equal out: each reads all of in before it writes out. */
#include <string.h>

#include "compress/compress.h"
#include "core/log.h"

/* 1-bit Adam's two phases: every rank compresses its whole tensor (worker
 * error feedback) and sends chunk j to rank j; rank j averages the n versions
 * of its chunk, compresses the average again (server error feedback) and the
 * ranks allgather those; all decode. Each phase moves 1/32 of the floats. */
static hcomm_status_t onebit_allreduce(struct hcomm_compress *s, const float *in, float *out)
{
    uint8_t       *snd = s->sendbuf, *rcv = s->recvbuf;
    size_t         slot = s->slot, mine = hc_compress_chunk_len(s, s->rank);
    int            n    = s->nranks;
    hcomm_status_t st;

    for (int j = 0; j < n; j++) {
        size_t off = hc_compress_chunk_off(s, j);
        hc_onebit_encode(in + off, s->worker_res + off, hc_compress_chunk_len(s, j),
                         snd + (size_t)j * slot);
    }
    st = hcomm_alltoall(snd, rcv, slot, HCOMM_UINT8, s->comm, NULL);
    if (st != HCOMM_SUCCESS)
        return st;
    for (int i = 0; i < n; i++)
        hc_onebit_decode(rcv + (size_t)i * slot, mine, s->avg, i != 0);
    for (size_t x = 0; x < mine; x++)
        s->avg[x] /= (float)n;
    hc_onebit_encode(s->avg, s->server_res, mine, snd);
    st = hcomm_allgather(snd, rcv, slot, HCOMM_UINT8, s->comm, NULL);
    if (st != HCOMM_SUCCESS)
        return st;
    for (int j = 0; j < n; j++)
        hc_onebit_decode(rcv + (size_t)j * slot, hc_compress_chunk_len(s, j),
                         out + hc_compress_chunk_off(s, j), 0);
    return HCOMM_SUCCESS;
}

/* Sparse allgather: every rank's k (index, value) pairs reach every rank,
 * which adds them up in rank order. (n - 1) k pairs arrive per rank; a sparse
 * reduce-scatter would move fewer only when the ranks' indexes overlap much,
 * which error feedback works against. */
static hcomm_status_t topk_allreduce(struct hcomm_compress *s, const float *in, float *out)
{
    hc_topk_pair_t *mine = s->sendbuf, *all = s->recvbuf;
    size_t          k = s->k, bad = 0;
    hcomm_status_t  st;

    if (hc_topk_encode(in, s->worker_res, s->count, k, s->scratch, mine) != 0) {
        hc_error(COLL, "topk: k %zu > %zu elements", k, s->count);
        return HCOMM_ERR_INVALID_ARG;
    }
    st = hcomm_allgather(mine, all, k * sizeof(*mine), HCOMM_UINT8, s->comm, NULL);
    if (st != HCOMM_SUCCESS)
        return st;
    memset(out, 0, s->count * sizeof(*out));
    for (int r = 0; r < s->nranks; r++)
        bad += hc_topk_decode_add(all + (size_t)r * k, k, out, s->count);
    if (bad != 0) {
        hc_error(COLL, "topk: %zu received indexes out of range (%zu elements)", bad, s->count);
        return HCOMM_ERR_PROTOCOL;
    }
    for (size_t x = 0; x < s->count; x++)
        out[x] /= (float)s->nranks;
    return HCOMM_SUCCESS;
}

/* float16 / bfloat16 on the ordinary allreduce (summed in half precision as
 * NCCL users do), averaged after decoding. */
static hcomm_status_t cast_allreduce(struct hcomm_compress *s, const float *in, float *out)
{
    int            half = s->cfg.kind == HCOMM_COMPRESS_FP16;
    uint16_t      *msg  = s->sendbuf;
    hcomm_status_t st;

    hc_cast_encode(in, s->worker_res, s->count, half, msg);
    st = hcomm_allreduce(msg, msg, s->count, half ? HCOMM_FLOAT16 : HCOMM_BFLOAT16, HCOMM_SUM,
                         s->comm, NULL);
    if (st != HCOMM_SUCCESS)
        return st;
    hc_cast_decode(msg, s->count, half, out, 0);
    for (size_t x = 0; x < s->count; x++)
        out[x] /= (float)s->nranks;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_compress_allreduce_f32(struct hcomm_compress *s, const float *in, float *out)
{
    switch (s->cfg.kind) {
    case HCOMM_COMPRESS_ONEBIT: return onebit_allreduce(s, in, out);
    case HCOMM_COMPRESS_TOPK: return topk_allreduce(s, in, out);
    case HCOMM_COMPRESS_FP16:
    case HCOMM_COMPRESS_BF16: return cast_allreduce(s, in, out);
    default:
        return hcomm_allreduce(in, out, s->count, HCOMM_FLOAT32, HCOMM_AVG, s->comm, NULL);
    }
}
