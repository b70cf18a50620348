/* stage.c - host copies of the buffers of other memory kinds (stage.h). */
#include "core/stage.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/dtype.h"
#include "base/extent.h"
#include "base/log.h"
#include "core/comm.h"
#include "device/device.h"

#define STAGE_ALIGN 64

/* The bytes of its send and receive buffers a call of coll reads and writes
 * on rank; 0 where the rank does not use that buffer. */
static void stage_extents(const hc_coll_args_t *a, int rank, int nranks, size_t *sb, size_t *rb)
{
    size_t b = a->count * hc_dtype_size(a->dtype), all = b * (size_t)nranks;
    *sb = *rb = 0;
    switch (a->coll) {
    case HC_COLL_ALLREDUCE:
        *sb = *rb = b;
        break;
    case HC_COLL_BROADCAST:
        *sb = rank == a->root ? b : 0, *rb = b;
        break;
    case HC_COLL_REDUCE:
        *sb = b, *rb = rank == a->root ? b : 0;
        break;
    case HC_COLL_ALLGATHER:
        *sb = b, *rb = all;
        break;
    case HC_COLL_REDUCE_SCATTER:
        *sb = all, *rb = b;
        break;
    case HC_COLL_ALLTOALL:
        *sb = *rb = all;
        break;
    case HC_COLL_SEND:
        *sb = b;
        break;
    case HC_COLL_RECV:
        *rb = b;
        break;
    default:
        break;
    }
}

/* Pinned blocks are sized in powers of two: they are unpinned only when the
 * communicator goes (stage_retire), so the ones a growing size gives up add
 * up to less than the largest. */
static size_t stage_pinned_size(size_t size)
{
    size_t p = (size_t)1 << 20;
    while (p < size && p < ((size_t)1 << 62))
        p <<= 1;
    return p < size ? size : p;
}

/* A host block of at least size bytes for c (its spare when that is large
 * enough) into s, pinned where it copies to or from CUDA memory. */
