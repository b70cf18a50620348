/* ucx_ctl.c - the ucx transport's control messages: hello and bye, each a
 * small tagged message on a tag that data never uses. */
#include <string.h>

#include "base/log.h"
#include "transport/ucx/ucx.h"

static void ctl_send_cb(void *request, ucs_status_t status, void *user_data)
{
    hc_ucx_ctl_t *ctl = user_data;

    (void)request;
    ctl->done   = 1;
    ctl->status = status;
    if (ctl->ep != NULL)
        hc_ucx_mark_ready(ctl->ep);
}

static void ctl_recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                        void *user_data)
{
    hc_ucx_ctl_t *ctl = user_data;

    (void)request;
    ctl->done   = 1;
    ctl->status = status;
    ctl->length = status == UCS_OK && info != NULL ? info->length : 0;
    if (ctl->ep != NULL)
        hc_ucx_mark_ready(ctl->ep);
}

/* Records how the operation started: a request to wait for, or done at once. */
static void ctl_posted(hc_ucx_ctl_t *ctl, ucs_status_ptr_t p)
{
    if (UCS_PTR_IS_PTR(p)) {
        ctl->req = p;
        return;
    }
    ctl->done   = 1;
    ctl->status = UCS_PTR_STATUS(p);
    if (ctl->ep != NULL)
        hc_ucx_mark_ready(ctl->ep);
}

void hc_ucx_ctl_send(hc_tl_ep_t *ep, hc_ucx_ctl_t *ctl, const void *buf, size_t len, unsigned kind)
{
    ucp_request_param_t prm = {.op_attr_mask =
                                   UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                               .cb.send   = ctl_send_cb,
                               .user_data = ctl};

    memset(ctl, 0, sizeof(*ctl));
    ctl->ep = ep;
    ctl_posted(ctl, hc_ucx_api.ucp_tag_send_nbx(ep->uep, buf, len,
                                                hc_ucx_ctl_tag(ep->ctx->rank, kind), &prm));
}

void hc_ucx_ctl_recv(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep, hc_ucx_ctl_t *ctl, void *buf, size_t len,
                     int peer, unsigned kind)
{
    /* the callback even for an immediate match: it alone has the length in UCX 1.13 */
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                               UCP_OP_ATTR_FIELD_USER_DATA |
                                               UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                               .cb.recv   = ctl_recv_cb,
                               .user_data = ctl};

    memset(ctl, 0, sizeof(*ctl));
    ctl->ep = ep;
    ctl_posted(ctl, hc_ucx_api.ucp_tag_recv_nbx(ctx->worker, buf, len, hc_ucx_ctl_tag(peer, kind),
                                                UINT64_MAX, &prm));
}

void hc_ucx_ctl_release(hc_tl_ctx_t *ctx, hc_ucx_ctl_t *ctl)
{
    if (ctl->req != NULL) {
        /* cancels only a receive not yet matched; no callback after the free */
        if (!ctl->done)
            hc_ucx_api.ucp_request_cancel(ctx->worker, ctl->req);
        hc_ucx_api.ucp_request_free(ctl->req);
        ctl->req = NULL;
    }
    ctl->done = 0;
}

void hc_ucx_bye_send(hc_tl_ep_t *ep)
{
    if (ep->bye_sent || ep->uep == NULL || ep->gone != HC_UCX_PEER_OK)
        return;
    ep->bye_sent = 1;
    ep->bye_out  = (hc_ucx_bye_t){
         .magic = HC_UCX_MAGIC, .rank = (uint32_t)ep->ctx->rank, .sent = hc_ucx_ep_sent(ep)};
    hc_ucx_ctl_send(ep, &ep->bye_tx, &ep->bye_out, sizeof(ep->bye_out), HC_UCX_TAG_BYE);
}

int hc_ucx_bye_check(hc_tl_ep_t *ep)
{
    hc_ucx_ctl_t *ctl = &ep->bye_rx;
    int           ok;

    if (!ctl->done)
        return 0;
    ok = ctl->status == UCS_OK && ctl->length == sizeof(ep->bye_in) &&
         ep->bye_in.magic == HC_UCX_MAGIC && ep->bye_in.rank == (uint32_t)ep->peer;
    hc_ucx_ctl_release(ep->ctx, ctl);
    if (!ok) {
        if (ctl->status == UCS_ERR_CANCELED)
            return 0;
        hc_warn(NET, "peer %d: malformed bye (%s, %zu bytes) ignored", ep->peer,
                hc_ucx_api.ucs_status_string(ctl->status), ctl->length);
        /* the peer's real bye may still come */
        hc_ucx_ctl_recv(ep->ctx, ep, ctl, &ep->bye_in, sizeof(ep->bye_in), ep->peer,
                        HC_UCX_TAG_BYE);
        return 0;
    }
    /* what it sent before the bye is here or on its way, even if it died since */
    ep->gone      = HC_UCX_PEER_CLOSED;
    ep->peer_sent = ep->bye_in.sent;
    hc_debug(NET, "peer %d: closed after %llu messages", ep->peer,
             (unsigned long long)ep->peer_sent);
    return 1;
}
