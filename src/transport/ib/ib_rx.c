/* ib_rx.c - the receiving side of an ib endpoint: slot writes arriving,
 * matched in order with the receives; eager bytes handed over from the slot,
 * rendezvous messages RDMA-read in chunks over the rails, into the receive
 * buffer or through the staging ring to the sink. Never run with a device
 * present (see ib.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "transport/ib/ib.h"

#define STAGE_BYTES ((size_t)HC_IB_STAGE_CHUNKS * HC_IB_CHUNK)

static int protocol(hc_tl_ep_t *ep)
{
    return hc_ib_ep_fail(ep, HCOMM_ERR_PROTOCOL, NULL);
}

int hc_ib_rx_arrive(hc_tl_ep_t *ep, uint32_t imm)
{
    int slot = hc_ib_rxring_arrive(&ep->rx);
    if (slot < 0) {
        hc_error(NET, "peer %d: wrote into a receive slot without a credit", ep->peer);
        return protocol(ep);
    }
    ep->rx_imm[slot] = imm;
    int rc           = hc_ib_post_recv(ep, 1);
    if (rc != 0) {
        hc_error(NET, "peer %d: ibv_post_recv: %s", ep->peer, strerror(rc));
        return hc_ib_ep_fail(ep, HCOMM_ERR_SYSTEM, NULL);
    }
    return 0;
}

static int mismatch(hc_tl_ep_t *ep, uint64_t len, const hc_tl_req_t *req)
{
    hc_error(NET, "peer %d: message of %llu bytes arrived for a receive of %zu bytes", ep->peer,
             (unsigned long long)len, req->len);
    return protocol(ep);
}

/* An eager message in slot for the head receive: 1 completed, or -1 with
 * the endpoint failed (its completions in *n). */
static int deliver_eager(hc_tl_ep_t *ep, int slot, uint32_t len, int *n)
{
    hc_tl_req_t *req = ep->rxq_head;
    if (len != req->len || len > HC_IB_SLOT_BYTES) {
        *n += mismatch(ep, len, req);
        return -1;
    }
    const uint8_t *data = ep->rx_slots + (size_t)slot * HC_IB_SLOT_BYTES;
    hc_ib_req_pop(&ep->rxq_head, &ep->rxq_tail);
    if (req->sink != NULL && len > 0)
        req->sink(req->sink_arg, 0, data, len);
    else if (len > 0)
        memcpy(req->rbuf, data, len);
    hc_ib_rxring_consume(&ep->rx);
    req->done   = len;
    req->status = HCOMM_SUCCESS;
    return 1;
}

static hcomm_status_t stage_ensure(hc_tl_ep_t *ep)
{
    if (ep->stage != NULL)
        return HCOMM_SUCCESS;
    ep->stage = aligned_alloc(4096, STAGE_BYTES);
    if (ep->stage == NULL) {
        hc_error(NET, "peer %d: out of memory for the ib staging ring", ep->peer);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int i = 0; i < ep->nrails; i++) {
        ep->stage_mr[i] =
            ibv_reg_mr(ep->ctx->rail[i].pd, ep->stage, STAGE_BYTES, IBV_ACCESS_LOCAL_WRITE);
        if (ep->stage_mr[i] == NULL) {
            hc_error(NET, "peer %d: ibv_reg_mr of the staging ring: %s", ep->peer, strerror(errno));
            return HCOMM_ERR_SYSTEM; /* what was registered goes with the endpoint */
        }
    }
    return HCOMM_SUCCESS;
}

/* The buffer a plain receive reads into, registered on every rail. */
static hcomm_status_t rbuf_register(hc_tl_ep_t *ep, hc_ib_read_t *rd)
{
    for (int i = 0; i < ep->nrails; i++) {
        int rc =
            hc_ib_rcache_get(&ep->ctx->rail[i].rcache, rd->req->rbuf, rd->req->len, &rd->mreg[i]);
        if (rc != 0) {
            hc_error(NET, "peer %d: cannot register %zu bytes at %p on %s: %s (ulimit -l?)",
                     ep->peer, rd->req->len, rd->req->rbuf, ep->ctx->rail[i].port.nic.name,
                     strerror(rc));
            return HCOMM_ERR_SYSTEM; /* the ones taken are put by rx_abandon */
        }
    }
    return HCOMM_SUCCESS;
}

