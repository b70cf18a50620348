/* ib_flow.c - credit, slot and chunk bookkeeping of the ib data path (ib_flow.h). */
#include "transport/ib/ib_flow.h"

void hc_ib_txflow_init(hc_ib_txflow_t *f, uint32_t nslots)
{
    f->posted = f->done = f->freed = 0;
    f->nslots                      = nslots;
}

int hc_ib_txflow_can_post(const hc_ib_txflow_t *f)
{
    return f->posted - f->freed < f->nslots && f->posted - f->done < f->nslots;
}

uint32_t hc_ib_txflow_post(hc_ib_txflow_t *f)
{
    return (uint32_t)(f->posted++ % f->nslots);
}

int hc_ib_txflow_complete(hc_ib_txflow_t *f)
{
    if (f->done == f->posted)
        return -1;
    f->done++;
    return 0;
}

int hc_ib_txflow_credit(hc_ib_txflow_t *f, uint64_t freed)
{
    if (freed < f->freed || freed > f->posted)
        return -1;
    f->freed = freed;
    return 0;
}

void hc_ib_rxring_init(hc_ib_rxring_t *r, uint32_t nslots)
{
    r->arrived = r->consumed = r->reported = 0;
    r->nslots                              = nslots;
}

int hc_ib_rxring_arrive(hc_ib_rxring_t *r)
{
    if (r->arrived - r->consumed >= r->nslots)
        return -1;
    return (int)(r->arrived++ % r->nslots);
}

int hc_ib_rxring_head(const hc_ib_rxring_t *r)
{
    return r->consumed < r->arrived ? (int)(r->consumed % r->nslots) : -1;
}

int hc_ib_rxring_consume(hc_ib_rxring_t *r)
{
    if (r->consumed == r->arrived)
        return -1;
    r->consumed++;
    return 0;
}

uint64_t hc_ib_rxring_pending(const hc_ib_rxring_t *r)
{
    return r->arrived - r->consumed;
}

int hc_ib_rndv_fin_check(uint64_t prev, uint64_t now, uint64_t posted)
{
    return now < prev || now > posted ? -1 : 0;
}

uint64_t hc_ib_chunks(uint64_t len, uint64_t chunk)
{
    return (len + chunk - 1) / chunk;
}

uint64_t hc_ib_chunk_span(uint64_t len, uint64_t chunk, uint64_t j, uint64_t *off)
{
    uint64_t o = j * chunk;
    *off       = o;
    if (o >= len)
        return 0;
    return len - o < chunk ? len - o : chunk;
}
