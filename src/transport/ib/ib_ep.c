/* ib_ep.c - ib endpoints: their memory and QPs, the connection data that
 * describes them, failure, and the request ops. Never run with a device
 * present (see ib.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "transport/ib/ib.h"

#define MEM_HDR 4096 /* credit words in [0, 16), out [64, 80); slots from here */

void hc_ib_req_push(hc_tl_req_t **head, hc_tl_req_t **tail, hc_tl_req_t *req)
{
    req->next = NULL;
    if (*tail != NULL)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
}

hc_tl_req_t *hc_ib_req_pop(hc_tl_req_t **head, hc_tl_req_t **tail)
{
    hc_tl_req_t *r = *head;
    if (r == NULL)
        return NULL;
    *head = r->next;
    if (*head == NULL)
        *tail = NULL;
    r->next = NULL;
    return r;
}

static hcomm_status_t ep_mem(hc_tl_ep_t *ep)
{
    size_t slots = (size_t)HC_IB_NSLOTS * HC_IB_SLOT_BYTES;
    ep->mem_len  = MEM_HDR + 2 * slots;
    ep->mem      = aligned_alloc(4096, ep->mem_len);
    if (ep->mem == NULL) {
        hc_error(NET, "peer %d: out of memory for %zu bytes of ib slots", ep->peer, ep->mem_len);
        return HCOMM_ERR_NO_MEMORY;
    }
    memset(ep->mem, 0, MEM_HDR);
    ep->ctrl_in  = ep->mem;
    ep->ctrl_out = ep->mem + 64;
    ep->rx_slots = ep->mem + MEM_HDR;
    ep->tx_slots = ep->rx_slots + slots;
    ep->mr       = ibv_reg_mr(ep->ctx->rail[0].pd, ep->mem, ep->mem_len,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (ep->mr == NULL) {
        hc_error(NET, "peer %d: ibv_reg_mr of the ib slots (%zu bytes): %s (ulimit -l?)", ep->peer,
                 ep->mem_len, strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_ib_ep_create(hc_tl_ctx_t *ctx, int peer, int nrails, hc_tl_ep_t **ep_p)
{
    if (ctx->neps >= HC_IB_EP_ID_MAX)
        return HCOMM_ERR_NO_MEMORY;
    hc_tl_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        hc_error(NET, "peer %d: out of memory for an endpoint", peer);
        return HCOMM_ERR_NO_MEMORY;
    }
    ep->ctx    = ctx;
    ep->peer   = peer;
    ep->nrails = nrails;
    ep->id     = ctx->neps;
    ep->fd     = -1;
    ep->status = HCOMM_SUCCESS;
    hc_ib_txflow_init(&ep->tx, HC_IB_NSLOTS);
    hc_ib_rxring_init(&ep->rx, HC_IB_NSLOTS);
    hcomm_status_t st = ep_mem(ep);
    for (int i = 0; i < nrails && st == HCOMM_SUCCESS; i++)
        if ((st = hc_ib_rail_reserve(&ctx->rail[i])) == HCOMM_SUCCESS)
            ep->reserved++;
    for (int i = 0; i < nrails && st == HCOMM_SUCCESS; i++)
        st = hc_ib_qp_create(ep, i);
    int rc = st == HCOMM_SUCCESS ? hc_ib_post_recv(ep, HC_IB_NSLOTS) : 0;
    if (rc != 0) {
        hc_error(NET, "peer %d: ibv_post_recv: %s", peer, strerror(rc));
        st = HCOMM_ERR_SYSTEM;
    }
    if (st != HCOMM_SUCCESS) {
        hc_ib_ep_destroy(ep);
        return st;
    }
    *ep_p = ep;
    return HCOMM_SUCCESS;
}

void hc_ib_ep_destroy(hc_tl_ep_t *ep)
{
    if (ep == NULL)
        return;
    for (int i = 0; i < ep->reserved; i++)
        ep->ctx->rail[i].cq_used -= HC_IB_CQ_PER_EP;
    for (int i = 0; i < ep->nrails; i++) {
        if (ep->qp[i] != NULL)
            ibv_destroy_qp(ep->qp[i]);
        if (ep->stage_mr[i] != NULL)
            ibv_dereg_mr(ep->stage_mr[i]);
    }
    if (ep->mr != NULL)
        ibv_dereg_mr(ep->mr);
    if (ep->fd >= 0)
        close(ep->fd);
    free(ep->stage);
    free(ep->mem);
    free(ep);
}

void hc_ib_ep_conn(const hc_tl_ep_t *ep, uint32_t kind, hc_ib_conn_t *c)
{
    const hc_tl_ctx_t *ctx = ep->ctx;
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->rank = (uint32_t)ctx->rank;
    (void)hc_ib_conn_tag(ctx->cookie, kind, (uint32_t)ctx->rank, (uint32_t)ep->peer, c->tag);
    c->nrails     = (uint32_t)ep->nrails;
    c->nslots     = HC_IB_NSLOTS;
    c->slot_size  = HC_IB_SLOT_BYTES;
    c->rkey       = ep->mr->rkey;
    c->slots_addr = (uintptr_t)ep->rx_slots;
    c->ctrl_addr  = (uintptr_t)ep->ctrl_in;
    for (int i = 0; i < ep->nrails; i++) {
        const hc_ib_rail_t *r  = &ctx->rail[i];
        hc_ib_rail_conn_t  *rc = &c->rail[i];
        rc->qpn                = ep->qp[i]->qp_num;
        rc->psn                = ep->psn[i];
        rc->lid                = r->port.lid;
        rc->mtu                = r->port.mtu;
        rc->link               = (uint8_t)r->port.nic.link;
        rc->rd_dest            = r->rd_dest;
        memcpy(rc->gid, r->port.gid, 16);
    }
}

static int pending(const hc_tl_ep_t *ep)
{
    return ep->txq_head != NULL || ep->fly_head != NULL || ep->rxq_head != NULL ||
           ep->rndv_retired < ep->rndv_posted || ep->rd.req != NULL;
}

int hc_ib_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st, const char *what)
{
    if (ep->status != HCOMM_SUCCESS)
        return 0;
    /* an idle endpoint whose peer left may just be a peer that finished first */
    if (what != NULL && pending(ep))
        hc_error(NET, "peer %d: ib connection lost (%s)", ep->peer, what);
    else if (what != NULL)
        hc_debug(NET, "peer %d: ib connection closed while idle (%s)", ep->peer, what);
    ep->status = st;
    hc_ib_qp_error(ep);
    if (ep->fd >= 0)
        close(ep->fd);
    ep->fd = -1;
    int n  = 0;
    hc_ib_tx_abandon(ep, st, &n);
    hc_ib_rx_abandon(ep, st, &n);
    return n;
}

int hc_ib_ep_gone_check(hc_tl_ep_t *ep)
{
    if (!ep->gone || ep->status != HCOMM_SUCCESS)
        return 0;
    /* what the peer sent before it went is delivered first, unless a send
     * waits: that one can never complete */
    int head = hc_ib_rxring_head(&ep->rx);
    int tx   = ep->txq_head != NULL || ep->fly_head != NULL || ep->rndv_retired < ep->rndv_posted;
    if (!tx && head >= 0 && hc_ib_imm_kind(ep->rx_imm[head]) == HC_IB_IMM_EAGER &&
        ep->rd.req == NULL)
        return 0;
    return hc_ib_ep_fail(ep, HCOMM_ERR_REMOTE, "the peer closed or died");
}

int hc_ib_ep_gone(hc_tl_ep_t *ep)
{
    ep->gone = 1;
    return hc_ib_ep_gone_check(ep);
}

hcomm_status_t hc_ib_ep_status(hc_tl_ep_t *ep)
{
    return ep == NULL ? HCOMM_ERR_INVALID_ARG : ep->status;
}

hcomm_status_t hc_ib_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req)
{
    hcomm_status_t st = hc_tl_msg_args(ep, buf, len, NULL, req);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    hc_tl_req_init(req, ep, len); /* priv[1]: 1 for a rendezvous send */
    req->sbuf    = buf;
    req->priv[1] = 0;
    hc_ib_req_push(&ep->txq_head, &ep->txq_tail, req);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_ib_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                           void *sink_arg, hc_tl_req_t *req)
{
    hcomm_status_t st = hc_tl_msg_args(ep, buf, len, sink, req);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    hc_tl_req_init(req, ep, len);
    req->rbuf     = buf;
    req->sink     = sink;
    req->sink_arg = sink_arg;
    hc_ib_req_push(&ep->rxq_head, &ep->rxq_tail, req);
    return HCOMM_SUCCESS;
}