static int stage_block(struct hcomm_comm *c, hc_stage_t *s, size_t size, hc_mem_kind_t kind)
{
    if (c->stage_spare != NULL && c->stage_spare_size >= size) {
        s->host = c->stage_spare, s->size = c->stage_spare_size, s->pinned = c->stage_spare_pinned;
        c->stage_spare = NULL;
    } else {
        s->size = kind == HC_MEM_CUDA ? stage_pinned_size(size)
                                      : (size + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
        if ((s->host = aligned_alloc(STAGE_ALIGN, s->size)) == NULL)
            return -1;
    }
    if (kind == HC_MEM_CUDA && !s->pinned)
        s->pinned = hc_mem_host_pin(s->host, s->size);
    return 0;
}

/* Frees a host block, unpinned first. */
static void stage_block_free(char *p, int pinned)
{
    if (p != NULL && pinned)
        hc_mem_host_unpin(p);
    free(p);
}

/* Gives a block up: a pinned one waits for the communicator's end, since
 * unpinning (cudaHostUnregister) waits for the device, and a CUDA stream may
 * be held in a host function that waits for this communicator (overlap/
 * stream.c): nccl-tests hung so on a GPU. Kept in a list through the blocks. */
static void stage_retire(struct hcomm_comm *c, char *p, int pinned)
{
    if (p != NULL && pinned) {
        *(void **)p      = c->stage_retired;
        c->stage_retired = p;
    } else {
        free(p);
    }
}

/* One call's part of a stage: what of its buffers is copied in (from in,
 * in_len bytes) and out, and where its buffers lie in those copies. */
typedef struct {
    const char *in; /* NULL: nothing in */
    char       *dev_recv;
    size_t      in_len, send_off, recv_off;
    size_t      rb;         /* receive bytes copied out; 0: none */
    int         recv_in_in; /* in place: the receive buffer lies in the in part */
} stage_plan_t;

static size_t stage_round(size_t n)
{
    return (n + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
}

/* Plans call a's part; its kind into *kind where not host. Returns
 * HCOMM_ERR_UNSUPPORTED (logged) for an alltoallv of other kinds. */
static hcomm_status_t stage_plan(const struct hcomm_comm *c, const hc_coll_args_t *a,
                                 const void *sendbuf, const void *recvbuf, stage_plan_t *p,
                                 hc_mem_kind_t *kind)
{
    size_t sb, rb;
    *p = (stage_plan_t){0};
    if (a->coll == HC_COLL_ALLTOALLV) /* its extents are the counts' */
        return hc_mem_host_only("hcomm_alltoallv", sendbuf, 1) == HCOMM_SUCCESS
                   ? hc_mem_host_only("hcomm_alltoallv", recvbuf, 1)
                   : HCOMM_ERR_UNSUPPORTED;
    stage_extents(a, c->rank, c->nranks, &sb, &rb);
    hc_mem_kind_t ks = sb != 0 ? hc_mem_kind(sendbuf) : HC_MEM_HOST;
    hc_mem_kind_t kr = rb != 0 ? hc_mem_kind(recvbuf) : HC_MEM_HOST;
    const char   *sp = sendbuf, *rp = recvbuf;
    if (ks != HC_MEM_HOST)
        *kind = ks;
    else if (kr != HC_MEM_HOST)
        *kind = kr;
    /* in place, as each call defines it: the buffers overlap, and their
     * union goes in whole */
    if (ks != HC_MEM_HOST && kr != HC_MEM_HOST && hc_extents_overlap(sp, sb, rp, rb)) {
        p->in       = sp < rp ? sp : rp;
        p->in_len   = (size_t)((sp + sb > rp + rb ? sp + sb : rp + rb) - p->in);
        p->send_off = (size_t)(sp - p->in), p->recv_off = (size_t)(rp - p->in);
        p->recv_in_in = 1, p->rb = rb, p->dev_recv = (char *)recvbuf;
        return HCOMM_SUCCESS;
    }
    if (ks != HC_MEM_HOST)
        p->in = sp, p->in_len = sb;
    if (kr != HC_MEM_HOST)
        p->rb = rb, p->dev_recv = (char *)recvbuf;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_stage_begin_calls(struct hcomm_comm *c, size_t n,
                                    const hc_coll_args_t *const *args, const void **sendbufs,
                                    void **recvbufs, hc_stage_t **out)
{
    stage_plan_t  one, *plans = n == 1 ? &one : calloc(n, sizeof(*plans));
    hc_mem_kind_t kind     = HC_MEM_HOST;
    size_t        in_total = 0, out_total = 0;
    int           nin = 0, nout = 0;
    *out              = NULL;
    hcomm_status_t st = plans != NULL ? HCOMM_SUCCESS : HCOMM_ERR_NO_MEMORY;
    for (size_t i = 0; i < n && st == HCOMM_SUCCESS; i++) {
        st = stage_plan(c, args[i], sendbufs[i], recvbufs[i], &plans[i], &kind);
        nin += plans[i].in != NULL;
        nout += plans[i].rb != 0;
        in_total += plans[i].in != NULL ? stage_round(plans[i].in_len) : 0;
        out_total += plans[i].rb != 0 && !plans[i].recv_in_in ? stage_round(plans[i].rb) : 0;
    }
    hc_stage_t *s = NULL;
    if (st == HCOMM_SUCCESS && nin + nout > 0) {
        s = calloc(1, sizeof(*s) + (size_t)(nin + nout) * sizeof(s->seg[0]));
        if (s == NULL || stage_block(c, s, in_total + out_total, kind) != 0) {
            hc_error(COLL, "out of memory for %zu bytes of host copies of %s buffers",
                     in_total + out_total, hc_mem_kind_name(kind));
            free(s);
            s  = NULL;
            st = HCOMM_ERR_NO_MEMORY;
        }
    }
    if (s != NULL) {
        s->in = s->seg, s->out = s->seg + nin, s->host_in = s->host;
        s->user_send = n == 1 ? sendbufs[0] : NULL, s->user_recv = n == 1 ? recvbufs[0] : NULL;
        size_t in_at = 0, out_at = in_total;
        for (size_t i = 0; i < n; i++) {
            stage_plan_t *p = &plans[i];
            if (p->in != NULL) {
                char *h         = s->host + in_at;
                s->in[s->nin++] = (hc_stage_seg_t){(char *)p->in, h, p->in_len};
                s->in_bytes     = in_at + p->in_len;
                sendbufs[i]     = h + p->send_off;
                in_at += stage_round(p->in_len);
                if (p->recv_in_in)
                    recvbufs[i] = h + p->recv_off;
            }
            if (p->rb != 0 && !p->recv_in_in) {
                recvbufs[i] = s->host + out_at;
                out_at += stage_round(p->rb);
            }
            if (p->rb != 0)
                s->out[s->nout++] = (hc_stage_seg_t){p->dev_recv, recvbufs[i], p->rb};
        }
    }
    if (plans != &one)
        free(plans);
    *out = s;
    return st;
}

/* Past segment i of the input: to the next one's start (over the alignment
 * gap), or the end. */
static void stage_in_seg_done(hc_stage_t *s, int i)
{
    s->in_done = i + 1 < s->nin ? (size_t)(s->in[i + 1].host - s->host_in) : s->in_bytes;
}

hcomm_status_t hc_stage_in_next(hc_stage_t *s)
{
    for (int i = 0; i < s->nin; i++) { /* the segment in_done lies in */
        hc_stage_seg_t *g   = &s->in[i];
        size_t          off = (size_t)(s->host_in + s->in_done - g->host);
        if (s->host_in + s->in_done < g->host || off >= g->bytes)
            continue;
        size_t         n  = g->bytes - off < HC_STAGE_CHUNK ? g->bytes - off : HC_STAGE_CHUNK;
        hcomm_status_t st = hc_mem_copy(g->host + off, g->dev + off, n);
        if (st != HCOMM_SUCCESS)
            return st;
        s->in_done += n;
        if (off + n == g->bytes)
            stage_in_seg_done(s, i);
        return HCOMM_SUCCESS;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_stage_out(const hc_stage_t *s)
{
    hcomm_status_t st = HCOMM_SUCCESS;
    for (int i = 0; i < s->nout && st == HCOMM_SUCCESS; i++)
        st = hc_mem_copy(s->out[i].dev, s->out[i].host, s->out[i].bytes);
    return st;
}

void hc_stage_free(struct hcomm_comm *c, hc_stage_t *s)
{
    if (s == NULL)
        return;
    if (c == NULL) {
        stage_block_free(s->host, s->pinned);
    } else if (c->stage_spare == NULL || c->stage_spare_size < s->size) {
        stage_retire(c, c->stage_spare, c->stage_spare_pinned);
        c->stage_spare        = s->host;
        c->stage_spare_size   = s->size;
        c->stage_spare_pinned = s->pinned;
    } else {
        stage_retire(c, s->host, s->pinned);
    }
    free(s);
}

void hc_stage_spare_free(struct hcomm_comm *c)
{
    stage_block_free(c->stage_spare, c->stage_spare_pinned);
    c->stage_spare = NULL;
    while (c->stage_retired != NULL) {
        void *p          = c->stage_retired;
        c->stage_retired = *(void **)p;
        stage_block_free(p, 1);
    }
}