/* An RTS in slot for the head receive: the read begins (0; read_advance
 * posts it), or -1 with the endpoint failed. */
static int start_read(hc_tl_ep_t *ep, int slot, uint32_t len, int *n)
{
    hc_ib_read_t *rd = &ep->rd;
    char          why[HC_IB_WHY];
    hc_ib_rts_t   rts;
    if (hc_ib_rts_decode(ep->rx_slots + (size_t)slot * HC_IB_SLOT_BYTES, len, &rts, why,
                         sizeof(why)) != HCOMM_SUCCESS) {
        hc_error(NET, "peer %d: bad rendezvous request: %s", ep->peer, why);
        *n += protocol(ep);
        return -1;
    }
    if (rts.nrails != (uint32_t)ep->nrails) {
        hc_error(NET, "peer %d: rendezvous request over %u rails, the pair has %d", ep->peer,
                 rts.nrails, ep->nrails);
        *n += protocol(ep);
        return -1;
    }
    if (rts.len != ep->rxq_head->len) {
        *n += mismatch(ep, rts.len, ep->rxq_head);
        return -1;
    }
    hc_ib_rxring_consume(&ep->rx);
    memset(rd, 0, sizeof(*rd));
    rd->rts           = rts;
    rd->req           = hc_ib_req_pop(&ep->rxq_head, &ep->rxq_tail);
    rd->nchunks       = hc_ib_chunks(rts.len, HC_IB_CHUNK);
    hcomm_status_t st = rd->req->sink != NULL ? stage_ensure(ep) : rbuf_register(ep, rd);
    if (st != HCOMM_SUCCESS) {
        *n += hc_ib_ep_fail(ep, st, NULL);
        return -1;
    }
    return 0;
}

/* Posts the reads that rails and staging have room for. 0, or -1 failed. */
static int read_post(hc_tl_ep_t *ep, hc_ib_read_t *rd, int *n)
{
    int sink = rd->req->sink != NULL;
    while (rd->next < rd->nchunks) {
        int rail = (int)(rd->next % (uint64_t)ep->nrails);
        if (rd->inflight[rail] >= HC_IB_READS ||
            (sink && rd->next >= rd->delivered + HC_IB_STAGE_CHUNKS))
            break;
        uint64_t off, len = hc_ib_chunk_span(rd->rts.len, HC_IB_CHUNK, rd->next, &off);
        void    *dst  = sink ? ep->stage + (rd->next % HC_IB_STAGE_CHUNKS) * HC_IB_CHUNK
                             : (uint8_t *)rd->req->rbuf + off;
        uint32_t lkey = sink ? ep->stage_mr[rail]->lkey : rd->mreg[rail]->lkey;
        int      rc   = hc_ib_post_read(ep, rail, rd->next, dst, lkey, off, len);
        if (rc != 0) {
            hc_error(NET, "peer %d: ibv_post_send (read): %s", ep->peer, strerror(rc));
            *n += hc_ib_ep_fail(ep, HCOMM_ERR_SYSTEM, NULL);
            return -1;
        }
        rd->inflight[rail]++;
        rd->next++;
    }
    return 0;
}

/* Staged chunks to the sink, in order; whether any went. */
static int read_deliver(hc_tl_ep_t *ep, hc_ib_read_t *rd)
{
    int moved = 0;
    while (rd->delivered < rd->nchunks && rd->staged[rd->delivered % HC_IB_STAGE_CHUNKS]) {
        uint64_t off, len = hc_ib_chunk_span(rd->rts.len, HC_IB_CHUNK, rd->delivered, &off);
        rd->staged[rd->delivered % HC_IB_STAGE_CHUNKS] = 0;
        rd->req->sink(rd->req->sink_arg, off,
                      ep->stage + (rd->delivered % HC_IB_STAGE_CHUNKS) * HC_IB_CHUNK, len);
        rd->req->done += len;
        rd->delivered++;
        moved = 1;
    }
    return moved;
}

