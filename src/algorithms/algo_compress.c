/* algo_compress.c - the compressed allreduces: codecs (src/compress/codec.h)
 * around the ordinary collectives, so they ride every transport and plan
 * unchanged (the codecs themselves never communicate).
 * Each returns the average of the ranks' compensated inputs; every rank
 * decodes the same messages in the same order, so all get the same bits.
 *
 * Each is a short program of steps: local ones (encode, decode) and
 * collectives on the state's message buffers. Blocking, they run in turn on
 * the caller's thread; on a stream, the local steps become host functions and
 * the collectives stream operations, all queued now, so the collectives take
 * their places in the communicator's issue order at the call, as any other
 * stream operation does. The input is read in full by the first step and the
 * output written by the last one, so in place works. */
#include <string.h>

#include "compress/compress.h"
#include "core/log.h"
#include "core/reduce.h"
#include "overlap/overlap.h"

typedef enum { STEP_LOCAL, STEP_ALLTOALL, STEP_ALLGATHER, STEP_ALLREDUCE, STEP_END } step_kind_t;

typedef struct compress_step {
    step_kind_t kind;
    hcomm_status_t (*fn)(void *state); /* STEP_LOCAL */
} compress_step_t;

/* The float32 input: the caller's buffer, or float16/bfloat16 converted into
 * s->work (residuals are float32 anyway). */
static const float *input_f32(struct hcomm_compress *s)
{
    if (s->dtype == HCOMM_FLOAT32)
        return s->in;
    const uint16_t *h = s->in;
    for (size_t i = 0; i < s->count; i++)
        s->work[i] = s->dtype == HCOMM_FLOAT16 ? hc_half_to_float(h[i]) : hc_bf16_to_float(h[i]);
    return s->work;
}

/* Where the float32 result goes; output_done converts it for half tensors. */
static float *output_f32(struct hcomm_compress *s)
{
    return s->dtype == HCOMM_FLOAT32 ? s->out : s->work;
}

static void output_done(struct hcomm_compress *s)
{
    uint16_t *h = s->out;
    if (s->dtype == HCOMM_FLOAT32)
        return;
    for (size_t i = 0; i < s->count; i++)
        h[i] = s->dtype == HCOMM_FLOAT16 ? hc_float_to_half(s->work[i])
                                         : hc_float_to_bf16(s->work[i]);
}

/* ---- onebit: 1-bit Adam's two phases. Every rank compresses its whole
 * tensor (worker error feedback) and sends chunk j to rank j; rank j averages
 * the n versions of its chunk, compresses the average again (server error
 * feedback) and the ranks allgather those; all decode. ---- */
