/* test_ib_rcache.c - the ib transport's registration cache (ib_rcache.h)
 * over a fake register function: hits, misses, ranges that overlap, least
 * recently used eviction by count and by bytes, entries in use never
 * deregistered under their users, invalidation, a failed registration.
 * Part of test_ib (its main is in test_ib.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "transport/ib/ib_rcache.h"

#include "test_ib_rcache.h"

#define FAKE_MAX 64

typedef struct fake {
    int       regs, deregs, live;
    size_t    live_bytes, limit; /* registering past limit fails with ENOMEM (0: none) */
    uintptr_t start[FAKE_MAX];
    size_t    len[FAKE_MAX];
    int       used[FAKE_MAX];
} fake_t;

static int fake_reg(void *arg, void *addr, size_t len, void **handle, uint32_t *lkey,
                    uint32_t *rkey)
{
    fake_t *f = arg;
    if (f->limit > 0 && f->live_bytes + len > f->limit)
        return ENOMEM;
    for (int i = 0; i < FAKE_MAX; i++) {
        if (f->used[i])
            continue;
        f->used[i]  = 1;
        f->start[i] = (uintptr_t)addr;
        f->len[i]   = len;
        f->regs++;
        f->live++;
        f->live_bytes += len;
        *handle = &f->used[i];
        *lkey   = 1000u + (uint32_t)i;
        *rkey   = 2000u + (uint32_t)i;
        return 0;
    }
    return ENOMEM;
}

static void fake_dereg(void *arg, void *handle)
{
    fake_t *f = arg;
    int     i = (int)((int *)handle - f->used);
    assert_true(i >= 0 && i < FAKE_MAX && f->used[i]); /* deregistered once */
    f->used[i] = 0;
    f->deregs++;
    f->live--;
    f->live_bytes -= f->len[i];
}

static int fake_is_live(const fake_t *f, const hc_ib_mreg_t *m)
{
    int i = (int)((const int *)m->handle - f->used);
    return f->used[i];
}

#define PG 4096
static uint8_t arena[64 * PG] __attribute__((aligned(PG)));

void test_rcache_hit_miss(void **state)
{
    fake_t         f = {0};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *a, *b, *d;
    (void)state;
    hc_ib_rcache_init(&c, 8, 1 << 30, PG, fake_reg, fake_dereg, &f);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 100, 2 * PG, &a), 0);
    assert_int_equal(f.regs, 1);
    assert_true(a->start == (uintptr_t)arena && a->end == (uintptr_t)arena + 3 * PG); /* pages */
    assert_int_equal(a->lkey, 1000);
    hc_ib_rcache_put(&c, a);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 100, 2 * PG, &b), 0); /* the same again */
    assert_ptr_equal(a, b);
    assert_int_equal(hc_ib_rcache_get(&c, arena + PG, 10, &d), 0); /* inside it */
    assert_ptr_equal(a, d);
    assert_int_equal(a->refs, 2);
    assert_int_equal(f.regs, 1);
    assert_int_equal(c.hits, 2);
    hc_ib_rcache_put(&c, b);
    hc_ib_rcache_put(&c, d);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 2 * PG, 2 * PG, &b), 0); /* sticks out */
    assert_ptr_not_equal(a, b);
    assert_int_equal(f.regs, 2);
    assert_int_equal(c.misses, 2);
    hc_ib_rcache_put(&c, b);
    assert_int_equal(c.n, 2);
    hc_ib_rcache_fini(&c);
    assert_int_equal(f.live, 0);
}

/* Ranges that overlap a registration without lying inside it are new
 * registrations; an invalidation takes every one it touches. */