/* Moves the read on: 1 when it completed, 0 not yet, -1 failed. */
static int read_advance(hc_tl_ep_t *ep, int *n)
{
    hc_ib_read_t *rd = &ep->rd;
    do {
        if (read_post(ep, rd, n) != 0)
            return -1;
    } while (rd->req->sink != NULL && read_deliver(ep, rd));
    if (rd->done < rd->nchunks || (rd->req->sink != NULL && rd->delivered < rd->nchunks))
        return 0;
    for (int i = 0; i < ep->nrails; i++)
        hc_ib_rcache_put(&ep->ctx->rail[i].rcache, rd->mreg[i]);
    rd->req->done   = rd->req->len;
    rd->req->status = HCOMM_SUCCESS;
    rd->req         = NULL;
    ep->reads_done++; /* the sender learns it from the credit words */
    return 1;
}

int hc_ib_rx_read_done(hc_tl_ep_t *ep, int rail, uint32_t chunk)
{
    hc_ib_read_t *rd = &ep->rd;
    if (rd->req == NULL || rail >= ep->nrails || rd->inflight[rail] == 0 || chunk >= rd->next) {
        hc_error(NET, "peer %d: a read completed that was never posted", ep->peer);
        return hc_ib_ep_fail(ep, HCOMM_ERR_SYSTEM, NULL);
    }
    rd->inflight[rail]--;
    rd->done++;
    if (rd->req->sink != NULL)
        rd->staged[chunk % HC_IB_STAGE_CHUNKS] = 1;
    return 0;
}

/* The head arrival for the head receive: 1 completed, 2 a read begun, 0
 * nothing to do, -1 failed. */
static int match_head(hc_tl_ep_t *ep, int *n)
{
    int slot = hc_ib_rxring_head(&ep->rx);
    if (ep->rxq_head == NULL || slot < 0)
        return 0;
    uint32_t imm = ep->rx_imm[slot];
    switch (hc_ib_imm_kind(imm)) {
    case HC_IB_IMM_EAGER:
        return deliver_eager(ep, slot, hc_ib_imm_len(imm), n);
    case HC_IB_IMM_RTS:
        if (ep->gone)
            return 0; /* a dead peer's memory cannot be read: gone_check fails it */
        return start_read(ep, slot, hc_ib_imm_len(imm), n) == 0 ? 2 : -1;
    default:
        hc_error(NET, "peer %d: slot write of unknown kind %u", ep->peer, hc_ib_imm_kind(imm));
        *n += protocol(ep);
        return -1;
    }
}

int hc_ib_rx_progress(hc_tl_ep_t *ep)
{
    int n = 0;
    while (ep->status == HCOMM_SUCCESS) {
        int rc = ep->rd.req != NULL ? read_advance(ep, &n) : match_head(ep, &n);
        if (rc <= 0)
            break;
        n += rc == 1;
    }
    return n + hc_ib_ep_gone_check(ep);
}

void hc_ib_rx_abandon(hc_tl_ep_t *ep, hcomm_status_t st, int *n)
{
    hc_tl_req_t *r;
    if (ep->rd.req != NULL) {
        for (int i = 0; i < ep->nrails; i++)
            hc_ib_rcache_put(&ep->ctx->rail[i].rcache, ep->rd.mreg[i]);
        ep->rd.req->status = st;
        ep->rd.req         = NULL;
        (*n)++;
    }
    while ((r = hc_ib_req_pop(&ep->rxq_head, &ep->rxq_tail)) != NULL) {
        r->status = st;
        (*n)++;
    }
}