static hcomm_status_t onebit_encode(void *arg)
{
    struct hcomm_compress *s  = arg;
    const float           *in = input_f32(s);
    for (int j = 0; j < s->nranks; j++) {
        size_t off = hc_compress_chunk_off(s, j);
        hc_onebit_encode(in + off, s->worker_res + off, hc_compress_chunk_len(s, j),
                         (uint8_t *)s->sendbuf + (size_t)j * s->slot);
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t onebit_server(void *arg)
{
    struct hcomm_compress *s    = arg;
    size_t                 mine = hc_compress_chunk_len(s, s->rank);
    for (int i = 0; i < s->nranks; i++)
        hc_onebit_decode((uint8_t *)s->recvbuf + (size_t)i * s->slot, mine, s->avg, i != 0);
    for (size_t x = 0; x < mine; x++)
        s->avg[x] /= (float)s->nranks;
    hc_onebit_encode(s->avg, s->server_res, mine, s->sendbuf);
    return HCOMM_SUCCESS;
}

static hcomm_status_t onebit_decode(void *arg)
{
    struct hcomm_compress *s   = arg;
    float                 *out = output_f32(s);
    for (int j = 0; j < s->nranks; j++)
        hc_onebit_decode((uint8_t *)s->recvbuf + (size_t)j * s->slot, hc_compress_chunk_len(s, j),
                         out + hc_compress_chunk_off(s, j), 0);
    output_done(s);
    return HCOMM_SUCCESS;
}

/* ---- topk: a sparse allgather of every rank's k pairs, added up in rank
 * order. A sparse reduce-scatter would move fewer bytes only where the ranks'
 * indexes overlap much, which error feedback works against. ---- */
static hcomm_status_t topk_encode(void *arg)
{
    struct hcomm_compress *s = arg;
    if (hc_topk_encode(input_f32(s), s->worker_res, s->count, s->k, s->scratch, s->sendbuf) != 0) {
        hc_error(COLL, "topk: k %zu > %zu elements", s->k, s->count);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t topk_decode(void *arg)
{
    struct hcomm_compress *s   = arg;
    float                 *out = output_f32(s);
    size_t                 bad = 0;
    memset(out, 0, s->count * sizeof(*out));
    for (int r = 0; r < s->nranks; r++)
        bad += hc_topk_decode_add((hc_topk_pair_t *)s->recvbuf + (size_t)r * s->k, s->k, out,
                                  s->count);
    if (bad != 0) {
        hc_error(COLL, "topk: %zu received indexes out of range (%zu elements)", bad, s->count);
        return HCOMM_ERR_PROTOCOL;
    }
    for (size_t x = 0; x < s->count; x++)
        out[x] /= (float)s->nranks;
    output_done(s);
    return HCOMM_SUCCESS;
}

/* ---- fp16 / bf16: the cast on the ordinary allreduce (summed in half
 * precision, as NCCL users do), averaged after decoding. ---- */
static hcomm_status_t cast_encode(void *arg)
{
    struct hcomm_compress *s = arg;
    hc_cast_encode(input_f32(s), s->worker_res, s->count, s->cfg.kind == HCOMM_COMPRESS_FP16,
                   s->sendbuf);
    return HCOMM_SUCCESS;
}

static hcomm_status_t cast_decode(void *arg)
{
    struct hcomm_compress *s   = arg;
    float                 *out = output_f32(s);
    hc_cast_decode(s->sendbuf, s->count, s->cfg.kind == HCOMM_COMPRESS_FP16, out, 0);
    for (size_t x = 0; x < s->count; x++)
        out[x] /= (float)s->nranks;
    output_done(s);
    return HCOMM_SUCCESS;
}

static const compress_step_t onebit_steps[] = {
    {STEP_LOCAL, onebit_encode}, {STEP_ALLTOALL, NULL},      {STEP_LOCAL, onebit_server},
    {STEP_ALLGATHER, NULL},      {STEP_LOCAL, onebit_decode}, {STEP_END, NULL}};
static const compress_step_t topk_steps[] = {
    {STEP_LOCAL, topk_encode}, {STEP_ALLGATHER, NULL}, {STEP_LOCAL, topk_decode}, {STEP_END, NULL}};
static const compress_step_t cast_steps[] = {
    {STEP_LOCAL, cast_encode}, {STEP_ALLREDUCE, NULL}, {STEP_LOCAL, cast_decode}, {STEP_END, NULL}};
static const compress_step_t none_steps[] = {{STEP_ALLREDUCE, NULL}, {STEP_END, NULL}};

static const compress_step_t *steps_of(hcomm_compress_kind_t kind)
{
    switch (kind) {
    case HCOMM_COMPRESS_ONEBIT: return onebit_steps;
    case HCOMM_COMPRESS_TOPK: return topk_steps;
    case HCOMM_COMPRESS_FP16:
    case HCOMM_COMPRESS_BF16: return cast_steps;
    default: return none_steps;
    }
}

/* One collective step on the state's buffers (none: the caller's, averaged). */
static hcomm_status_t run_coll(struct hcomm_compress *s, step_kind_t kind, hcomm_stream_t stream)
{
    int half = s->cfg.kind == HCOMM_COMPRESS_FP16;

    switch (kind) {
    case STEP_ALLTOALL:
        return hcomm_alltoall(s->sendbuf, s->recvbuf, s->slot, HCOMM_UINT8, s->comm, stream);
    case STEP_ALLGATHER:
        return hcomm_allgather(s->sendbuf, s->recvbuf,
                               s->cfg.kind == HCOMM_COMPRESS_TOPK ? s->k * sizeof(hc_topk_pair_t)
                                                                  : s->slot,
                               HCOMM_UINT8, s->comm, stream);
    default:
        if (s->cfg.kind == HCOMM_COMPRESS_NONE)
            return hcomm_allreduce(s->in, s->out, s->count, s->dtype, HCOMM_AVG, s->comm, stream);
        return hcomm_allreduce(s->sendbuf, s->sendbuf, s->count,
                               half ? HCOMM_FLOAT16 : HCOMM_BFLOAT16, HCOMM_SUM, s->comm, stream);
    }
}

hcomm_status_t hc_compress_run(struct hcomm_compress *s, const void *in, void *out,
                               hcomm_stream_t stream)
{
    hcomm_status_t st = HCOMM_SUCCESS;

    s->in  = in;
    s->out = out;
    for (const compress_step_t *p = steps_of(s->cfg.kind); p->kind != STEP_END; p++) {
        if (p->kind != STEP_LOCAL)
            st = run_coll(s, p->kind, stream);
        else if (stream == NULL)
            st = p->fn(s);
        else
            st = hc_stream_launch_step(stream, p->fn, s);
        if (st != HCOMM_SUCCESS)
            return st;
    }
    return HCOMM_SUCCESS;
}
