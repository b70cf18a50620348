/* tl_ofi_only.c - what only the ofi transport has: the registration cache.
 * tcp and shm need no registration, so the cases turn it on: messages then
 * carry descriptors the provider accepts and ignores, and the cache's own
 * bookkeeping (hits, LRU eviction, busy entries) is checked directly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tl_suite.h"
#include "transport/ofi/ofi.h"

#define MIB HC_TLT_MIB
#define PAGE 4096
#define NBUF (HC_OFI_MRC_SIZE + 8) /* more ranges than the cache holds */

static hc_ofi_mr_t *mr_get_as(hc_ofi_mrc_t *c, const uint8_t *base, int i, int keep)
{
    hc_ofi_mr_t *mr = NULL;

    /* 100 bytes on page 2i: no two ranges share a page */
    HC_TLT_CHK_ST(hc_ofi_mr_get(c, base + (size_t)i * 2 * PAGE, 100, keep, &mr), HCOMM_SUCCESS);
    HC_TLT_CHK(mr != NULL && mr->refs > 0);
    return mr;
}

/* hcomm's own memory: kept registered while idle */
static hc_ofi_mr_t *mr_get(hc_ofi_mrc_t *c, const uint8_t *base, int i)
{
    return mr_get_as(c, base, i, 1);
}

/* A user's buffer: one registration while it is in use, shared by its
 * concurrent uses, let go at the last put (the pages may be unmapped after,
 * and another mapping take the address), made again at the next use. */
static void mr_user(hc_ofi_mrc_t *c, const uint8_t *base)
{
    uint64_t     regs = c->regs;
    hc_ofi_mr_t *a = mr_get_as(c, base, NBUF + 1, 0), *b = mr_get_as(c, base, NBUF + 1, 0);

    HC_TLT_CHK(a == b && a->refs == 2 && c->regs == regs + 1);
    hc_ofi_mr_put(c, a);
    HC_TLT_CHK(b->mr != NULL);
    hc_ofi_mr_put(c, b);
    HC_TLT_CHK(b->mr == NULL); /* let go; its slot is free for the next */
    hc_ofi_mr_put(c, mr_get_as(c, base, NBUF + 1, 0));
    HC_TLT_CHK(c->regs == regs + 2);
}

/* Busy entries are never evicted (past the cache's size, registrations are
 * temporary); an idle range comes back as a hit; a new range evicts the
 * least recently used idle entry. */
static void mr_lru(const hc_ofi_mrc_t *ctx_cache)
{
    hc_ofi_mrc_t  cache = {.on     = 1,
                           .domain = ctx_cache->domain,
                           .ep     = ctx_cache->ep,
                           .mode   = ctx_cache->mode,
                           .key    = ctx_cache->key + (1u << 20)}; /* keys: one per domain */
    hc_ofi_mrc_t *c     = &cache;
    uint8_t      *base  = aligned_alloc(PAGE, (size_t)(NBUF + 2) * 2 * PAGE);
    hc_ofi_mr_t  *m[NBUF];
    uint64_t      regs = 0;

    HC_TLT_CHK(base != NULL);
    for (int i = 0; i < NBUF; i++)
        m[i] = mr_get(c, base, i);
    HC_TLT_CHK(c->regs - regs == NBUF && c->n == HC_OFI_MRC_SIZE);
    HC_TLT_CHK(!m[0]->temp && m[NBUF - 1]->temp);
    for (int i = 0; i < NBUF; i++)
        hc_ofi_mr_put(c, m[i]);
    regs = c->regs;
    hc_ofi_mr_put(c, mr_get(c, base, 0)); /* a hit, and entry 0 is now the newest */
    HC_TLT_CHK(c->regs == regs);
    hc_ofi_mr_put(c, mr_get(c, base, NBUF)); /* evicts entry 1, the oldest idle one */
    HC_TLT_CHK(c->regs == regs + 1);
    hc_ofi_mr_put(c, mr_get(c, base, 0));
    HC_TLT_CHK(c->regs == regs + 1);
    hc_ofi_mr_put(c, mr_get(c, base, 1));
    HC_TLT_CHK(c->regs == regs + 2);
    for (int i = 0; i < c->n; i++)
        HC_TLT_CHK(c->ent[i].refs == 0);
    mr_user(c, base);
    hc_ofi_mr_fini(c); /* before the buffers go */
    free(base);
}

static int body_mr(hc_tlt_env_t *env, void *arg)
{
    static const size_t sizes[] = {0, 1, 5000, 70000, MIB + 1, 3 * MIB};
    hc_ofi_mrc_t       *c       = &env->ctx->mrc;

    (void)arg;
    c->on = 1;
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, 6, HC_TLT_PLAIN);
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, 6, HC_TLT_MIXED);
    HC_TLT_CHK(c->regs > 0 && c->hits > 0);
    mr_lru(c); /* a cache of its own, on the same domain */
    return 0;
}

static void case_mr_cache(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 2, .body = body_mr};
    hc_tlt_expect(v, &w);
}

const hc_tlt_case_t hc_tlt_ofi_cases[] = {
    {"mr_cache", case_mr_cache},
    {NULL, NULL},
};
