/* ucx_req.c - the ucx transport's requests: posting tagged sends and
 * receives, and letting go of them (abandon). */
#include <stdint.h>

#include "base/log.h"
#include "transport/ucx/ucx.h"

static inline void req_set_done(hc_tl_req_t *req, ucs_status_t status)
{
    req->priv[2] = HC_UCX_DONE | (uint64_t)(uint32_t)(int32_t)status << 32;
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    hc_tl_req_t *req = user_data;

    (void)request;
    req_set_done(req, status);
    hc_ucx_mark_ready(req->ep);
}

static void recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                    void *user_data)
{
    hc_tl_req_t *req = user_data;

    (void)request;
    req->priv[3] = status == UCS_OK && info != NULL ? info->length : 0;
    req_set_done(req, status);
    hc_ucx_mark_ready(req->ep);
}

/* Records how the operation started. UCX may have completed it already, even
 * through the callback before returning (a receive matched at once). */
static void req_posted(hc_tl_req_t *req, ucs_status_ptr_t p)
{
    if (UCS_PTR_IS_PTR(p)) {
        req->priv[0] = (uint64_t)(uintptr_t)p;
        return;
    }
    req_set_done(req, UCS_PTR_STATUS(p));
    hc_ucx_mark_ready(req->ep);
}

static void enqueue(hc_tl_req_t **head, hc_tl_req_t **tail, hc_tl_req_t *req)
{
    if (*tail != NULL)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
}

hcomm_status_t hc_ucx_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req)
{
    /* small messages eagerly, copied out at once: complete without the
     * receiver (a rendezvous waits for it), so sent before a close means sent */
    uint32_t            fast = len <= HC_UCX_EAGER_MAX ? UCP_OP_ATTR_FLAG_FAST_CMPL : 0;
    ucp_request_param_t prm  = {.op_attr_mask =
                                    UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | fast,
                                .cb.send   = send_cb,
                                .user_data = req};
    ucs_status_ptr_t    p;
    hcomm_status_t      st = hc_tl_msg_args(ep, buf, len, NULL, req);

    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    if (ep->gone != HC_UCX_PEER_OK || ep->uep == NULL)
        return HCOMM_ERR_REMOTE;
    hc_tl_req_init(req, ep, len);
    req->sbuf    = buf;
    req->priv[1] = req->priv[2] = req->priv[3] = 0;
    p = hc_ucx_api.ucp_tag_send_nbx(ep->uep, buf, len, hc_ucx_tag(ep->ctx->rank, ep->tx_seq++),
                                    &prm);
    enqueue(&ep->sq_head, &ep->sq_tail, req);
    req_posted(req, p);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_ucx_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req)
{
    /* the callback even for an immediate match: UCX 1.13 leaves recv_info
     * unset then, and the length must be checked */
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                               UCP_OP_ATTR_FIELD_USER_DATA |
                                               UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                               .cb.recv   = recv_cb,
                               .user_data = req};
    void               *dst = buf, *bounce = NULL;
    ucs_status_ptr_t    p;
    hcomm_status_t      st = hc_tl_msg_args(ep, buf, len, sink, req);

    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    hc_tl_ctx_t *ctx = ep->ctx;
    /* a closed peer's last messages can still be received, nothing beyond */
    if (ep->gone != HC_UCX_PEER_OK &&
        (ep->gone != HC_UCX_PEER_CLOSED || ep->rx_seq >= ep->peer_sent)) {
        hc_ucx_ep_fail(ep, HCOMM_ERR_REMOTE);
        return HCOMM_ERR_REMOTE;
    }
    if (sink != NULL && len > 0) {
        dst = bounce = hc_ucx_bounce_get(ctx, len);
        if (dst == NULL) {
            hc_error(NET, "peer %d: out of memory for a %zu-byte receive buffer", ep->peer, len);
            return HCOMM_ERR_NO_MEMORY;
        }
    }
    hc_tl_req_init(req, ep, len);
    req->rbuf     = buf;
    req->sink     = sink;
    req->sink_arg = sink_arg;
    req->priv[1]  = (uint64_t)(uintptr_t)bounce;
    req->priv[2] = req->priv[3] = 0;
    p = hc_ucx_api.ucp_tag_recv_nbx(ctx->worker, dst, len, hc_ucx_tag(ep->peer, ep->rx_seq++),
                                    UINT64_MAX, &prm);
    enqueue(&ep->rq_head, &ep->rq_tail, req);
    req_posted(req, p);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_ucx_ep_status(hc_tl_ep_t *ep)
{
    return ep->status;
}

