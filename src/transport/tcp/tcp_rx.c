/* tcp_rx.c - the receiving side of a tcp endpoint. Socket 0 is read through a
 * small read-ahead buffer (many small messages per recv); large pieces go
 * straight into the receive buffer, or through the staging buffer to the sink. */
#include "transport/tcp/tcp.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include "base/clock.h"
#include "base/log.h"

/* Receives into iov on socket s. Returns bytes received, 0 when none are
 * there, -1 when the endpoint failed (its completions added to *nc). */
static ssize_t sock_recv(hc_tl_ep_t *ep, int s, struct iovec *iov, int niov, int *nc)
{
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    for (;;) {
        ssize_t n = recvmsg(ep->sock[s].fd, &msg, MSG_DONTWAIT);
        if (n > 0)
            return n;
        if (n == 0 && s == 0 && ep->b_wpos > ep->b_rpos)
            return 0; /* the peer left after sending: deliver what it sent first */
        if (n == 0) {
            *nc += hc_tcp_ep_fail(ep, HCOMM_ERR_REMOTE, 0, "recv");
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        *nc += hc_tcp_ep_fail(ep, HCOMM_ERR_REMOTE, errno, "recv");
        return -1;
    }
}

static ssize_t bounce_fill(hc_tl_ep_t *ep, int *nc)
{
    if (ep->b_rpos == ep->b_wpos) {
        ep->b_rpos = ep->b_wpos = 0;
    } else if (ep->b_rpos > 0) {
        memmove(ep->bounce, ep->bounce + ep->b_rpos, ep->b_wpos - ep->b_rpos);
        ep->b_wpos -= ep->b_rpos;
        ep->b_rpos = 0;
    }
    if (ep->b_wpos == HC_TCP_BOUNCE)
        return 0;
    struct iovec iov = {.iov_base = ep->bounce + ep->b_wpos, .iov_len = HC_TCP_BOUNCE - ep->b_wpos};
    ssize_t      n   = sock_recv(ep, 0, &iov, 1, nc);
    if (n > 0)
        ep->b_wpos += (size_t)n;
    return n;
}

/* Reads ahead on socket 0 (the liveness check: also sees an end of stream). */
int hc_tcp_rx_fill_bounce(hc_tl_ep_t *ep)
{
    int nc = 0;
    (void)bounce_fill(ep, &nc);
    return nc;
}

/* Up to want (> 0) bytes of socket 0's stream into dst: read-ahead first. */
static ssize_t rx0_read(hc_tl_ep_t *ep, void *dst, size_t want, int *nc)
{
    if (ep->b_rpos == ep->b_wpos) {
        if (want >= HC_TCP_DIRECT_MIN) {
            struct iovec iov = {.iov_base = dst, .iov_len = want};
            return sock_recv(ep, 0, &iov, 1, nc);
        }
        ssize_t n = bounce_fill(ep, nc);
        if (n <= 0)
            return n;
    }
    size_t n = ep->b_wpos - ep->b_rpos;
    n        = n < want ? n : want;
    memcpy(dst, ep->bounce + ep->b_rpos, n);
    ep->b_rpos += n;
    return (ssize_t)n;
}

/* 1 once r's header is in and matches its length, 0 to wait, -1 failed. */
static int rx_header(hc_tl_ep_t *ep, hc_tl_req_t *r, int *nc)
{
    uint8_t *hdr = (uint8_t *)&r->priv[1];
    while (r->priv[0] < HC_TCP_HDR_BYTES) {
        ssize_t n = rx0_read(ep, hdr + r->priv[0], HC_TCP_HDR_BYTES - r->priv[0], nc);
        if (n <= 0)
            return (int)n;
        r->priv[0] += (size_t)n;
    }
    uint64_t len = hc_tcp_get64(hdr);
    if (len != r->len) {
        hc_error(NET, "peer %d: message of %llu bytes arrived for a receive of %zu bytes",
                 ep->peer, (unsigned long long)len, r->len);
        *nc += hc_tcp_ep_fail(ep, HCOMM_ERR_PROTOCOL, 0, NULL);
        return -1;
    }
    return 1;
}

/* An unstriped payload, all on socket 0. */
static int rx_plain(hc_tl_ep_t *ep, hc_tl_req_t *r, int *nc)
{
    while (r->done < r->len) {
        size_t want = r->len - r->done;
        void  *dst  = ep->stage;
        /* A sink's receive has no buffer: rbuf + done was arithmetic on NULL
         * (undefined; UBSan, tests/fuzz/fuzz_tcp_rx.c). */
        if (r->sink != NULL)
            want = want < HC_TCP_STAGE ? want : HC_TCP_STAGE;
        else
            dst = (uint8_t *)r->rbuf + r->done;
        ssize_t n = rx0_read(ep, dst, want, nc);
        if (n <= 0)
            return (int)n;
        if (r->sink != NULL)
            r->sink(r->sink_arg, r->done, dst, (size_t)n);
        r->done += (size_t)n;
    }
    return 1;
}

/* A striped payload for a sink: chunk by chunk in message order, so the sink
 * sees ascending offsets; the other sockets' kernel buffers hold what is ahead. */
static int rx_striped_seq(hc_tl_ep_t *ep, hc_tl_req_t *r, int *nc)
{
    size_t c = hc_tcp_chunk(r->len, ep->nsocks);
    while (r->done < r->len) {
        size_t j    = r->done / c;
        int    s    = (int)(j % (size_t)ep->nsocks);
        size_t end  = (j + 1) * c < r->len ? (j + 1) * c : r->len;
        size_t want = end - r->done < HC_TCP_STAGE ? end - r->done : HC_TCP_STAGE;
        ssize_t n;
        if (s == 0) {
            n = rx0_read(ep, ep->stage, want, nc);
        } else {
            struct iovec iov = {.iov_base = ep->stage, .iov_len = want};
            n                = sock_recv(ep, s, &iov, 1, nc);
        }
        if (n <= 0)
            return (int)n;
        r->sink(r->sink_arg, r->done, ep->stage, (size_t)n);
        r->done += (size_t)n;
    }
    return 1;
}

/* A striped payload into the buffer: every socket as its data comes. */
static int rx_striped_any(hc_tl_ep_t *ep, hc_tl_req_t *r, int *nc)
{
    for (int s = 0; s < ep->nsocks; s++) {
        hc_tcp_sock_t *sk = &ep->sock[s];
        for (;;) {
            struct iovec iov[4];
            int niov = hc_tcp_share_iov(r->len, ep->nsocks, s, sk->rx_done, r->rbuf, iov, 4);
            if (niov == 0)
                break;
            ssize_t n = s == 0 ? rx0_read(ep, iov[0].iov_base, iov[0].iov_len, nc)
                               : sock_recv(ep, s, iov, niov, nc);
            if (n < 0)
                return -1;
            if (n == 0)
                break;
            sk->rx_done += (size_t)n;
            r->done += (size_t)n;
        }
    }
    if (r->done < r->len)
        return 0;
    for (int s = 0; s < ep->nsocks; s++)
        ep->sock[s].rx_done = 0;
    return 1;
}

/* Timing a receive for the link test (hc_tl_req_t.timed_ns; docs/resilience.md,
 * "Which link is slow"): only bytes that arrive while the receiver waits for
 * them. Once r's header is in, the clock is armed at the end of a turn that
 * found no more of r: priv[2] the time then (0: not armed), priv[3] bytes of r
 * that other sockets already held then, not to be timed. Each later turn adds
 * the time since and its bytes to timed_ns and timed_bytes (running sums until
 * r completes), unless the receiver was away longer than RX_AWAY_NS (its own
 * work, a nap, another rank on its CPU): when those bytes came is unknown, so
 * they are left out and the clock is armed again. */
#define RX_AWAY_NS 5000000ull

/* Bytes of socket s's share of a striped r from chunk j0 on. */
static size_t share_left(const hc_tl_ep_t *ep, const hc_tl_req_t *r, int s, size_t j0)
{
    size_t c = hc_tcp_chunk(r->len, ep->nsocks), n = (size_t)ep->nsocks, left = 0;
    for (size_t j = j0 + ((size_t)s + n - j0 % n) % n; j * c < r->len; j += n)
        left += ((j + 1) * c < r->len ? (j + 1) * c : r->len) - j * c;
    return left;
}

/* What the kernel (and the read-ahead) already holds of r. Only a striped
 * sink receive leaves any at the end of a turn: it drains one socket at a
 * time, in message order. An ioctl per socket, each time the clock is armed. */
static size_t rx_queued(const hc_tl_ep_t *ep, const hc_tl_req_t *r)
{
    if (r->sink == NULL || !hc_tcp_striped(ep, r->len))
        return 0;
    size_t j   = r->done / hc_tcp_chunk(r->len, ep->nsocks);
    size_t got = 0;
    for (int s = 0; s < ep->nsocks; s++) {
        int q = 0;
        if (s == (int)(j % (size_t)ep->nsocks) || ioctl(ep->sock[s].fd, FIONREAD, &q) != 0)
            continue; /* the socket the turn starved on holds none of r */
        size_t held = (size_t)q + (s == 0 ? ep->b_wpos - ep->b_rpos : 0);
        size_t left = share_left(ep, r, s, j + 1);
        got += held < left ? held : left; /* more is later messages' */
    }
    return got;
}

static void rx_time_arm(hc_tl_ep_t *ep, hc_tl_req_t *r, uint64_t now)
{
    r->priv[2] = now;
    r->priv[3] = rx_queued(ep, r);
}

/* After r's turn: rc 0 (found no more) or 1 (complete); done0 and t0 (0: not
 * armed) as the turn began. */
static void rx_time_turn(hc_tl_ep_t *ep, hc_tl_req_t *r, int rc, size_t done0, uint64_t t0)
{
    if (r->len < HC_TL_TIMED_MIN || r->priv[0] < HC_TCP_HDR_BYTES)
        return; /* before its header, only the sender's lateness would be timed */
    if (t0 == 0) {
        if (rc == 0 && r->len - r->done >= HC_TL_TIMED_MIN)
            rx_time_arm(ep, r, hc_clock_now_ns());
        return;
    }
    uint64_t now = hc_clock_now_ns();
    if (t0 - r->priv[2] <= RX_AWAY_NS) {
        size_t got  = r->done - done0;
        size_t held = got < r->priv[3] ? got : r->priv[3];
        r->priv[3] -= held;
        r->timed_ns += now - r->priv[2];
        r->timed_bytes += got - held;
        r->priv[2] = now;
    } else if (rc == 0) {
        rx_time_arm(ep, r, now);
    }
    if (rc > 0 && r->timed_bytes < HC_TL_TIMED_MIN)
        r->timed_ns = r->timed_bytes = 0; /* too little for a measure */
}

int hc_tcp_rx_progress(hc_tl_ep_t *ep)
{
    int nc = 0;
    while (ep->rx_head != NULL && ep->status == HCOMM_SUCCESS) {
        hc_tl_req_t *r     = ep->rx_head;
        size_t       done0 = r->done;
        uint64_t     t0    = r->priv[2] != 0 ? hc_clock_now_ns() : 0;
        int          rc    = rx_header(ep, r, &nc);
        if (rc > 0 && !hc_tcp_striped(ep, r->len))
            rc = rx_plain(ep, r, &nc);
        else if (rc > 0)
            rc = r->sink != NULL ? rx_striped_seq(ep, r, &nc) : rx_striped_any(ep, r, &nc);
        if (rc >= 0)
            rx_time_turn(ep, r, rc, done0, t0);
        if (rc <= 0)
            break;
        ep->rx_head = r->next;
        if (ep->rx_head == NULL)
            ep->rx_tail = NULL;
        r->next   = NULL;
        r->status = HCOMM_SUCCESS;
        nc++;
    }
    return nc;
}
