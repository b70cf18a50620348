/* tcp_ep.c - tcp endpoints: queues, failure, progress and the idle liveness check. */
#include "transport/tcp/tcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

hcomm_status_t hc_tcp_ep_create(hc_tl_ctx_t *ctx, int peer, const int *fds, hc_tl_ep_t **ep_p)
{
    hc_tl_ep_t *ep = calloc(1, sizeof(*ep) + (size_t)ctx->nsocks * sizeof(ep->sock[0]));
    if (ep == NULL)
        goto err_nomem;
    ep->bounce = malloc(HC_TCP_BOUNCE);
    if (ep->bounce == NULL)
        goto err_free_ep;
    ep->ctx    = ctx;
    ep->peer   = peer;
    ep->nsocks = ctx->nsocks;
    ep->status = HCOMM_SUCCESS;
    for (int i = 0; i < ctx->nsocks; i++)
        ep->sock[i].fd = fds[i];
    *ep_p = ep;
    return HCOMM_SUCCESS;

err_free_ep:
    free(ep);
err_nomem:
    hc_error(NET, "peer %d: out of memory for an endpoint", peer);
    return HCOMM_ERR_NO_MEMORY;
}

static void ep_close(hc_tl_ep_t *ep)
{
    for (int i = 0; i < ep->nsocks; i++) {
        if (ep->sock[i].fd >= 0)
            close(ep->sock[i].fd);
        ep->sock[i].fd = -1;
    }
}

void hc_tcp_ep_destroy(hc_tl_ep_t *ep)
{
    if (ep == NULL)
        return;
    ep_close(ep);
    free(ep->stage);
    free(ep->bounce);
    free(ep);
}

static int complete_all(hc_tl_req_t **head, hc_tl_req_t **tail, hcomm_status_t st)
{
    int n = 0;
    while (*head != NULL) {
        hc_tl_req_t *r = *head;
        *head          = r->next;
        r->next        = NULL;
        r->status      = st;
        n++;
    }
    *tail = NULL;
    return n;
}

/* Fails the endpoint once: closes its sockets (so the peer notices too) and
 * completes every pending request with st. what == NULL: the caller logged. */
int hc_tcp_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st, int err, const char *what)
{
    if (ep->status != HCOMM_SUCCESS)
        return 0;
    /* An idle endpoint whose peer left may just be a peer that finished first. */
    if (what != NULL && (ep->tx_head != NULL || ep->rx_head != NULL))
        hc_error(NET, "peer %d: connection lost (%s): %s", ep->peer, what,
                 err != 0 ? strerror(err) : "closed by peer");
    else if (what != NULL)
        hc_debug(NET, "peer %d: connection closed while idle (%s): %s", ep->peer, what,
                err != 0 ? strerror(err) : "closed by peer");
    ep->status = st;
    ep_close(ep);
    int n = complete_all(&ep->tx_head, &ep->tx_tail, st);
    return n + complete_all(&ep->rx_head, &ep->rx_tail, st);
}

hcomm_status_t hc_tcp_ep_status(hc_tl_ep_t *ep)
{
    return ep == NULL ? HCOMM_ERR_INVALID_ARG : ep->status;
}

static void req_init(hc_tl_req_t *req, hc_tl_ep_t *ep, size_t len)
{
    hc_tl_req_init(req, ep, len); /* priv[0]: header bytes moved; [2], [3]: tcp_rx.c */
    hc_tcp_put64((uint8_t *)&req->priv[1], len);
    req->priv[2] = req->priv[3] = 0;
}

static void enqueue(hc_tl_req_t **head, hc_tl_req_t **tail, hc_tl_req_t *req)
{
    if (*tail != NULL)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
}

hcomm_status_t hc_tcp_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req)
{
    hcomm_status_t st = hc_tl_msg_args(ep, buf, len, NULL, req);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    req_init(req, ep, len);
    req->sbuf = buf;
    enqueue(&ep->tx_head, &ep->tx_tail, req);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_tcp_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req)
{
    hcomm_status_t st = hc_tl_msg_args(ep, buf, len, sink, req);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    if (sink != NULL && ep->stage == NULL) {
        ep->stage = malloc(HC_TCP_STAGE);
        if (ep->stage == NULL) {
            hc_error(NET, "peer %d: out of memory for the receive staging buffer", ep->peer);
            return HCOMM_ERR_NO_MEMORY;
        }
    }
    req_init(req, ep, len);
    req->rbuf     = buf;
    req->sink     = sink;
    req->sink_arg = sink_arg;
    enqueue(&ep->rx_head, &ep->rx_tail, req);
    return HCOMM_SUCCESS;
}

/* Socket 0 carries every header, so it alone tells that a peer left: a secondary
 * socket's shutdown may come while socket 0 still holds undelivered messages
 * (the peer sent, then destroyed its communicator). A striped payload cut short
 * fails in the receive path. Data already in the bounce buffer is delivered
 * before a hang-up of socket 0 counts. */