void test_rcache_overlap(void **state)
{
    fake_t         f = {0};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *a, *b, *d;
    (void)state;
    hc_ib_rcache_init(&c, 8, 1 << 30, PG, fake_reg, fake_dereg, &f);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 4 * PG, 4 * PG, &a), 0); /* pages 4..7 */
    assert_int_equal(hc_ib_rcache_get(&c, arena + 2 * PG, 4 * PG, &b), 0); /* 2..5: below */
    assert_ptr_not_equal(a, b);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 6 * PG, 4 * PG, &d), 0); /* 6..9: above */
    assert_ptr_not_equal(a, d);
    assert_int_equal(f.regs, 3);
    hc_ib_rcache_put(&c, a), hc_ib_rcache_put(&c, b), hc_ib_rcache_put(&c, d);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 5 * PG, PG, &a), 0); /* inside two: a hit */
    assert_int_equal(f.regs, 3);
    assert_true(a->start <= (uintptr_t)arena + 5 * PG && (uintptr_t)arena + 6 * PG <= a->end);
    hc_ib_rcache_put(&c, a);
    assert_int_equal(hc_ib_rcache_invalidate(&c, arena + 5 * PG, 2 * PG), 3); /* 5..6 */
    assert_int_equal(f.live, 0);
    assert_int_equal(c.n, 0);
    assert_int_equal(c.bytes, 0);
    hc_ib_rcache_fini(&c);
}

void test_rcache_lru(void **state)
{
    fake_t         f = {0};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *m[4];
    (void)state;
    hc_ib_rcache_init(&c, 2, 1 << 30, PG, fake_reg, fake_dereg, &f);
    for (int i = 0; i < 2; i++) { /* A, B */
        assert_int_equal(hc_ib_rcache_get(&c, arena + i * 4 * PG, PG, &m[i]), 0);
        hc_ib_rcache_put(&c, m[i]);
    }
    assert_int_equal(hc_ib_rcache_get(&c, arena, PG, &m[0]), 0); /* A used again */
    hc_ib_rcache_put(&c, m[0]);
    assert_true(fake_is_live(&f, m[1]));
    assert_int_equal(hc_ib_rcache_get(&c, arena + 8 * PG, PG, &m[2]), 0); /* C: B goes */
    hc_ib_rcache_put(&c, m[2]);
    assert_int_equal(f.deregs, 1);
    assert_int_equal(c.evictions, 1);
    assert_int_equal(c.n, 2);
    assert_true(fake_is_live(&f, m[0]));
    assert_true(fake_is_live(&f, m[2]));
    hc_ib_rcache_fini(&c);
    assert_int_equal(f.live, 0);
}

void test_rcache_in_use(void **state)
{
    fake_t         f = {0};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *a, *b, *d;
    (void)state;
    hc_ib_rcache_init(&c, 1, 1 << 30, PG, fake_reg, fake_dereg, &f);
    assert_int_equal(hc_ib_rcache_get(&c, arena, PG, &a), 0);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 4 * PG, PG, &b), 0);
    assert_int_equal(f.deregs, 0); /* both in use: over the limit for now */
    assert_int_equal(c.n, 2);
    hc_ib_rcache_put(&c, a); /* A now unused, and least recent */
    assert_int_equal(f.deregs, 1);
    assert_int_equal(c.n, 1);
    hc_ib_rcache_put(&c, b);
    assert_int_equal(c.n, 1);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 4 * PG, PG, &d), 0);
    assert_ptr_equal(b, d);
    hc_ib_rcache_put(&c, d);
    hc_ib_rcache_put(&c, d); /* one too many: ignored */
    assert_int_equal(d->refs, 0);
    hc_ib_rcache_fini(&c);
    assert_int_equal(f.live, 0);
}

void test_rcache_bytes(void **state)
{
    fake_t         f = {0};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *m;
    (void)state;
    hc_ib_rcache_init(&c, 100, 4 * PG, PG, fake_reg, fake_dereg, &f);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(hc_ib_rcache_get(&c, arena + i * 2 * PG, 2 * PG, &m), 0);
        hc_ib_rcache_put(&c, m);
        assert_true(c.bytes <= 4 * PG);
    }
    assert_int_equal(c.n, 2);
    assert_int_equal(f.live_bytes, 4 * PG);
    hc_ib_rcache_fini(&c);
    assert_int_equal(f.live, 0);
}

