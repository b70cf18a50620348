/* shm_ring.h - single-producer/single-consumer byte ring in shared memory.
 *
 * head and tail count bytes since the start and never wrap; the ring size is a
 * power of two, so a position maps to an offset with a mask. The producer writes
 * data, then publishes head (release); the consumer reads head (acquire), uses
 * the data, then publishes tail (release). Each side keeps its own position and
 * a cached copy of the other's counter, so the shared lines are touched only
 * when the cached view runs out.
 *
 * A message's header line also says by itself that it is there: its first word
 * is its position under the ring's key, stored last (release). The consumer
 * polls the line it reads next instead of head's line and then the message's:
 * a small message costs one cache line's trip between the cores, not two. The
 * key (the pair's segment tag) makes a stale line, a payload of an earlier lap
 * included, match only by a 2^-64 chance; positions never repeat.
 */
#ifndef HC_SHM_RING_H
#define HC_SHM_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HC_SHM_LINE 64

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shared-memory counters need lock-free atomics");

/* Lives in the shared segment, one per direction. head is written only by the
 * producer, the rest only by the consumer: two cache lines, no false sharing. */
typedef struct hc_shm_ring_ctl {
    _Alignas(HC_SHM_LINE) _Atomic uint64_t head; /* bytes produced */
    _Alignas(HC_SHM_LINE) _Atomic uint64_t tail; /* bytes consumed */
    _Atomic uint64_t acks;                       /* single-copy messages fully read */
    _Atomic uint32_t cma_ok;                     /* HC_SHM_CMA_*: may the producer use it */
} hc_shm_ring_ctl_t;

enum { HC_SHM_CMA_UNKNOWN = 0, HC_SHM_CMA_YES = 1, HC_SHM_CMA_NO = 2 };

/* One process's view of a ring. */
typedef struct hc_shm_ring {
    hc_shm_ring_ctl_t *ctl;
    uint8_t           *data;
    uint64_t           size;
    uint64_t           mask;
    uint64_t           pos;  /* producer: next byte to write; consumer: next to read */
    uint64_t           peer; /* cached: producer sees tail, consumer sees head */
    uint64_t           cold; /* this process has not touched the offsets from here on */
    uint64_t           key;  /* a header's first word is its position ^ key */
    int                producer;
} hc_shm_ring_t;

/* Power of two in [64 KiB, 1 GiB] at least as large as want. */
uint64_t hc_shm_ring_size(size_t want);
void     hc_shm_ring_attach(hc_shm_ring_t *r, hc_shm_ring_ctl_t *ctl, uint8_t *data, uint64_t size,
                            uint64_t key, int producer);
/* Copies n bytes in at pos (wrapping) and advances pos; the caller checked space.
 * The first write that reaches past cold first warms the rest of the ring. */
void hc_shm_ring_write(hc_shm_ring_t *r, const void *src, size_t n);
/* Producer: writes one header line at pos (line-aligned, so it never wraps),
 * its first word last, and advances pos; the caller checked space. */
void hc_shm_ring_write_hdr(hc_shm_ring_t *r, const void *line);
/* Touches the ring's pages from cold up to offset upto in this process, so that
 * their first touches (a fault each, and a hypervisor trip under PVM even after
 * MAP_POPULATE) are paid in one go rather than one page per message: the
 * consumer reads them; the producer writes them, which is safe because it has
 * never written past cold, so nothing there is unread. */
void hc_shm_ring_warm(hc_shm_ring_t *r, uint64_t upto);

/* Producer: free bytes, rereading tail only when the cached view has < want. */
static inline uint64_t hc_shm_ring_space(hc_shm_ring_t *r, uint64_t want)
{
    uint64_t space = r->size - (r->pos - r->peer);
    if (space < want) {
        r->peer = atomic_load_explicit(&r->ctl->tail, memory_order_acquire);
        space   = r->size - (r->pos - r->peer);
    }
    return space;
}

static inline void hc_shm_ring_publish(hc_shm_ring_t *r)
{
    atomic_store_explicit(&r->ctl->head, r->pos, memory_order_release);
}

/* Consumer: readable bytes, rereading head only when the cached view has < want.
 * The cached head never trails pos (hc_shm_ring_skip_to). */
static inline uint64_t hc_shm_ring_avail(hc_shm_ring_t *r, uint64_t want)
{
    uint64_t avail = r->peer - r->pos;
    if (avail < want) {
        /* head may trail pos, past a header found by its stamp */
        uint64_t head = atomic_load_explicit(&r->ctl->head, memory_order_acquire);
        if (head > r->peer)
            r->peer = head;
        avail = r->peer - r->pos;
    }
    return avail;
}

/* Consumer: the contiguous run of at most n bytes at pos. */
static inline const uint8_t *hc_shm_ring_peek(const hc_shm_ring_t *r, uint64_t n, uint64_t *run)
{
    uint64_t off  = r->pos & r->mask;
    uint64_t left = r->size - off;
    *run          = n < left ? n : left;
    return r->data + off;
}

/* Consumer: the header line at pos once its writer has stored it, else NULL. */
static inline const uint8_t *hc_shm_ring_hdr(const hc_shm_ring_t *r)
{
    const uint8_t *p = r->data + (r->pos & r->mask);
    return __atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_ACQUIRE) == (r->pos ^ r->key)
               ? p
               : NULL;
}

/* Consumer: moves pos to at, past a header found by its line; the cached head
 * stays at or past pos, so the next hc_shm_ring_avail reads the real one. */
static inline void hc_shm_ring_skip_to(hc_shm_ring_t *r, uint64_t at)
{
    r->pos = at;
    if (r->peer < at)
        r->peer = at;
}

static inline void hc_shm_ring_release(hc_shm_ring_t *r)
{
    atomic_store_explicit(&r->ctl->tail, r->pos, memory_order_release);
}

#endif