static int ep_check(hc_tl_ep_t *ep, const struct pollfd *pf)
{
    int n = 0;
    /* Mid striped payload, socket 0 may have carried all of its share and then
     * the peer's end of stream while the other sockets still bring theirs: a
     * read-ahead here would take that end for a lost peer. */
    int mid0 = ep->rx_head != NULL && ep->rx_head->priv[0] >= HC_TCP_HDR_BYTES &&
               hc_tcp_striped(ep, ep->rx_head->len);
    if ((pf[0].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) && !mid0)
        n += hc_tcp_rx_fill_bounce(ep);
    if (ep->status == HCOMM_SUCCESS && ep->rx_head != NULL)
        n += hc_tcp_rx_progress(ep);
    for (int s = 0; s < ep->nsocks && ep->status == HCOMM_SUCCESS; s++) {
        short ev   = pf[s].revents;
        int   hard = ev & (POLLERR | POLLNVAL);
        int   mid  = ep->rx_head != NULL && ep->rx_head->priv[0] >= HC_TCP_HDR_BYTES &&
                   hc_tcp_striped(ep, ep->rx_head->len);
        int   gone = s == 0 && (ev & (POLLHUP | POLLRDHUP)) && !(ev & POLLIN) &&
                   ep->b_wpos == ep->b_rpos && !mid;
        if (hard || gone) {
            int       err = 0;
            socklen_t el  = sizeof(err);
            if (getsockopt(ep->sock[s].fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                err = errno;
            n += hc_tcp_ep_fail(ep, HCOMM_ERR_REMOTE, err, "hang-up");
        }
    }
    return n;
}

/* One poll(0) over every socket, so that idle endpoints notice a dead peer. */
static int liveness(hc_tl_ctx_t *ctx)
{
    size_t np = 0;
    int    n  = 0;
    for (int e = 0; e < ctx->neps; e++) {
        hc_tl_ep_t *ep = ctx->eps[e];
        if (ep->status != HCOMM_SUCCESS)
            continue;
        for (int s = 0; s < ep->nsocks; s++) {
            short want = POLLRDHUP;
            if (s == 0 && ep->b_wpos - ep->b_rpos < HC_TCP_BOUNCE)
                want |= POLLIN;
            else if (s == 0)
                want = 0; /* bounce full: a shut-down shows when it drains */
            ctx->pfds[np++] = (struct pollfd){.fd = ep->sock[s].fd, .events = want};
        }
    }
    if (np == 0 || poll(ctx->pfds, (nfds_t)np, 0) <= 0)
        return 0;
    np = 0;
    for (int e = 0; e < ctx->neps; e++) {
        hc_tl_ep_t *ep = ctx->eps[e];
        if (ep->status != HCOMM_SUCCESS)
            continue;
        n += ep_check(ep, &ctx->pfds[np]);
        np += (size_t)ep->nsocks;
    }
    return n;
}

int hc_tcp_progress(hc_tl_ctx_t *ctx)
{
    if (ctx == NULL)
        return 0;
    int n = 0;
    for (int e = 0; e < ctx->neps; e++) {
        hc_tl_ep_t *ep = ctx->eps[e];
        if (ep->tx_head != NULL && ep->status == HCOMM_SUCCESS)
            n += hc_tcp_tx_progress(ep);
        if (ep->rx_head != NULL && ep->status == HCOMM_SUCCESS)
            n += hc_tcp_rx_progress(ep);
    }
    uint64_t now = hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE);
    if (now >= ctx->next_check_ns) {
        ctx->next_check_ns = now + HC_TCP_CHECK_NS;
        n += liveness(ctx);
    }
    return n;
}

int hc_tcp_wait_fds(hc_tl_ctx_t *ctx, struct pollfd *pfds, int max)
{
    int n = 0;
    for (int e = 0; ctx != NULL && e < ctx->neps; e++) {
        hc_tl_ep_t *ep = ctx->eps[e];
        short       ev = (short)((ep->tx_head != NULL ? POLLOUT : 0) |
                                 (ep->rx_head != NULL ? POLLIN : 0));
        /* an unstriped send goes on socket 0 only: the others' room would
         * wake every poll at once while socket 0 stays full */
        int out_all = ep->tx_head != NULL && hc_tcp_striped(ep, ep->tx_head->len);
        if (ep->status != HCOMM_SUCCESS || ev == 0)
            continue;
        for (int k = 0; k < ep->nsocks; k++) {
            short e = k == 0 || out_all ? ev : (short)(ev & ~POLLOUT);
            if (e == 0)
                continue;
            if (n == max)
                return -1;
            pfds[n++] = (struct pollfd){.fd = ep->sock[k].fd, .events = e};
        }
    }
    /* a dial's connect ending, so that its next connect call comes at once */
    int k = ctx != NULL ? hc_tcp_dial_fds(ctx, pfds + n, max - n) : 0;
    return k < 0 ? -1 : n + k;
}
