/* ib_tx.c - the sending side of an ib endpoint: eager messages copied into a
 * staging slot and RDMA-written with immediate data into the peer's slot,
 * rendezvous requests (RTS) for larger ones, the credit words read back, and
 * the credit words this side writes to the peer. Never run with a device
 * present (see ib.h). */
#include <string.h>

#include "base/log.h"
#include "transport/ib/ib.h"

static size_t eager_max(const hc_tl_ep_t *ep)
{
    return ep->remote.slot_size < HC_IB_SLOT_BYTES ? ep->remote.slot_size : HC_IB_SLOT_BYTES;
}

static int post_failed(hc_tl_ep_t *ep, int rc, const char *what, int *n)
{
    hc_error(NET, "peer %d: ibv_post_send (%s): %s", ep->peer, what, strerror(rc));
    *n += hc_ib_ep_fail(ep, HCOMM_ERR_SYSTEM, NULL);
    return -1;
}

/* The head send, small: 1 posted, -1 the endpoint failed. */
static int post_eager(hc_tl_ep_t *ep, hc_tl_req_t *req, int *n)
{
    uint32_t slot = hc_ib_txflow_post(&ep->tx);
    if (req->len > 0)
        memcpy(ep->tx_slots + (size_t)slot * HC_IB_SLOT_BYTES, req->sbuf, req->len);
    int rc = hc_ib_post_slot(ep, slot, (uint32_t)req->len,
                             hc_ib_imm_make(HC_IB_IMM_EAGER, (uint32_t)req->len));
    if (rc != 0)
        return post_failed(ep, rc, "eager", n);
    hc_ib_req_pop(&ep->txq_head, &ep->txq_tail);
    hc_ib_req_push(&ep->fly_head, &ep->fly_tail, req);
    return 1;
}

/* The head send, large: its buffer registered on every rail, and an RTS
 * naming it. 1 posted, 0 too many in flight, -1 the endpoint failed. */
static int post_rts(hc_tl_ep_t *ep, hc_tl_req_t *req, int *n)
{
    if (ep->rndv_posted - ep->rndv_retired >= HC_IB_RNDV_MAX)
        return 0;
    hc_ib_rndv_t *rec = &ep->rndv[ep->rndv_posted % HC_IB_RNDV_MAX];
    hc_ib_rts_t   rts = {
          .len = req->len, .addr = (uintptr_t)req->sbuf, .nrails = (uint32_t)ep->nrails};
    for (int i = 0; i < ep->nrails; i++) {
        int rc = hc_ib_rcache_get(&ep->ctx->rail[i].rcache, req->sbuf, req->len, &rec->mreg[i]);
        if (rc != 0) {
            hc_error(NET, "peer %d: cannot register %zu bytes at %p on %s: %s (ulimit -l?)",
                     ep->peer, req->len, req->sbuf, ep->ctx->rail[i].port.nic.name, strerror(rc));
            while (i-- > 0)
                hc_ib_rcache_put(&ep->ctx->rail[i].rcache, rec->mreg[i]);
            *n += hc_ib_ep_fail(ep, HCOMM_ERR_SYSTEM, NULL);
            return -1;
        }
        rts.rkey[i] = rec->mreg[i]->rkey;
    }
    uint32_t slot = hc_ib_txflow_post(&ep->tx);
    hc_ib_rts_encode(&rts, ep->tx_slots + (size_t)slot * HC_IB_SLOT_BYTES);
    rec->req     = req; /* from here on, abandoning the endpoint puts the registrations */
    req->priv[1] = 1;
    ep->rndv_posted++;
    hc_ib_req_pop(&ep->txq_head, &ep->txq_tail);
    hc_ib_req_push(&ep->fly_head, &ep->fly_tail, req);
    int rc =
        hc_ib_post_slot(ep, slot, HC_IB_RTS_BYTES, hc_ib_imm_make(HC_IB_IMM_RTS, HC_IB_RTS_BYTES));
    return rc != 0 ? post_failed(ep, rc, "rendezvous request", n) : 1;
}

int hc_ib_tx_progress(hc_tl_ep_t *ep)
{
    int n = 0;
    if (ep->state != HC_IB_EP_UP || ep->gone)
        return 0;
    while (ep->txq_head != NULL && ep->status == HCOMM_SUCCESS && hc_ib_txflow_can_post(&ep->tx)) {
        hc_tl_req_t *req = ep->txq_head;
        int rc = req->len <= eager_max(ep) ? post_eager(ep, req, &n) : post_rts(ep, req, &n);
        if (rc <= 0)
            break;
    }
    return n;
}

