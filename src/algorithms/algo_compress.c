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
#include <stdlib.h>
#include <string.h>

#include "compress/compress.h"
#include "core/comm.h"
#include "base/log.h"
#include "base/reduce.h"
#include "overlap/overlap.h"

typedef enum { STEP_LOCAL, STEP_ALLTOALL, STEP_ALLGATHER, STEP_ALLREDUCE, STEP_END } step_kind_t;

typedef struct compress_step {
    step_kind_t kind;
    hcomm_status_t (*fn)(void *call); /* STEP_LOCAL */
} compress_step_t;

/* One call's buffers: the steps of a call queued on a stream run later, maybe
 * after the next call on the same state was issued. On a stream the context is
 * allocated before anything is queued and freed by whoever drops the last
 * reference: each queued local step holds one, the issuing call another, so a
 * call that could queue only some steps neither leaks it nor frees it early. */
typedef struct compress_call {
    struct hcomm_compress *s;
    const void            *in;
    void                  *out;
    const compress_step_t *next; /* stream: where the next local step is */
    int                    refs; /* stream: atomic */
} compress_call_t;

/* The float32 input: the caller's buffer, or float16/bfloat16 converted into
 * s->work (residuals are float32 anyway) by the codecs' vectorised cast,
 * which widens exactly as hc_half_to_float / hc_bf16_to_float do. */
static const float *input_f32(const compress_call_t *c)
{
    struct hcomm_compress *s = c->s;
    if (s->dtype == HCOMM_FLOAT32)
        return c->in;
    hc_cast_decode(c->in, s->count, s->dtype == HCOMM_FLOAT16, s->work, 0);
    return s->work;
}

/* Where the float32 result goes; output_done converts it for half tensors. */
static float *output_f32(const compress_call_t *c)
{
    return c->s->dtype == HCOMM_FLOAT32 ? c->out : c->s->work;
}

