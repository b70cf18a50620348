/* ib_cq.c - progress: every rail's completion queue polled, each completion
 * handed to its endpoint (the work request id says which and what), then
 * every endpoint moved on. Never run with a device present (see ib.h). */
#include <arpa/inet.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "transport/ib/ib.h"

#define POLL_BATCH 32
#define POLL_ROUNDS 16 /* batches per rail per progress call, at most */

/* A failed work request: the peer stopped answering (retries exhausted, or
 * flushed after that) makes it gone, so that what arrived is still
 * delivered; anything else fails the endpoint. */
static int wc_error(hc_tl_ep_t *ep, const struct ibv_wc *wc)
{
    switch (wc->status) {
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_WR_FLUSH_ERR:
        hc_debug(NET, "peer %d: ib work request failed: %s", ep->peer,
                 ibv_wc_status_str(wc->status));
        return hc_ib_ep_gone(ep);
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ABORT_ERR:
        hc_error(NET, "peer %d: ib work request refused by the peer: %s", ep->peer,
                 ibv_wc_status_str(wc->status));
        return hc_ib_ep_fail(ep, HCOMM_ERR_REMOTE, NULL);
    default:
        hc_error(NET, "peer %d: ib work request failed: %s (vendor error 0x%x)", ep->peer,
                 ibv_wc_status_str(wc->status), wc->vendor_err);
        return hc_ib_ep_fail(ep, HCOMM_ERR_SYSTEM, NULL);
    }
}

static int dispatch(hc_tl_ctx_t *ctx, const struct ibv_wc *wc)
{
    uint32_t id = hc_ib_wr_ep(wc->wr_id);
    if (id >= ctx->neps)
        return 0;
    hc_tl_ep_t *ep = ctx->eps[id];
    if (ep->status != HCOMM_SUCCESS)
        return 0; /* flushed work of a failed endpoint */
    if (wc->status != IBV_WC_SUCCESS)
        return wc_error(ep, wc);
    switch (hc_ib_wr_kind(wc->wr_id)) {
    case HC_IB_WR_RECV:
        if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
            hc_error(NET, "peer %d: a receive completed without immediate data", ep->peer);
            return hc_ib_ep_fail(ep, HCOMM_ERR_PROTOCOL, NULL);
        }
        return hc_ib_rx_arrive(ep, ntohl(wc->imm_data));
    case HC_IB_WR_SLOT:
        return hc_ib_tx_slot_done(ep);
    case HC_IB_WR_CTRL:
        ep->ctrl_busy = 0;
        return 0;
    case HC_IB_WR_READ:
        return hc_ib_rx_read_done(ep, (int)hc_ib_wr_rail(wc->wr_id), hc_ib_wr_chunk(wc->wr_id));
    default:
        return 0;
    }
}

int hc_ib_poll_all(hc_tl_ctx_t *ctx)
{
    struct ibv_wc wc[POLL_BATCH];
    int           n = 0;
    for (int r = 0; r < ctx->nrails; r++) {
        for (int round = 0; round < POLL_ROUNDS; round++) {
            int got = ibv_poll_cq(ctx->rail[r].cq, POLL_BATCH, wc);
            if (got < 0) {
                hc_error(NET, "ib %s: ibv_poll_cq failed", ctx->rail[r].port.nic.name);
                break;
            }
            for (int k = 0; k < got; k++)
                n += dispatch(ctx, &wc[k]);
            if (got < POLL_BATCH)
                break;
        }
    }
    return n;
}

static int ep_progress(hc_tl_ep_t *ep)
{
    int n = 0;
    if (ep->state != HC_IB_EP_UP)
        n += hc_ib_handshake(ep);
    if (ep->status != HCOMM_SUCCESS)
        return n;
    n += hc_ib_tx_credits(ep);
    n += hc_ib_tx_progress(ep);
    n += hc_ib_rx_progress(ep);
    return n + hc_ib_ctrl_report(ep);
}

int hc_ib_progress(hc_tl_ctx_t *ctx)
{
    if (ctx == NULL)
        return 0;
    int n = hc_ib_poll_all(ctx);
    for (uint32_t e = 0; e < ctx->neps; e++)
        if (ctx->eps[e]->status == HCOMM_SUCCESS)
            n += ep_progress(ctx->eps[e]);
    uint64_t now = hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE);
    if (now >= ctx->next_check_ns) {
        ctx->next_check_ns = now + HC_IB_CHECK_NS;
        n += hc_ib_liveness(ctx);
    }
    return n;
}
