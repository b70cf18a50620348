/* moe.c - the MoE handle: configuration, agreement between the ranks,
 * buffers and counters (include/hcomm_moe.h). */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"
#include "moe/moe.h"

int hc_moe_grow(hc_moe_buf_t *b, size_t bytes, const char *what)
{
    size_t cap = b->cap + b->cap / 2;
    void  *p;

    if (bytes <= b->cap)
        return 0;
    if (cap < bytes)
        cap = bytes;
    free(b->p); /* contents are not kept: no realloc copy */
    b->p   = NULL;
    b->cap = 0;
    p      = malloc(cap);
    if (p == NULL) {
        hc_error(MOE, "moe: out of memory for %zu bytes of %s", cap, what);
        return -1;
    }
    b->p   = p;
    b->cap = cap;
    return 0;
}

static hcomm_status_t check_config(const hcomm_moe_config_t *c, int n)
{
    const char *name = "hcomm_moe_create";

    if (c == NULL) {
        hc_error(MOE, "%s: NULL configuration", name);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (c->dtype != HCOMM_FLOAT32 && c->dtype != HCOMM_BFLOAT16 && c->dtype != HCOMM_FLOAT16) {
        hc_error(MOE, "%s: dtype %d: float32, bfloat16 or float16 only", name, (int)c->dtype);
        return HCOMM_ERR_INVALID_DTYPE;
    }
    if (c->num_experts < 1 || c->topk < 1 || c->topk > HCOMM_MOE_MAX_TOPK || c->hidden < 1) {
        hc_error(MOE, "%s: %d experts, top-%d, hidden %zu: need E >= 1, 1 <= k <= %d, H >= 1",
                 name, c->num_experts, c->topk, c->hidden, HCOMM_MOE_MAX_TOPK);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (c->hidden > (SIZE_MAX / 8 - 4 - 8 * HCOMM_MOE_MAX_TOPK) / 4) {
        hc_error(MOE, "%s: hidden %zu overflows", name, c->hidden);
        return HCOMM_ERR_OVERFLOW;
    }
    for (int e = 0; c->expert_rank != NULL && e < c->num_experts; e++) {
        if (c->expert_rank[e] < 0 || c->expert_rank[e] >= n) {
            hc_error(MOE, "%s: expert %d placed on rank %d of %d", name, e, (int)c->expert_rank[e],
                     n);
            return HCOMM_ERR_INVALID_RANK;
        }
    }
    return HCOMM_SUCCESS;
}

static void free_handle(hcomm_moe_t m)
{
    hc_moe_buf_t *bufs[] = {&m->sbuf,     &m->rbuf,      &m->send_tok, &m->rowmap, &m->tokens,
                            &m->src_rank, &m->src_index, &m->slot,     &m->weight, &m->facc};

    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]->p);
    free(m->expert_rank); /* the per-expert tables, one block */
    free(m->scount);      /* the per-peer and per-local-expert tables, one block */
    free(m->frow);
    free(m);
}

static hcomm_status_t setup(hcomm_moe_t m, const hcomm_moe_config_t *c)
{
    size_t n = (size_t)m->nranks, L = 0, *t;
    int   *seen;

    /* per expert: rank, local index, and the local ids (one block) */
    m->expert_rank = malloc(3 * (size_t)m->nexperts * sizeof(int32_t));
    seen           = calloc(n, sizeof(*seen));
    if (m->expert_rank == NULL || seen == NULL) {
        free(seen);
        goto err_nomem;
    }
    m->expert_local = m->expert_rank + m->nexperts;
    m->local_ids    = m->expert_local + m->nexperts;
    for (int e = 0; e < m->nexperts; e++) {
        int p              = c->expert_rank != NULL ? c->expert_rank[e]
                                                    : (int)((int64_t)e * m->nranks / m->nexperts);
        m->expert_rank[e]  = p;
        m->expert_local[e] = seen[p]++;
        if (p == m->rank)
            m->local_ids[L++] = e;
    }
    free(seen);
    m->nlocal = (int)L;
    /* per peer: 4 row tables, 4 byte tables, 2 count vectors of 2, 2 scratch; per local: 3 */
    t       = malloc((14 * n + 3 * (L + 1)) * sizeof(size_t));
    m->frow = malloc(m->hidden * sizeof(float));
    if (t == NULL || m->frow == NULL) {
        free(t);
        goto err_nomem;
    }
    m->scount = t;
    m->sdispl = t + n;
    m->rcount = t + 2 * n;
    m->rdispl = t + 3 * n;
    for (int i = 0; i < 4; i++)
        m->bytes[i] = t + (4 + (size_t)i) * n;
    m->cnt_out = (uint64_t *)(t + 8 * n);
    m->cnt_in  = (uint64_t *)(t + 10 * n);
    m->mark    = t + 12 * n;
    m->row_of  = t + 13 * n;
    m->lcount  = t + 14 * n;
    m->loff    = m->lcount + L + 1;
    m->lcur    = m->loff + L + 1;
    return HCOMM_SUCCESS;
err_nomem:
    hc_error(MOE, "hcomm_moe_create: out of memory");
    return HCOMM_ERR_NO_MEMORY;
}

