/* ib_rcache.h - the memory registration cache: registrations of user
 * buffers, kept after use and found again by address range, least recently
 * used evicted first (above max_entries or max_bytes, among the unused),
 * dropped by invalidate() when the memory goes away.
 *
 * Device-free: the cache registers through the function it is given
 * (ibv_reg_mr in the transport, a fake in tests/unit/test_ib.c). Ranges are
 * widened to whole pages. An entry in use (refs > 0) is never deregistered
 * under its user: one invalidated while in use goes at its last put.
 *
 * What a cache of registrations cannot see by itself: memory freed and
 * mapped again at the same address (the registration still pins the old
 * pages). Whoever frees registered memory must call invalidate() first.
 * The transport registers its own buffers outside the cache; for the user's,
 * nothing calls it yet (ib.h, Known limits). */
#ifndef HC_TL_IB_RCACHE_H
#define HC_TL_IB_RCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct hc_ib_mreg {
    uintptr_t          start, end; /* the registered range, whole pages */
    void              *handle;     /* the register function's (an ibv_mr) */
    uint32_t           lkey, rkey;
    int                refs;
    int                stale; /* invalidated while in use */
    struct hc_ib_mreg *prev, *next;
} hc_ib_mreg_t;

/* 0, or an errno (the registration failed). */
typedef int (*hc_ib_reg_fn_t)(void *arg, void *addr, size_t len, void **handle, uint32_t *lkey,
                              uint32_t *rkey);
typedef void (*hc_ib_dereg_fn_t)(void *arg, void *handle);

typedef struct hc_ib_rcache {
    hc_ib_mreg_t    *head, *tail; /* findable entries, most recently used first */
    hc_ib_mreg_t    *stale;       /* invalidated, still in use */
    size_t           n, bytes;    /* findable ones */
    size_t           max_entries, max_bytes, page;
    hc_ib_reg_fn_t   reg;
    hc_ib_dereg_fn_t dereg;
    void            *arg;
    uint64_t         hits, misses, evictions;
} hc_ib_rcache_t;

void hc_ib_rcache_init(hc_ib_rcache_t *c, size_t max_entries, size_t max_bytes, size_t page,
                       hc_ib_reg_fn_t reg, hc_ib_dereg_fn_t dereg, void *arg);
/* A registration covering [addr, addr + len) (len > 0), referenced: 0, or
 * the register function's errno (after evicting every unused entry and
 * trying once more), or ENOMEM. */
int hc_ib_rcache_get(hc_ib_rcache_t *c, const void *addr, size_t len, hc_ib_mreg_t **m);
/* Drops a reference taken by get. */
void hc_ib_rcache_put(hc_ib_rcache_t *c, hc_ib_mreg_t *m);
/* Forgets every entry overlapping [addr, addr + len): deregistered now, or
 * at the last put of one in use. Returns how many were forgotten. */
size_t hc_ib_rcache_invalidate(hc_ib_rcache_t *c, const void *addr, size_t len);
/* Deregisters everything, in use or not (the users are gone). */
void hc_ib_rcache_fini(hc_ib_rcache_t *c);

#endif
