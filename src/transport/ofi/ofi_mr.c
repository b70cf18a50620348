/* ofi_mr.c - registration of local buffers, for providers that ask for it
 * (FI_MR_LOCAL), through a small LRU cache keyed by address range: a
 * registration costs a system call or more.
 *
 * A registration that pins pages keeps the pages it pinned: a user's buffer
 * freed and mapped again at the same address (malloc does that with large
 * blocks) would be read and written through a stale one, and our open
 * registration keeps the provider's own cache, which watches unmaps
 * (FI_MR_CACHE_MONITOR), from dropping it. So a user's buffer is registered
 * only while operations use it: concurrent chunks and messages share one
 * registration, and the provider's cache makes the next one cheap. hcomm's
 * own memory (staging slots, control messages) stays registered. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "transport/ofi/ofi.h"

static uintptr_t page_size(void)
{
    static uintptr_t ps;
    if (ps == 0) {
        long v = sysconf(_SC_PAGESIZE);
        ps     = v > 0 ? (uintptr_t)v : 4096u;
    }
    return ps;
}

static hcomm_status_t mr_register(hc_ofi_mrc_t *c, uintptr_t base, uintptr_t end, hc_ofi_mr_t *e)
{
    uint64_t key = (c->mode & FI_MR_PROV_KEY) ? 0 : ++c->key;
    int      rc =
        fi_mr_reg(c->domain, (void *)base, end - base, FI_SEND | FI_RECV, 0, key, 0, &e->mr, NULL);
    if (rc == 0 && (c->mode & FI_MR_ENDPOINT)) {
        rc = fi_mr_bind(e->mr, &c->ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(e->mr);
        if (rc != 0)
            fi_close(&e->mr->fid);
    }
    if (rc != 0) {
        hc_error(NET, "ofi: registering %zu bytes at %p: %s", (size_t)(end - base), (void *)base,
                 hc_ofi_lib.fi_strerror(-rc));
        e->mr = NULL;
        return HCOMM_ERR_SYSTEM;
    }
    e->base = base;
    e->end  = end;
    e->desc = fi_mr_desc(e->mr);
    e->refs = 0;
    e->temp = 0;
    c->regs++;
    return HCOMM_SUCCESS;
}

static void mr_release(hc_ofi_mr_t *e)
{
    if (e->mr != NULL)
        fi_close(&e->mr->fid);
    e->mr = NULL;
}

/* The slot for a new entry: a free one, else the least recently used idle
 * one (deregistered), else -1 (every entry is in use). */
static int mr_victim(hc_ofi_mrc_t *c)
{
    int v = -1;
    for (int i = 0; i < c->n; i++)
        if (c->ent[i].mr == NULL) /* a user buffer's, let go */
            return i;
    if (c->n < HC_OFI_MRC_SIZE)
        return c->n++;
    for (int i = 0; i < c->n; i++)
        if (c->ent[i].refs == 0 && (v < 0 || c->ent[i].used < c->ent[v].used))
            v = i;
    if (v >= 0)
        mr_release(&c->ent[v]);
    return v;
}

hcomm_status_t hc_ofi_mr_get(hc_ofi_mrc_t *c, const void *buf, size_t len, int keep,
                             hc_ofi_mr_t **mr)
{
    *mr = NULL;
    if (!c->on || len == 0)
        return HCOMM_SUCCESS;
    uintptr_t base = (uintptr_t)buf & ~(page_size() - 1);
    uintptr_t end  = ((uintptr_t)buf + len + page_size() - 1) & ~(page_size() - 1);
    c->clock++;
    for (int i = 0; i < c->n; i++) {
        hc_ofi_mr_t *e = &c->ent[i];
        if (e->mr != NULL && e->base <= base && end <= e->end) {
            e->used = c->clock;
            e->refs++;
            c->hits++;
            *mr = e;
            return HCOMM_SUCCESS;
        }
    }
    int          v = mr_victim(c);
    hc_ofi_mr_t *e = v >= 0 ? &c->ent[v] : calloc(1, sizeof(*e));
    if (e == NULL) {
        hc_error(NET, "ofi: out of memory for a registration");
        return HCOMM_ERR_NO_MEMORY;
    }
    hcomm_status_t st = mr_register(c, base, end, e);
    if (st != HCOMM_SUCCESS) {
        if (v < 0)
            free(e);
        return st;
    }
    e->temp = v < 0;
    e->keep = keep;
    e->used = c->clock;
    e->refs = 1;
    *mr     = e;
    return HCOMM_SUCCESS;
}

void hc_ofi_mr_put(hc_ofi_mrc_t *c, hc_ofi_mr_t *mr)
{
    (void)c;
    if (mr == NULL)
        return;
    if (--mr->refs > 0)
        return;
    if (mr->temp) {
        mr_release(mr);
        free(mr);
    } else if (!mr->keep) {
        mr_release(mr);
    }
}

/* After the endpoint closed and every operation let its registration go. */
void hc_ofi_mr_fini(hc_ofi_mrc_t *c)
{
    for (int i = 0; i < c->n; i++)
        mr_release(&c->ent[i]);
    c->n = 0;
}
