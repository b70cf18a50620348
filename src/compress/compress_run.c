/* compress_run.c - runs a codec's program (codec_table.c): local steps and
 * collectives in turn. Blocking, they run on the caller's thread; on a stream,
 * the local steps become host functions and the collectives stream
 * operations, all queued now, so the collectives take their places in the
 * communicator's issue order at the call, as any other stream operation does.
 * The collectives are the public ones, so a compressed allreduce rides every
 * transport and plan unchanged (the codecs themselves never communicate). */
#include <stdlib.h>

#include "base/log.h"
#include "compress/compress.h"
#include "core/handles.h"
#include "overlap/overlap.h"

/* One collective step on the state's buffers (average: on the caller's). */
static hcomm_status_t run_coll(const hc_compress_call_t *c, hc_cstep_kind_t kind,
                               hcomm_stream_t stream)
{
    struct hcomm_compress *s = c->s;

    switch (kind) {
    case HC_CSTEP_ALLTOALL:
        return hcomm_alltoall(s->sendbuf, s->recvbuf, s->msg_bytes, HCOMM_UINT8, s->comm, stream);
    case HC_CSTEP_ALLGATHER:
        return hcomm_allgather(s->sendbuf, s->recvbuf, s->msg_bytes, HCOMM_UINT8, s->comm, stream);
    case HC_CSTEP_ALLREDUCE:
        return hcomm_allreduce(s->sendbuf, s->sendbuf, s->count, s->codec->wire_dtype, HCOMM_SUM,
                               s->comm, stream);
    default:
        return hcomm_allreduce(c->in, c->out, s->count, s->dtype, HCOMM_AVG, s->comm, stream);
    }
}

static void call_unref(hc_compress_call_t *c)
{
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        struct hcomm_compress *s = c->s;
        free(c);
        hc_compress_unref(s);
    }
}

/* A local step fails only on what the peers sent (topk's indexes out of
 * range): the ranks disagree, and their results may differ. That fails the
 * communicator: this rank's later calls (and a stream's caller, which returned
 * before the step ran) see it at once, the other ranks at their next
 * operation with this one; their own call may have succeeded. */
static hcomm_status_t run_local(hc_compress_call_t *c, const hc_cstep_t *p)
{
    hcomm_status_t st = p->fn(c);
    if (st != HCOMM_SUCCESS) {
        hc_error(COMPRESS,
                 "hcomm_allreduce_compressed: a local step failed (%s): the ranks "
                 "disagree; failing the communicator",
                 hcomm_status_name(st));
        hc_comm_set_failed(c->s->comm, st);
    }
    return st;
}

/* A local step on the stream's thread: the call's local steps run there in
 * program order, so the next one is the first local step after c->next. One
 * a CUDA stream never reached (skip) leaves the call's results wrong: it
 * fails the communicator, and the call's later steps do nothing. */
static hcomm_status_t stream_step(void *arg, int skip)
{
    hc_compress_call_t *c = arg;
    const hc_cstep_t   *p = c->next;
    hcomm_status_t      st;

    while (p->kind != HC_CSTEP_LOCAL)
        p++;
    c->next = p + 1;
    if (skip && c->failed == HCOMM_SUCCESS) {
        hc_error(COMPRESS, "hcomm_allreduce_compressed: a local step was skipped; failing the "
                           "communicator");
        hc_comm_set_failed(c->s->comm, HCOMM_ERR_TIMEOUT);
    }
    st = skip ? HCOMM_ERR_TIMEOUT : c->failed != HCOMM_SUCCESS ? c->failed : run_local(c, p);
    if (st != HCOMM_SUCCESS)
        c->failed = st;
    call_unref(c);
    return st;
}

/* Whether a collective is at p or after it. */
static int coll_ahead(const hc_cstep_t *p)
{
    for (; p->kind != HC_CSTEP_END; p++)
        if (p->kind != HC_CSTEP_LOCAL)
            return 1;
    return 0;
}

hcomm_status_t hc_compress_run(struct hcomm_compress *s, const void *in, void *out,
                               hcomm_stream_t stream)
{
    hc_compress_call_t     local = {s, in, out, NULL, 1, HCOMM_SUCCESS}, *c = &local;
    hcomm_status_t         st    = HCOMM_SUCCESS;
    const hc_cstep_t *p     = s->codec->steps;
    int                    colls = 0; /* collectives issued */

    if (stream != NULL && p->kind == HC_CSTEP_LOCAL) {
        c = malloc(sizeof(*c));
        if (c == NULL) {
            hc_error(COMPRESS, "hcomm_allreduce_compressed: out of memory");
            return HCOMM_ERR_NO_MEMORY;
        }
        *c      = local;
        c->next = p;
        __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED); /* dropped with the call's last */
    }
    for (; p->kind != HC_CSTEP_END; p++) {
        if (p->kind != HC_CSTEP_LOCAL) {
            st = run_coll(c, p->kind, stream);
            colls += st == HCOMM_SUCCESS;
        } else if (stream == NULL) {
            st = run_local(c, p);
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
    int ran_local = stream == NULL && p->kind == HC_CSTEP_LOCAL; /* run_local failed it */
    if (st != HCOMM_SUCCESS && !ran_local && colls > 0 && coll_ahead(p)) {
        hc_error(COMPRESS, "hcomm_allreduce_compressed: %s after %d of the call's collectives; "
                       "failing the communicator",
                 hcomm_status_name(st), colls);
        hc_comm_set_failed(s->comm, st);
    }
    if (c != &local)
        call_unref(c);
    return st;
}
