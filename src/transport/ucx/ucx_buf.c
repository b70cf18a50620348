/* ucx_buf.c - bounce buffers for the ucx transport's sink receives: UCX
 * receives the whole message there, the sink then reduces out of it. Freed
 * buffers are kept, by power-of-two size, up to HC_UCX_BOUNCE_KEEP bytes: a
 * schedule posts many chunk receives at once, and fresh pages fault in the
 * middle of each copy. */
#include <stdlib.h>

#include "transport/ucx/ucx.h"

#define HDR_BYTES 64 /* keeps the data cache-line aligned */

typedef struct buf_hdr {
    size_t cap;
    void  *next; /* in a free list or the grave */
} buf_hdr_t;

static buf_hdr_t *hdr_of(void *buf)
{
    return (buf_hdr_t *)((uint8_t *)buf - HDR_BYTES);
}

/* The class of a buffer for len bytes: capacity 2^(class + HC_UCX_BOUNCE_MIN_SHIFT). */
static int class_of(size_t len)
{
    int c = 0;

    while (c < HC_UCX_BOUNCE_CLASSES - 1 && ((size_t)1 << (c + HC_UCX_BOUNCE_MIN_SHIFT)) < len)
        c++;
    return c;
}

void *hc_ucx_bounce_get(hc_tl_ctx_t *ctx, size_t len)
{
    hc_ucx_bounce_t *b = &ctx->bounce;
    int              c = class_of(len);
    size_t           cap;
    uint8_t         *p;

    if (b->free[c] != NULL && hdr_of(b->free[c])->cap >= len) {
        void *buf  = b->free[c];
        b->free[c] = hdr_of(buf)->next;
        b->kept -= hdr_of(buf)->cap;
        return buf;
    }
    /* the last class holds any size: exactly what is asked */
    cap = c < HC_UCX_BOUNCE_CLASSES - 1 ? (size_t)1 << (c + HC_UCX_BOUNCE_MIN_SHIFT) : len;
    if (cap > SIZE_MAX - 2 * HDR_BYTES)
        return NULL;
    p = aligned_alloc(HDR_BYTES, (cap + 2 * HDR_BYTES - 1) / HDR_BYTES * HDR_BYTES);
    if (p == NULL)
        return NULL;
    ((buf_hdr_t *)p)->cap = cap;
    return p + HDR_BYTES;
}

void hc_ucx_bounce_put(hc_tl_ctx_t *ctx, void *buf)
{
    hc_ucx_bounce_t *b = &ctx->bounce;
    buf_hdr_t       *h = hdr_of(buf);
    int              c = class_of(h->cap);

    if (b->kept + h->cap > HC_UCX_BOUNCE_KEEP) {
        free(h);
        return;
    }
    h->next    = b->free[c];
    b->free[c] = buf;
    b->kept += h->cap;
}

void hc_ucx_bounce_bury(hc_tl_ctx_t *ctx, void *buf)
{
    hdr_of(buf)->next = ctx->bounce.grave;
    ctx->bounce.grave = buf;
}

static void free_list(void **head)
{
    while (*head != NULL) {
        void *next = hdr_of(*head)->next;
        free(hdr_of(*head));
        *head = next;
    }
}

void hc_ucx_bounce_free_all(hc_tl_ctx_t *ctx)
{
    for (int c = 0; c < HC_UCX_BOUNCE_CLASSES; c++)
        free_list(&ctx->bounce.free[c]);
    free_list(&ctx->bounce.grave);
    ctx->bounce.kept = 0;
}
