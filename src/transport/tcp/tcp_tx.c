/* tcp_tx.c - the sending side of a tcp endpoint: small messages leave in
 * batches (headers and payloads gathered into one sendmsg), striped ones on
 * every socket as each has room. */
#include "transport/tcp/tcp.h"

#include <errno.h>
#include <string.h>

#include "base/log.h"

/* Sends iov on socket s. Returns bytes sent, 0 when the socket is full, -1 when
 * the endpoint failed (its completions added to *nc). */
static ssize_t sock_send(hc_tl_ep_t *ep, int s, struct iovec *iov, int niov, int *nc)
{
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    for (;;) {
        ssize_t n = sendmsg(ep->sock[s].fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        *nc += hc_tcp_ep_fail(ep, HCOMM_ERR_REMOTE, errno, "send");
        return -1;
    }
}

static int tx_pop(hc_tl_ep_t *ep)
{
    hc_tl_req_t *r = ep->tx_head;
    ep->tx_head    = r->next;
    if (ep->tx_head == NULL)
        ep->tx_tail = NULL;
    r->next   = NULL;
    r->status = HCOMM_SUCCESS;
    return 1;
}

/* Header and payload of the leading unstriped messages, in one call. Returns 1
 * when all of them went, 0 when the socket filled up, -1 on failure. */
static int tx_batch(hc_tl_ep_t *ep, int *nc)
{
    struct iovec iov[2 * HC_TCP_IOV];
    int          niov  = 0;
    size_t       total = 0;
    for (hc_tl_req_t *r = ep->tx_head; r != NULL && niov + 2 <= 2 * HC_TCP_IOV; r = r->next) {
        if (hc_tcp_striped(ep, r->len))
            break;
        if (r->priv[0] < HC_TCP_HDR_BYTES) {
            iov[niov].iov_base = (uint8_t *)&r->priv[1] + r->priv[0];
            iov[niov++].iov_len = HC_TCP_HDR_BYTES - r->priv[0];
        }
        if (r->done < r->len) {
            iov[niov].iov_base  = (uint8_t *)(uintptr_t)r->sbuf + r->done;
            iov[niov++].iov_len = r->len - r->done;
        }
        total += (HC_TCP_HDR_BYTES - r->priv[0]) + (r->len - r->done);
    }
    ssize_t sent = sock_send(ep, 0, iov, niov, nc);
    if (sent < 0)
        return -1;
    size_t left = (size_t)sent;
    while (left > 0) {
        hc_tl_req_t *r = ep->tx_head;
        size_t       h = HC_TCP_HDR_BYTES - r->priv[0];
        h              = h < left ? h : left;
        r->priv[0] += h;
        left -= h;
        size_t p = r->len - r->done;
        p        = p < left ? p : left;
        r->done += p;
        left -= p;
        if (r->priv[0] == HC_TCP_HDR_BYTES && r->done == r->len)
            *nc += tx_pop(ep);
    }
    return (size_t)sent == total ? 1 : 0;
}

/* Socket s's part of striped message r; socket 0 leads with the header.
 * Returns 1 when the share is sent, 0 when the socket filled up, -1 on failure. */
static int tx_share(hc_tl_ep_t *ep, hc_tl_req_t *r, int s, int *nc)
{
    hc_tcp_sock_t *sk = &ep->sock[s];
    for (;;) {
        struct iovec iov[5];
        int          niov = 0;
        size_t       hdr  = 0;
        if (s == 0 && r->priv[0] < HC_TCP_HDR_BYTES) {
            hdr             = HC_TCP_HDR_BYTES - r->priv[0];
            iov[0].iov_base = (uint8_t *)&r->priv[1] + r->priv[0];
            iov[niov++].iov_len = hdr;
        }
        niov += hc_tcp_share_iov(r->len, ep->nsocks, s, sk->tx_done, r->sbuf, iov + niov, 4);
        if (niov == 0)
            return 1;
        ssize_t n = sock_send(ep, s, iov, niov, nc);
        if (n <= 0)
            return (int)n;
        size_t h = (size_t)n < hdr ? (size_t)n : hdr;
        r->priv[0] += h;
        sk->tx_done += (size_t)n - h;
        r->done += (size_t)n - h;
    }
}

static int tx_striped(hc_tl_ep_t *ep, int *nc)
{
    hc_tl_req_t *r    = ep->tx_head;
    int          full = 0;
    for (int s = 0; s < ep->nsocks; s++) {
        int rc = tx_share(ep, r, s, nc);
        if (rc < 0)
            return -1;
        full |= (rc == 0);
    }
    if (full)
        return 0;
    for (int s = 0; s < ep->nsocks; s++)
        ep->sock[s].tx_done = 0;
    *nc += tx_pop(ep);
    return 1;
}

int hc_tcp_tx_progress(hc_tl_ep_t *ep)
{
    int nc = 0;
    while (ep->tx_head != NULL && ep->status == HCOMM_SUCCESS) {
        int rc = hc_tcp_striped(ep, ep->tx_head->len) ? tx_striped(ep, &nc) : tx_batch(ep, &nc);
        if (rc <= 0)
            break;
    }
    return nc;
}