/* A hash of the configuration as every rank sees it. */
static uint64_t digest(const hcomm_moe_t m)
{
    uint64_t v[4] = {(uint64_t)m->nexperts, (uint64_t)m->topk, (uint64_t)m->hidden,
                     (uint64_t)m->dtype};
    uint64_t h    = hc_hash_bytes(HC_HASH_FNV_SEED, v, sizeof(v));
    return hc_hash_bytes(h, m->expert_rank, (size_t)m->nexperts * sizeof(int32_t));
}

static hcomm_status_t create_local(hcomm_comm_t comm, const hcomm_moe_config_t *c, int rank, int n,
                                   hcomm_moe_t *out)
{
    hcomm_status_t st = check_config(c, n);
    hcomm_moe_t    m;

    if (st != HCOMM_SUCCESS)
        return st;
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        hc_error(MOE, "hcomm_moe_create: out of memory");
        return HCOMM_ERR_NO_MEMORY;
    }
    m->comm      = comm;
    m->rank      = rank;
    m->nranks    = n;
    m->nexperts  = c->num_experts;
    m->topk      = c->topk;
    m->hidden    = c->hidden;
    m->dtype     = c->dtype;
    m->esize     = hcomm_dtype_size(c->dtype);
    m->tok_bytes = m->hidden * m->esize;
    m->hdr_bytes = 4 + 8 * (size_t)m->topk;
    m->row_bytes = m->hdr_bytes + m->tok_bytes;
    st           = setup(m, c);
    if (st != HCOMM_SUCCESS) {
        free_handle(m);
        return st;
    }
    m->stats.row_bytes = m->row_bytes;
    *out               = m;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_moe_create(hcomm_comm_t comm, const hcomm_moe_config_t *config,
                                hcomm_moe_t *moe)
{
    hcomm_moe_t    m = NULL;
    int            rank, n;
    hcomm_status_t st = hcomm_comm_rank(comm, &rank), lst;

    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_size(comm, &n);
    if (st != HCOMM_SUCCESS)
        return st;
    lst = moe == NULL ? HCOMM_ERR_INVALID_ARG : create_local(comm, config, rank, n, &m);
    if (moe == NULL)
        hc_error(MOE, "hcomm_moe_create: NULL handle pointer");
    /* every rank learns whether all are valid and agree: min of (ok, h, ~h) */
    uint64_t h = m != NULL ? digest(m) : 0, v[3] = {lst == HCOMM_SUCCESS, h, ~h};
    st = hcomm_allreduce(v, v, 3, HCOMM_UINT64, HCOMM_MIN, comm, NULL);
    if (st == HCOMM_SUCCESS && lst != HCOMM_SUCCESS)
        st = lst;
    if (st == HCOMM_SUCCESS && v[0] == 0) {
        hc_error(MOE, "hcomm_moe_create: another rank's configuration is invalid");
        st = HCOMM_ERR_REMOTE;
    }
    if (st == HCOMM_SUCCESS && (v[1] != h || v[2] != ~h)) {
        hc_error(MOE, "hcomm_moe_create: ranks passed different configurations (experts, "
                       "top-k, hidden size, dtype or placement)");
        st = HCOMM_ERR_INVALID_ARG;
    }
    if (st != HCOMM_SUCCESS) {
        if (m != NULL)
            free_handle(m);
        return st;
    }
    *moe = m;
    return HCOMM_SUCCESS;
}

void hcomm_moe_destroy(hcomm_moe_t moe)
{
    if (moe != NULL)
        free_handle(moe);
}

hcomm_status_t hcomm_moe_get_stats(hcomm_moe_t moe, hcomm_moe_stats_t *stats)
{
    if (moe == NULL || stats == NULL) {
        hc_error(MOE, "hcomm_moe_get_stats: NULL %s", moe == NULL ? "handle" : "stats");
        return HCOMM_ERR_INVALID_ARG;
    }
    *stats = moe->stats;
    return HCOMM_SUCCESS;
}