/* The last step of every call: converts half results. */
static hcomm_status_t output_done(compress_call_t *c, hcomm_status_t st)
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
static hcomm_status_t onebit_encode(void *arg)
{
    compress_call_t       *c  = arg;
    struct hcomm_compress *s  = c->s;
    const float           *in = input_f32(c);
    for (int j = 0; j < s->nranks; j++) {
        size_t off = hc_compress_chunk_off(s, j);
        hc_onebit_encode(in + off, s->worker_res + off, hc_compress_chunk_len(s, j),
                         (uint8_t *)s->sendbuf + (size_t)j * s->slot);
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t onebit_server(void *arg)
{
    struct hcomm_compress *s    = ((compress_call_t *)arg)->s;
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
    compress_call_t       *c   = arg;
    struct hcomm_compress *s   = c->s;
    float                 *out = output_f32(c);
    for (int j = 0; j < s->nranks; j++)
        hc_onebit_decode((uint8_t *)s->recvbuf + (size_t)j * s->slot, hc_compress_chunk_len(s, j),
                         out + hc_compress_chunk_off(s, j), 0);
    return output_done(c, HCOMM_SUCCESS);
}

/* ---- topk: a sparse allgather of every rank's k pairs, added up in rank
 * order. A sparse reduce-scatter would move fewer bytes only where the ranks'
 * indexes overlap much, which error feedback works against. ---- */
static hcomm_status_t topk_encode(void *arg)
{
    compress_call_t       *c = arg;
    struct hcomm_compress *s = c->s;
    if (hc_topk_encode(input_f32(c), s->worker_res, s->count, s->k, s->scratch, s->sendbuf) != 0) {
        hc_error(COLL, "topk: k %zu > %zu elements", s->k, s->count);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t topk_decode(void *arg)
{
    compress_call_t       *c   = arg;
    struct hcomm_compress *s   = c->s;
    float                 *out = output_f32(c);
    size_t                 bad = 0;
    memset(out, 0, s->count * sizeof(*out));
    for (int r = 0; r < s->nranks; r++)
        bad += hc_topk_decode_add((hc_topk_pair_t *)s->recvbuf + (size_t)r * s->k, s->k, out,
                                  s->count);
    if (bad != 0) {
        hc_error(COLL, "topk: %zu received indexes out of range (%zu elements)", bad, s->count);
        return output_done(c, HCOMM_ERR_PROTOCOL);
    }
    for (size_t x = 0; x < s->count; x++)
        out[x] /= (float)s->nranks;
    return output_done(c, HCOMM_SUCCESS);
}

/* ---- fp16 / bf16: the cast on the ordinary allreduce (summed in half
 * precision, as NCCL users do), averaged after decoding. ---- */
static hcomm_status_t cast_encode(void *arg)
{
    compress_call_t       *c = arg;
    struct hcomm_compress *s = c->s;
    hc_cast_encode(input_f32(c), s->worker_res, s->count, s->cfg.kind == HCOMM_COMPRESS_FP16,
                   s->sendbuf);
    return HCOMM_SUCCESS;
}

static hcomm_status_t cast_decode(void *arg)
{
    compress_call_t       *c   = arg;
    struct hcomm_compress *s   = c->s;
    float                 *out = output_f32(c);
    hc_cast_decode(s->sendbuf, s->count, s->cfg.kind == HCOMM_COMPRESS_FP16, out, 0);
    for (size_t x = 0; x < s->count; x++)
        out[x] /= (float)s->nranks;
    return output_done(c, HCOMM_SUCCESS);
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
static hcomm_status_t run_coll(const compress_call_t *c, step_kind_t kind, hcomm_stream_t stream)
{
    struct hcomm_compress *s    = c->s;
    int                    half = s->cfg.kind == HCOMM_COMPRESS_FP16;

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
            return hcomm_allreduce(c->in, c->out, s->count, s->dtype, HCOMM_AVG, s->comm, stream);
        return hcomm_allreduce(s->sendbuf, s->sendbuf, s->count,
                               half ? HCOMM_FLOAT16 : HCOMM_BFLOAT16, HCOMM_SUM, s->comm, stream);
    }
}

static void call_unref(compress_call_t *c)
{
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(c);
}

/* A local step on the stream's thread: the call's local steps run there in
 * program order, so the next one is the first local step after c->next. */
static hcomm_status_t stream_step(void *arg)
{
    compress_call_t       *c = arg;
    const compress_step_t *p = c->next;

    while (p->kind != STEP_LOCAL)
        p++;
    c->next           = p + 1;
    hcomm_status_t st = p->fn(c);
    call_unref(c);
    return st;
}

/* Whether a collective is at p or after it. */
static int coll_ahead(const compress_step_t *p)
{
    for (; p->kind != STEP_END; p++)
        if (p->kind != STEP_LOCAL)
            return 1;
    return 0;
}

hcomm_status_t hc_compress_run(struct hcomm_compress *s, const void *in, void *out,
                               hcomm_stream_t stream)
{
    compress_call_t        local = {s, in, out, NULL, 1}, *c = &local;
    hcomm_status_t         st    = HCOMM_SUCCESS;
    const compress_step_t *p     = steps_of(s->cfg.kind);
    int                    colls = 0; /* collectives issued */

    if (stream != NULL && p->kind == STEP_LOCAL) {
        c = malloc(sizeof(*c));
        if (c == NULL) {
            hc_error(COLL, "hcomm_allreduce_compressed: out of memory");
            return HCOMM_ERR_NO_MEMORY;
        }
        *c      = local;
        c->next = p;
    }
    for (; p->kind != STEP_END; p++) {
        if (p->kind != STEP_LOCAL) {
            st = run_coll(c, p->kind, stream);
            colls += st == HCOMM_SUCCESS;
        } else if (stream == NULL) {
            st = p->fn(c);
        } else {
            __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
            st = hc_stream_launch_step(stream, stream_step, c);
            if (st != HCOMM_SUCCESS)
                __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELAXED);
        }
        if (st != HCOMM_SUCCESS)
            break;
    }
    /* Part of the call's collectives issued and the rest not: the peers would
     * wait in the next one until HCOMM_TIMEOUT. Failing the communicator
     * closes its connections, so they get an error at once. */
    if (st != HCOMM_SUCCESS && colls > 0 && coll_ahead(p)) {
        hc_error(COLL, "hcomm_allreduce_compressed: %s after %d of the call's collectives; "
                       "failing the communicator",
                 hcomm_status_name(st), colls);
        hc_comm_lock(s->comm);
        hc_comm_fail(s->comm, st);
        hc_comm_unlock(s->comm);
    }
    if (c != &local)
        call_unref(c);
    return st;
}
