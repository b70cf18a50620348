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

/* A host block of at least size bytes for c (its spare when that is large
 * enough) into s, pinned where it copies to or from CUDA memory. */
static int stage_block(struct hcomm_comm *c, hc_stage_t *s, size_t size, hc_mem_kind_t kind)
{
    if (c->stage_spare != NULL && c->stage_spare_size >= size) {
        s->host = c->stage_spare, s->size = c->stage_spare_size, s->pinned = c->stage_spare_pinned;
        c->stage_spare = NULL;
    } else {
        s->size = (size + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
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

hcomm_status_t hc_stage_begin_kinds(struct hcomm_comm *c, const hc_coll_args_t *a,
                                    const void **sendbuf, void **recvbuf, hc_stage_t **out)
{
    size_t sb, rb;
    *out = NULL;
    if (a->coll == HC_COLL_ALLTOALLV) /* its extents are the counts' */
        return hc_mem_host_only("hcomm_alltoallv", *sendbuf, 1) == HCOMM_SUCCESS
                   ? hc_mem_host_only("hcomm_alltoallv", *recvbuf, 1)
                   : HCOMM_ERR_UNSUPPORTED;
    stage_extents(a, c->rank, c->nranks, &sb, &rb);
    int ds = sb != 0 && hc_mem_kind(*sendbuf) != HC_MEM_HOST;
    int dr = rb != 0 && hc_mem_kind(*recvbuf) != HC_MEM_HOST;
    if (!ds && !dr)
        return HCOMM_SUCCESS;

    hc_stage_t *s = calloc(1, sizeof(*s));
    if (s != NULL)
        s->user_send = *sendbuf, s->user_recv = *recvbuf;
    /* in place, as each call defines it: the buffers overlap, and their
     * union goes in whole */
    const char *o = NULL, *sp = *sendbuf, *rp = *recvbuf;
    size_t      olen = 0;
    if (ds && dr && hc_extents_overlap(sp, sb, rp, rb)) {
        o    = sp < rp ? sp : rp;
        olen = (size_t)((sp + sb > rp + rb ? sp + sb : rp + rb) - o);
    }
    size_t        len  = o != NULL ? olen : (ds ? sb : 0) + (dr ? rb : 0);
    hc_mem_kind_t kind = hc_mem_kind(ds ? *sendbuf : *recvbuf);
    if (s == NULL || stage_block(c, s, len, kind) != 0) {
        hc_error(COLL, "out of memory for %zu bytes of host copies of %s buffers", len,
                 hc_mem_kind_name(kind));
        free(s);
        return HCOMM_ERR_NO_MEMORY;
    }
    if (o != NULL) {
        s->dev_in = o, s->host_in = s->host, s->in_bytes = olen;
        s->dev_out = *recvbuf, s->out_bytes = rb;
        s->host_out = s->host + (rp - o);
        *sendbuf    = s->host + (sp - o);
        *recvbuf    = (void *)s->host_out;
    } else {
        if (ds) {
            s->dev_in = *sendbuf, s->host_in = s->host, s->in_bytes = sb;
            *sendbuf = s->host;
        }
        if (dr) {
            s->dev_out = *recvbuf, s->out_bytes = rb;
            s->host_out = s->host + (ds ? sb : 0);
            *recvbuf    = (void *)s->host_out;
        }
    }
    *out = s;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_stage_in_next(hc_stage_t *s)
{
    size_t n =
        s->in_bytes - s->in_done < HC_STAGE_CHUNK ? s->in_bytes - s->in_done : HC_STAGE_CHUNK;
    if (n == 0)
        return HCOMM_SUCCESS;
    hcomm_status_t st =
        hc_mem_copy(s->host_in + s->in_done, (const char *)s->dev_in + s->in_done, n);
    if (st == HCOMM_SUCCESS)
        s->in_done += n;
    return st;
}

hcomm_status_t hc_stage_out(const hc_stage_t *s)
{
    return s->dev_out != NULL ? hc_mem_copy(s->dev_out, s->host_out, s->out_bytes) : HCOMM_SUCCESS;
}

void hc_stage_free(struct hcomm_comm *c, hc_stage_t *s)
{
    if (s == NULL)
        return;
    if (c != NULL && (c->stage_spare == NULL || c->stage_spare_size < s->size)) {
        stage_block_free(c->stage_spare, c->stage_spare_pinned);
        c->stage_spare        = s->host;
        c->stage_spare_size   = s->size;
        c->stage_spare_pinned = s->pinned;
    } else {
        stage_block_free(s->host, s->pinned);
    }
    free(s);
}

void hc_stage_spare_free(struct hcomm_comm *c)
{
    stage_block_free(c->stage_spare, c->stage_spare_pinned);
    c->stage_spare = NULL;
}
