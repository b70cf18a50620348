/* ucx_progress.c - the ucx transport's progress: the worker moves data and
 * marks endpoints ready; each ready endpoint hands its requests back in
 * posting order, and notices a peer that went. */
#include "base/clock.h"
#include "base/log.h"
#include "transport/ucx/ucx.h"

static hcomm_status_t map_status(ucs_status_t s)
{
    switch (s) {
    case UCS_OK:
        return HCOMM_SUCCESS;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return HCOMM_ERR_PROTOCOL;
    case UCS_ERR_NO_MEMORY:
        return HCOMM_ERR_NO_MEMORY;
    default: /* a broken endpoint: the peer's doing, as far as we can tell */
        return HCOMM_ERR_REMOTE;
    }
}

/* Hands back a request UCX is done with; its status. */
static hcomm_status_t req_finish(hc_tl_ep_t *ep, hc_tl_req_t *req, int recv)
{
    void          *ucx    = (void *)(uintptr_t)req->priv[0];
    uint8_t       *bounce = (uint8_t *)(uintptr_t)req->priv[1];
    ucs_status_t   us     = hc_ucx_req_ucs(req);
    hcomm_status_t st     = map_status(us);

    if (ucx != NULL)
        hc_ucx_api.ucp_request_free(ucx);
    req->priv[0] = req->priv[1] = 0;
    if (us == UCS_ERR_MESSAGE_TRUNCATED)
        hc_error(NET, "peer %d: a message longer than the %zu-byte receive arrived", ep->peer,
                 req->len);
    else if (us != UCS_OK)
        hc_error(NET, "peer %d: %s of %zu bytes failed: %s", ep->peer, recv ? "receive" : "send",
                 req->len, hc_ucx_api.ucs_status_string(us));
    else if (recv && req->priv[3] != req->len) {
        hc_error(NET, "peer %d: a message of %llu bytes arrived for a receive of %zu", ep->peer,
                 (unsigned long long)req->priv[3], req->len);
        st = HCOMM_ERR_PROTOCOL;
    }
    if (st == HCOMM_SUCCESS) {
        req->done = req->len;
        if (bounce != NULL)
            req->sink(req->sink_arg, 0, bounce, req->len);
    }
    if (bounce != NULL)
        hc_ucx_bounce_put(ep->ctx, bounce);
    return st;
}

/* Hands back the queue's requests UCX finished, in order, up to the first
 * still pending; stops at a failure (*err). */
static int reap_queue(hc_tl_ep_t *ep, int recv, hcomm_status_t *err)
{
    hc_tl_req_t **head = recv ? &ep->rq_head : &ep->sq_head;
    hc_tl_req_t **tail = recv ? &ep->rq_tail : &ep->sq_tail;
    uint64_t     *done = recv ? &ep->rx_done : &ep->tx_done;
    hc_tl_req_t  *req;
    int           n = 0;

    while ((req = *head) != NULL && (req->priv[2] & HC_UCX_DONE)) {
        hcomm_status_t st = req_finish(ep, req, recv);

        *head = req->next;
        if (*head == NULL)
            *tail = NULL;
        req->next = NULL;
        n++;
        req->status = st;
        if (st != HCOMM_SUCCESS) {
            *err = st;
            break;
        }
        (*done)++; /* a failed send is not one the bye may count */
    }
    return n;
}

/* The peer went: a closed one's last messages may still be received; once
 * nothing more can come, the endpoint fails. */
static int gone_step(hc_tl_ep_t *ep)
{
    int pending = ep->sq_head != NULL || ep->rq_head != NULL;

    if (ep->gone == HC_UCX_PEER_CLOSED && ep->sq_head == NULL &&
        (ep->rq_head != NULL ? ep->rx_done : ep->rx_seq) < ep->peer_sent)
        return 0;
    if (ep->gone == HC_UCX_PEER_DEAD)
        hc_error(NET, "peer %d died (%s)", ep->peer,
                 ep->ucx_error != UCS_OK ? hc_ucx_api.ucs_status_string(ep->ucx_error)
                                         : "its process is gone");
    else if (pending)
        hc_error(NET, "peer %d closed its endpoint with requests pending", ep->peer);
    else
        hc_debug(NET, "peer %d closed its endpoint", ep->peer);
    return hc_ucx_ep_fail(ep, HCOMM_ERR_REMOTE);
}

static void ctl_reap(hc_tl_ctx_t *ctx, hc_ucx_ctl_t *ctl)
{
    if (ctl->done)
        hc_ucx_ctl_release(ctx, ctl);
}

/* A hello that did not go leaves the peer waiting for it at connect, and
 * our receives from the peer unmatched: the endpoint fails now, saying why,
 * not at the operation's timeout. */
static int hello_reap(hc_tl_ep_t *ep)
{
    ucs_status_t s = ep->hello_tx.status;

    if (!ep->hello_tx.done)
        return 0;
    hc_ucx_ctl_release(ep->ctx, &ep->hello_tx);
    if (s == UCS_OK || ep->status != HCOMM_SUCCESS || ep->gone != HC_UCX_PEER_OK)
        return 0;
    hc_error(NET, "peer %d: the connection's hello failed: %s", ep->peer,
             hc_ucx_api.ucs_status_string(s));
    return hc_ucx_ep_fail(ep, HCOMM_ERR_REMOTE);
}

static int ep_reap(hc_tl_ep_t *ep)
{
    hcomm_status_t err = HCOMM_SUCCESS;
    int            n;

    ep->ready = 0;
    ctl_reap(ep->ctx, &ep->bye_tx);
    if (ep->status != HCOMM_SUCCESS) {
        ctl_reap(ep->ctx, &ep->hello_tx);
        return hc_ucx_ep_reap_failed(ep);
    }
    hc_ucx_bye_check(ep); /* first: a hello to a peer that left is no news */
    if ((n = hello_reap(ep)) > 0 || ep->status != HCOMM_SUCCESS)
        return n;
    n = reap_queue(ep, 0, &err);
    if (err == HCOMM_SUCCESS)
        n += reap_queue(ep, 1, &err);
    if (err != HCOMM_SUCCESS)
        return n + hc_ucx_ep_fail(ep, err);
    if (ep->gone != HC_UCX_PEER_OK)
        n += gone_step(ep);
    return n;
}

int hc_ucx_progress(hc_tl_ctx_t *ctx)
{
    int n = 0, dead = 0;

    /* the clock only every 16 calls: this loop is the latency path */
    if ((++ctx->tick & 15) == 0 || ctx->next_check_ms == 0) {
        uint64_t now = hc_clock_coarse_ms();
        if (now >= ctx->next_check_ms) {
            ctx->next_check_ms = now + HC_UCX_CHECK_MS;
            dead               = hc_ucx_check_pids(ctx);
        }
    }
    /* a dead peer's last messages are taken in before its receives are judged */
    if (dead > 0)
        for (int i = 0; i < HC_UCX_DRAIN_MAX && hc_ucx_api.ucp_worker_progress(ctx->worker) != 0;
             i++)
            ;
    else
        hc_ucx_api.ucp_worker_progress(ctx->worker);
    while (ctx->nready > 0)
        n += ep_reap(ctx->ready[--ctx->nready]);
    return n;
}