/* UCX forgets the request (fini): a receive not yet matched is cancelled;
 * after the free no callback comes. A matched one may still write until the
 * worker is destroyed: its bounce buffer is kept until then. */
static void req_forget(hc_tl_ctx_t *ctx, hc_tl_req_t *req, int recv)
{
    void *ucx     = (void *)(uintptr_t)req->priv[0];
    void *bounce  = (void *)(uintptr_t)req->priv[1];
    int   writing = 0;

    if (ucx != NULL) {
        if (recv && !(req->priv[2] & HC_UCX_DONE))
            hc_ucx_api.ucp_request_cancel(ctx->worker, ucx);
        writing = !(req->priv[2] & HC_UCX_DONE);
        hc_ucx_api.ucp_request_free(ucx);
    }
    if (bounce != NULL && writing)
        hc_ucx_bounce_bury(ctx, bounce);
    else if (bounce != NULL)
        hc_ucx_bounce_put(ctx, bounce);
    req->priv[0] = req->priv[1] = 0;
}

void hc_ucx_ep_abandon(hc_tl_ep_t *ep)
{
    hc_tl_req_t **heads[2] = {&ep->sq_head, &ep->rq_head};
    hc_tl_req_t **tails[2] = {&ep->sq_tail, &ep->rq_tail};

    for (int recv = 0; recv < 2; recv++) {
        hc_tl_req_t *req;
        while ((req = *heads[recv]) != NULL) {
            *heads[recv] = req->next;
            req->next    = NULL;
            req_forget(ep->ctx, req, recv);
        }
        *tails[recv] = NULL;
    }
}

/* Hands back, in order, the failed endpoint's requests that UCX is done
 * with, with the endpoint's failure; stops at the first UCX still holds. */
static int reap_failed_queue(hc_tl_ep_t *ep, hc_tl_req_t **head, hc_tl_req_t **tail)
{
    hc_tl_req_t *req;
    int          n = 0;

    while ((req = *head) != NULL && (req->priv[2] & HC_UCX_DONE)) {
        void *ucx    = (void *)(uintptr_t)req->priv[0];
        void *bounce = (void *)(uintptr_t)req->priv[1];

        if (ucx != NULL)
            hc_ucx_api.ucp_request_free(ucx);
        if (bounce != NULL)
            hc_ucx_bounce_put(ep->ctx, bounce);
        req->priv[0] = req->priv[1] = 0;
        *head                       = req->next;
        req->next                   = NULL;
        req->status                 = ep->status;
        n++;
    }
    if (*head == NULL)
        *tail = NULL;
    return n;
}

int hc_ucx_ep_reap_failed(hc_tl_ep_t *ep)
{
    return reap_failed_queue(ep, &ep->sq_head, &ep->sq_tail) +
           reap_failed_queue(ep, &ep->rq_head, &ep->rq_tail);
}

/* Receives not yet matched are cancelled. A matched one (a rendezvous under
 * way) cannot be: UCX writes into its buffer until it is done, as a send
 * reads from its own; each request stays queued, and is handed back failed
 * only once UCX is done with it (hc_ucx_ep_reap_failed, from progress). A
 * stuck one is bounded by the caller's timeout, and by fini. Except a send
 * to a dead peer: none reads it any more, and one over shared memory (no
 * peer error handling) would never end; UCX forgets it. */
int hc_ucx_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st)
{
    int n;

    if (ep->status != HCOMM_SUCCESS)
        return 0;
    ep->status = st;
    for (hc_tl_req_t *req = ep->rq_head; req != NULL; req = req->next)
        if (req->priv[0] != 0 && !(req->priv[2] & HC_UCX_DONE))
            hc_ucx_api.ucp_request_cancel(ep->ctx->worker, (void *)(uintptr_t)req->priv[0]);
    if (ep->gone == HC_UCX_PEER_DEAD)
        for (hc_tl_req_t *req = ep->sq_head; req != NULL; req = req->next)
            if (!(req->priv[2] & HC_UCX_DONE)) {
                req_forget(ep->ctx, req, 0);
                req->priv[2] = HC_UCX_DONE;
            }
    n = hc_ucx_ep_reap_failed(ep);
    /* a failure of ours: the peer learns that nothing more comes */
    if (st != HCOMM_ERR_REMOTE)
        hc_ucx_bye_send(ep);
    return n;
}

uint64_t hc_ucx_ep_sent(const hc_tl_ep_t *ep)
{
    uint64_t n = ep->tx_done;

    for (const hc_tl_req_t *r                                                      = ep->sq_head;
         r != NULL && (r->priv[2] & HC_UCX_DONE) && hc_ucx_req_ucs(r) == UCS_OK; r = r->next)
        n++;
    return n;
}