/* Rendezvous sends whose RTS write completed and that the peer has read. */
static int rndv_retire(hc_tl_ep_t *ep)
{
    int n = 0;
    while (ep->rndv_retired < ep->rndv_posted &&
           hc_ib_rndv_done(ep->rndv_retired, ep->rndv_cqes, ep->rndv_fins)) {
        hc_ib_rndv_t *rec = &ep->rndv[ep->rndv_retired % HC_IB_RNDV_MAX];
        for (int i = 0; i < ep->nrails; i++)
            hc_ib_rcache_put(&ep->ctx->rail[i].rcache, rec->mreg[i]);
        rec->req->done   = rec->req->len;
        rec->req->status = HCOMM_SUCCESS;
        rec->req         = NULL;
        ep->rndv_retired++;
        n++;
    }
    return n;
}

int hc_ib_tx_slot_done(hc_tl_ep_t *ep)
{
    hc_tl_req_t *r = hc_ib_req_pop(&ep->fly_head, &ep->fly_tail);
    if (r == NULL || hc_ib_txflow_complete(&ep->tx) != 0) {
        hc_error(NET, "peer %d: a slot write completed that was never posted", ep->peer);
        return hc_ib_ep_fail(ep, HCOMM_ERR_SYSTEM, NULL);
    }
    if (r->priv[1] == 0) { /* eager: the data is in the peer's slot */
        r->done   = r->len;
        r->status = HCOMM_SUCCESS;
        return 1;
    }
    ep->rndv_cqes++;
    return rndv_retire(ep);
}

int hc_ib_tx_credits(hc_tl_ep_t *ep)
{
    uint64_t freed, fins;
    if (ep->state != HC_IB_EP_UP || ep->status != HCOMM_SUCCESS)
        return 0;
    hc_ib_ctrl_decode(ep->ctrl_in, &freed, &fins);
    if (freed == ep->tx.freed && fins == ep->rndv_fins)
        return 0;
    if (hc_ib_txflow_credit(&ep->tx, freed) != 0 ||
        hc_ib_rndv_fin_check(ep->rndv_fins, fins, ep->rndv_posted) != 0) {
        hc_error(NET,
                 "peer %d: credit words out of range: %llu slots freed of %llu written, "
                 "%llu rendezvous reads of %llu",
                 ep->peer, (unsigned long long)freed, (unsigned long long)ep->tx.posted,
                 (unsigned long long)fins, (unsigned long long)ep->rndv_posted);
        return hc_ib_ep_fail(ep, HCOMM_ERR_PROTOCOL, NULL);
    }
    ep->rndv_fins = fins;
    return rndv_retire(ep);
}

int hc_ib_ctrl_report(hc_tl_ep_t *ep)
{
    if (ep->state != HC_IB_EP_UP || ep->status != HCOMM_SUCCESS || ep->gone || ep->ctrl_busy)
        return 0;
    uint64_t freed = ep->rx.consumed, done = ep->reads_done;
    if (freed == ep->ctrl_freed && done == ep->ctrl_done)
        return 0;
    hc_ib_ctrl_encode(ep->ctrl_out, freed, done);
    int rc = hc_ib_post_ctrl(ep);
    if (rc != 0) {
        int n = 0;
        post_failed(ep, rc, "credit words", &n);
        return n;
    }
    ep->ctrl_busy   = 1;
    ep->ctrl_freed  = freed;
    ep->ctrl_done   = done;
    ep->rx.reported = freed;
    return 0;
}

void hc_ib_tx_abandon(hc_tl_ep_t *ep, hcomm_status_t st, int *n)
{
    hc_tl_req_t *r;
    while ((r = hc_ib_req_pop(&ep->txq_head, &ep->txq_tail)) != NULL) {
        r->status = st;
        (*n)++;
    }
    while ((r = hc_ib_req_pop(&ep->fly_head, &ep->fly_tail)) != NULL) {
        if (r->priv[1] == 0) { /* a rendezvous one completes below */
            r->status = st;
            (*n)++;
        }
    }
    for (; ep->rndv_retired < ep->rndv_posted; ep->rndv_retired++) {
        hc_ib_rndv_t *rec = &ep->rndv[ep->rndv_retired % HC_IB_RNDV_MAX];
        for (int i = 0; i < ep->nrails; i++)
            hc_ib_rcache_put(&ep->ctx->rail[i].rcache, rec->mreg[i]);
        rec->req->status = st;
        rec->req         = NULL;
        (*n)++;
    }
}
