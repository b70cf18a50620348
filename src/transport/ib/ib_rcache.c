/* ib_rcache.c - the registration cache (ib_rcache.h). */
#include "transport/ib/ib_rcache.h"

#include <errno.h>
#include <stdlib.h>

void hc_ib_rcache_init(hc_ib_rcache_t *c, size_t max_entries, size_t max_bytes, size_t page,
                       hc_ib_reg_fn_t reg, hc_ib_dereg_fn_t dereg, void *arg)
{
    *c = (hc_ib_rcache_t){.max_entries = max_entries,
                          .max_bytes   = max_bytes,
                          .page        = page > 0 ? page : 4096,
                          .reg         = reg,
                          .dereg       = dereg,
                          .arg         = arg};
}

static void unlink_entry(hc_ib_rcache_t *c, hc_ib_mreg_t *m)
{
    if (m->prev != NULL)
        m->prev->next = m->next;
    else
        c->head = m->next;
    if (m->next != NULL)
        m->next->prev = m->prev;
    else
        c->tail = m->prev;
    m->prev = m->next = NULL;
    c->n--;
    c->bytes -= m->end - m->start;
}

static void push_head(hc_ib_rcache_t *c, hc_ib_mreg_t *m)
{
    m->prev = NULL;
    m->next = c->head;
    if (c->head != NULL)
        c->head->prev = m;
    else
        c->tail = m;
    c->head = m;
    c->n++;
    c->bytes += m->end - m->start;
}

static void destroy(hc_ib_rcache_t *c, hc_ib_mreg_t *m)
{
    c->dereg(c->arg, m->handle);
    free(m);
}

/* Evicts unused entries, oldest first, while over the limits (all of them
 * when all is set). */
static void trim(hc_ib_rcache_t *c, int all)
{
    hc_ib_mreg_t *m = c->tail;
    while (m != NULL && (all || c->n > c->max_entries || c->bytes > c->max_bytes)) {
        hc_ib_mreg_t *prev = m->prev;
        if (m->refs == 0) {
            unlink_entry(c, m);
            destroy(c, m);
            c->evictions++;
        }
        m = prev;
    }
}

static hc_ib_mreg_t *find(hc_ib_rcache_t *c, uintptr_t a, uintptr_t e)
{
    for (hc_ib_mreg_t *m = c->head; m != NULL; m = m->next)
        if (m->start <= a && e <= m->end)
            return m;
    return NULL;
}

int hc_ib_rcache_get(hc_ib_rcache_t *c, const void *addr, size_t len, hc_ib_mreg_t **m_p)
{
    uintptr_t a = (uintptr_t)addr, e = a + (len > 0 ? len : 1);
    if (e < a)
        return EINVAL;
    hc_ib_mreg_t *m = find(c, a, e);
    if (m != NULL) {
        c->hits++;
        unlink_entry(c, m);
        push_head(c, m);
        m->refs++;
        *m_p = m;
        return 0;
    }
    c->misses++;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return ENOMEM;
    m->start = a & ~(uintptr_t)(c->page - 1);
    m->end   = (e + c->page - 1) & ~(uintptr_t)(c->page - 1);
    int rc   = c->reg(c->arg, (void *)m->start, m->end - m->start, &m->handle, &m->lkey, &m->rkey);
    if (rc != 0 && c->n > 0) { /* out of pinnable memory, perhaps: make room, once */
        trim(c, 1);
        rc = c->reg(c->arg, (void *)m->start, m->end - m->start, &m->handle, &m->lkey, &m->rkey);
    }
    if (rc != 0) {
        free(m);
        return rc;
    }
    m->refs = 1;
    push_head(c, m);
    trim(c, 0);
    *m_p = m;
    return 0;
}

void hc_ib_rcache_put(hc_ib_rcache_t *c, hc_ib_mreg_t *m)
{
    if (m == NULL || m->refs <= 0)
        return;
    if (--m->refs > 0)
        return;
    if (!m->stale) {
        trim(c, 0);
        return;
    }
    for (hc_ib_mreg_t **p = &c->stale; *p != NULL; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            break;
        }
    }
    destroy(c, m);
}

size_t hc_ib_rcache_invalidate(hc_ib_rcache_t *c, const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr, e = a + len;
    size_t    n = 0;
    for (hc_ib_mreg_t *m = c->head, *next; m != NULL; m = next) {
        next = m->next;
        if (m->end <= a || e <= m->start)
            continue;
        unlink_entry(c, m);
        n++;
        if (m->refs == 0) {
            destroy(c, m);
            continue;
        }
        m->stale = 1;
        m->next  = c->stale;
        c->stale = m;
    }
    return n;
}

void hc_ib_rcache_fini(hc_ib_rcache_t *c)
{
    while (c->head != NULL) {
        hc_ib_mreg_t *m = c->head;
        unlink_entry(c, m);
        destroy(c, m);
    }
    while (c->stale != NULL) {
        hc_ib_mreg_t *m = c->stale;
        c->stale        = m->next;
        destroy(c, m);
    }
}
