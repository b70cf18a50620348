/* shm_ring.c - the parts of the SPSC ring that need not be inline. */
#include "transport/shm/shm_ring.h"

#include <string.h>

#define HC_SHM_RING_MIN ((uint64_t)64 << 10)
#define HC_SHM_RING_MAX ((uint64_t)1 << 30)
#define HC_SHM_PAGE 4096u /* a touch per 4 KiB is one per page on any page size */

uint64_t hc_shm_ring_size(size_t want)
{
    uint64_t size = HC_SHM_RING_MIN;
    while (size < want && size < HC_SHM_RING_MAX)
        size <<= 1;
    return size;
}

void hc_shm_ring_attach(hc_shm_ring_t *r, hc_shm_ring_ctl_t *ctl, uint8_t *data, uint64_t size,
                        uint64_t key, int producer)
{
    r->ctl  = ctl;
    r->data = data;
    r->size = size;
    r->mask = size - 1;
    r->cold     = 0;
    r->key      = key;
    r->producer = producer;
    if (producer) {
        r->pos  = atomic_load_explicit(&ctl->head, memory_order_relaxed);
        r->peer = atomic_load_explicit(&ctl->tail, memory_order_acquire);
    } else {
        r->pos  = atomic_load_explicit(&ctl->tail, memory_order_relaxed);
        r->peer = atomic_load_explicit(&ctl->head, memory_order_acquire);
    }
}

void hc_shm_ring_write(hc_shm_ring_t *r, const void *src, size_t n)
{
    uint64_t off   = r->pos & r->mask;
    uint64_t first = r->size - off;
    if (__builtin_expect(off + n > r->cold, 0))
        hc_shm_ring_warm(r, r->size);
    if (first >= n) {
        memcpy(r->data + off, src, n);
    } else {
        memcpy(r->data + off, src, first);
        memcpy(r->data, (const uint8_t *)src + first, n - first);
    }
    r->pos += n;
}

void hc_shm_ring_write_hdr(hc_shm_ring_t *r, const void *line)
{
    uint64_t off = r->pos & r->mask;
    uint8_t *p   = r->data + off;
    uint64_t first;

    if (__builtin_expect(off + HC_SHM_LINE > r->cold, 0))
        hc_shm_ring_warm(r, r->size);
    memcpy(p + sizeof(first), (const uint8_t *)line + sizeof(first), HC_SHM_LINE - sizeof(first));
    first = r->pos ^ r->key;
    __atomic_store_n((uint64_t *)(void *)p, first, __ATOMIC_RELEASE);
    r->pos += HC_SHM_LINE;
}

void hc_shm_ring_warm(hc_shm_ring_t *r, uint64_t upto)
{
    volatile uint8_t *p   = r->data;
    uint8_t           sum = 0;

    if (upto > r->size)
        upto = r->size;
    for (uint64_t off = r->cold; off < upto; off = (off | (HC_SHM_PAGE - 1)) + 1) {
        if (r->producer)
            p[off] = 0;
        else
            sum += p[off];
    }
    (void)sum;
    if (upto > r->cold)
        r->cold = upto;
}