void test_rcache_invalidate(void **state)
{
    fake_t         f = {0};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *a, *b, *b2;
    (void)state;
    hc_ib_rcache_init(&c, 8, 1 << 30, PG, fake_reg, fake_dereg, &f);
    assert_int_equal(hc_ib_rcache_get(&c, arena, 2 * PG, &a), 0);
    hc_ib_rcache_put(&c, a);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 8 * PG, PG, &b), 0);   /* kept in use */
    assert_int_equal(hc_ib_rcache_invalidate(&c, arena + PG + 5, 1), 1); /* overlaps A */
    assert_int_equal(f.deregs, 1);
    assert_int_equal(hc_ib_rcache_invalidate(&c, arena + 2 * PG, 6 * PG), 0); /* between */
    assert_int_equal(hc_ib_rcache_invalidate(&c, arena + 8 * PG, PG), 1);     /* B, in use */
    assert_int_equal(f.deregs, 1);
    assert_true(b->stale);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 8 * PG, PG, &b2), 0); /* not found again */
    assert_ptr_not_equal(b, b2);
    assert_int_equal(f.regs, 3);
    hc_ib_rcache_put(&c, b); /* its last user: now it goes */
    assert_int_equal(f.deregs, 2);
    hc_ib_rcache_put(&c, b2);
    assert_int_equal(c.n, 1);
    hc_ib_rcache_fini(&c);
    assert_int_equal(f.live, 0);
}

void test_rcache_reg_fails(void **state)
{
    fake_t         f = {.limit = 4 * PG};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *a, *b, *d;
    (void)state;
    hc_ib_rcache_init(&c, 8, 1 << 30, PG, fake_reg, fake_dereg, &f);
    assert_int_equal(hc_ib_rcache_get(&c, arena, 3 * PG, &a), 0);
    hc_ib_rcache_put(&c, a);
    /* no room left: the unused entry is evicted and the registration tried again */
    assert_int_equal(hc_ib_rcache_get(&c, arena + 8 * PG, 3 * PG, &b), 0);
    assert_int_equal(f.deregs, 1);
    /* b in use: nothing to evict, the failure is the caller's */
    assert_int_equal(hc_ib_rcache_get(&c, arena + 16 * PG, 3 * PG, &d), ENOMEM);
    assert_int_equal(c.n, 1);
    hc_ib_rcache_put(&c, b);
    assert_int_equal(hc_ib_rcache_get(&c, arena, (size_t)-1, &d), EINVAL); /* wraps */
    hc_ib_rcache_fini(&c);
    assert_int_equal(f.live, 0);
}

/* The transport's setting (HC_IB_RCACHE_ENTRIES 0): a registration is
 * shared while in use and gone at its last put, none kept unused. */
void test_rcache_keep_none(void **state)
{
    fake_t         f = {0};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *a, *b;
    (void)state;
    hc_ib_rcache_init(&c, 0, 1 << 30, PG, fake_reg, fake_dereg, &f);
    assert_int_equal(hc_ib_rcache_get(&c, arena, 2 * PG, &a), 0);
    assert_int_equal(hc_ib_rcache_get(&c, arena + PG, PG, &b), 0); /* shared */
    assert_ptr_equal(a, b);
    assert_int_equal(f.regs, 1);
    hc_ib_rcache_put(&c, a);
    assert_int_equal(f.live, 1);
    hc_ib_rcache_put(&c, b);
    assert_int_equal(f.live, 0);
    assert_int_equal(c.n, 0);
    assert_int_equal(hc_ib_rcache_get(&c, arena, 2 * PG, &a), 0); /* registered anew */
    assert_int_equal(f.regs, 2);
    hc_ib_rcache_put(&c, a);
    hc_ib_rcache_fini(&c);
    assert_int_equal(f.live, 0);
}

void test_rcache_fini_in_use(void **state)
{
    fake_t         f = {0};
    hc_ib_rcache_t c;
    hc_ib_mreg_t  *a, *b;
    (void)state;
    hc_ib_rcache_init(&c, 8, 1 << 30, PG, fake_reg, fake_dereg, &f);
    assert_int_equal(hc_ib_rcache_get(&c, arena, PG, &a), 0);
    assert_int_equal(hc_ib_rcache_get(&c, arena + 4 * PG, PG, &b), 0);
    hc_ib_rcache_invalidate(&c, arena + 4 * PG, 1); /* b: stale, still in use */
    hc_ib_rcache_fini(&c);                          /* users abandoned: all of it goes */
    assert_int_equal(f.live, 0);
    assert_int_equal(f.deregs, 2);
}
