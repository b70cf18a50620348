/* ib_handshake.c - the end of connection set-up, in progress(): the lower
 * rank reads REPLY, connects its QPs and sends READY; the higher rank reads
 * READY. And afterwards, the side channel's watch: its hang-up is the
 * peer's death or close. Never run with a device present (see ib.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "transport/ib/ib.h"

/* REPLY is all here: check it, connect, say READY. */
static int reply_take(hc_tl_ep_t *ep, size_t len)
{
    hc_ib_conn_t   c;
    char           why[HC_IB_WHY];
    hc_sock_peer_t who   = {.subsys = HC_SUBSYS(NET), .rank = ep->peer};
    uint8_t        ready = HC_IB_READY;
    if (hc_ib_conn_decode(ep->hs, len, &c, why, sizeof(why)) != HCOMM_SUCCESS) {
        hc_error(NET, "peer %d: bad ib connection reply: %s", ep->peer, why);
        return hc_ib_ep_fail(ep, HCOMM_ERR_PROTOCOL, NULL);
    }
    hcomm_status_t st =
        hc_ib_conn_check(&c, ep->ctx->cookie, HC_IB_CONN_REPLY, (uint32_t)ep->ctx->rank, ep->peer,
                         HC_IB_NSLOTS, HC_IB_SLOT_BYTES, why, sizeof(why));
    if (st == HCOMM_SUCCESS && c.nrails != (uint32_t)ep->nrails)
        st = (snprintf(why, sizeof(why), "over %u rails, want %d", c.nrails, ep->nrails),
              HCOMM_ERR_PROTOCOL);
    if (st != HCOMM_SUCCESS) {
        hc_error(NET, "peer %d: refused its ib connection reply: %s", ep->peer, why);
        return hc_ib_ep_fail(ep, st, NULL);
    }
    ep->remote = c;
    for (int i = 0; i < ep->nrails && st == HCOMM_SUCCESS; i++)
        st = hc_ib_qp_connect(ep, i);
    if (st != HCOMM_SUCCESS)
        return hc_ib_ep_fail(ep, st, NULL);
    st =
        hc_sock_send_all(ep->fd, &ready, 1, hc_clock_now() + hc_tl_timeout(&ep->ctx->timeout), who);
    if (st != HCOMM_SUCCESS)
        return hc_ib_ep_fail(ep, st, NULL);
    ep->state = HC_IB_EP_UP;
    hc_debug(NET, "peer %d: ib connected over %d rail(s)", ep->peer, ep->nrails);
    return 0;
}

static int reply_read(hc_tl_ep_t *ep)
{
    size_t total          = 0;
    char   why[HC_IB_WHY] = "";
    int    rc             = hc_ib_conn_read(ep->fd, ep->hs, &ep->hs_got, &total, why, sizeof(why));
    if (rc == 0)
        return 0;
    if (rc == 1)
        return reply_take(ep, total);
    if (rc == -2) {
        hc_error(NET, "peer %d: bad ib connection reply: %s", ep->peer, why);
        return hc_ib_ep_fail(ep, HCOMM_ERR_PROTOCOL, NULL);
    }
    hc_error(NET,
             "peer %d: its side channel closed before it answered (%s): a wrong cookie "
             "there, or it died",
             ep->peer, errno != 0 ? strerror(errno) : "end of stream");
    return hc_ib_ep_fail(ep, HCOMM_ERR_REMOTE, NULL);
}

static int ready_read(hc_tl_ep_t *ep)
{
    uint8_t b;
    ssize_t n = recv(ep->fd, &b, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0) {
        hc_error(NET, "peer %d: its side channel closed before READY (%s)", ep->peer,
                 n == 0 ? "end of stream" : strerror(errno));
        return hc_ib_ep_fail(ep, HCOMM_ERR_REMOTE, NULL);
    }
    if (b != HC_IB_READY) {
        hc_error(NET, "peer %d: 0x%02x on the side channel, want READY", ep->peer, b);
        return hc_ib_ep_fail(ep, HCOMM_ERR_PROTOCOL, NULL);
    }
    ep->state = HC_IB_EP_UP;
    hc_debug(NET, "peer %d: ib connected over %d rail(s)", ep->peer, ep->nrails);
    return 0;
}

int hc_ib_handshake(hc_tl_ep_t *ep)
{
    if (ep->status != HCOMM_SUCCESS || ep->state == HC_IB_EP_UP)
        return 0;
    return ep->state == HC_IB_EP_DIALED ? reply_read(ep) : ready_read(ep);
}

static hcomm_status_t pfds_reserve(hc_tl_ctx_t *ctx, size_t n)
{
    if (n <= ctx->pfds_cap)
        return HCOMM_SUCCESS;
    size_t         cap = n < 16 ? 16 : 2 * n;
    struct pollfd *p   = realloc(ctx->pfds, cap * sizeof(*p));
    if (p != NULL)
        ctx->pfds = p;
    uint32_t *q = p != NULL ? realloc(ctx->pfd_ep, cap * sizeof(*q)) : NULL;
    if (q == NULL)
        return HCOMM_ERR_NO_MEMORY;
    ctx->pfd_ep   = q;
    ctx->pfds_cap = cap;
    return HCOMM_SUCCESS;
}

/* After READY the side channel carries nothing: readable means its end. */
static int watch_one(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep, short revents)
{
    uint8_t b[16];
    ssize_t n = recv(ep->fd, b, sizeof(b), MSG_DONTWAIT);
    if (n > 0) {
        hc_error(NET, "peer %d: %zd unexpected bytes on the ib side channel", ep->peer, n);
        return hc_ib_ep_fail(ep, HCOMM_ERR_PROTOCOL, NULL);
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR) && !(revents & (POLLHUP | POLLERR)))
        return 0;
    /* what the peer wrote before it went is in the CQ: take it in first */
    int done = hc_ib_poll_all(ctx);
    return done + hc_ib_ep_gone(ep);
}

int hc_ib_liveness(hc_tl_ctx_t *ctx)
{
    size_t np = 0;
    int    n  = 0;
    if (pfds_reserve(ctx, ctx->neps) != HCOMM_SUCCESS)
        return 0;
    for (uint32_t e = 0; e < ctx->neps; e++) {
        hc_tl_ep_t *ep = ctx->eps[e];
        if (ep->status != HCOMM_SUCCESS || ep->state != HC_IB_EP_UP || ep->gone || ep->fd < 0)
            continue;
        ctx->pfd_ep[np] = e;
        ctx->pfds[np++] = (struct pollfd){.fd = ep->fd, .events = POLLIN | POLLRDHUP};
    }
    if (np == 0 || poll(ctx->pfds, (nfds_t)np, 0) <= 0)
        return 0;
    for (size_t k = 0; k < np; k++) {
        hc_tl_ep_t *ep = ctx->eps[ctx->pfd_ep[k]];
        /* an earlier one's CQ poll may have failed this one meanwhile */
        if (ctx->pfds[k].revents != 0 && ep->status == HCOMM_SUCCESS && !ep->gone)
            n += watch_one(ctx, ep, ctx->pfds[k].revents);
    }
    return n;
}
