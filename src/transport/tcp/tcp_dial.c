/* tcp_dial.c - the active side of the tcp transport's connection set-up: the
 * hello each connection starts with, and the dial that sends it. A dial never
 * waits: its connects go on in the kernel while connect() returns
 * HCOMM_IN_PROGRESS, and each later call moves them on (a peer whose host
 * drops the SYNs holds up nothing else this rank does). */
#include "transport/tcp/tcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sock.h"

/* One socket of a pending dial: connecting (fd >= 0, !connected), saying
 * hello (sent bytes of it gone), or not started (fd -1: the kernel gave up
 * on an earlier attempt). */
typedef struct dial_sock {
    int     fd;
    int     connected;
    size_t  sent;
    uint8_t hello[HC_TCP_HELLO_BYTES];
} dial_sock_t;

struct hc_tcp_dial {
    struct sockaddr_storage ss;
    socklen_t               len;
    dial_sock_t             sock[];
};

hcomm_status_t hc_tcp_hello_encode(const hc_tl_ctx_t *ctx, int idx, const uint8_t *peer_nonce,
                                   uint8_t *out)
{
    hc_tcp_put64(out, HC_TCP_MAGIC | ((uint64_t)HC_TCP_VERSION << 32));
    hc_tcp_put64(out + 8, (uint64_t)(uint32_t)ctx->rank);
    hc_tcp_put64(out + 16, (uint32_t)idx | ((uint64_t)(uint32_t)ctx->nsocks << 32));
    hc_tcp_put64(out + 24, ctx->stripe_min);
    hc_auth_part_t parts[2] = {{out, HC_TCP_HELLO_FIELDS}, {peer_nonce, 16}};
    if (hc_auth_mac(ctx->cookie, "hcomm tcp hello", parts, 2, out + HC_TCP_HELLO_FIELDS) != 0)
        return HCOMM_ERR_SYSTEM;
    return HCOMM_SUCCESS;
}

/* Closes and frees peer's pending dial, if any; keep_fds: its sockets went
 * to an endpoint. */
static void dial_free(hc_tl_ctx_t *ctx, int peer, int keep_fds)
{
    hc_tcp_dial_t *d = ctx->dials[peer];
    if (d == NULL)
        return;
    for (int i = 0; !keep_fds && i < ctx->nsocks; i++)
        if (d->sock[i].fd >= 0)
            close(d->sock[i].fd);
    free(d);
    ctx->dials[peer] = NULL;
    ctx->ndials--;
}

void hc_tcp_dial_drop(hc_tl_ctx_t *ctx, int peer)
{
    dial_free(ctx, peer, 0);
}

static hcomm_status_t dial_new(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer,
                               const struct sockaddr *sa, socklen_t salen)
{
    hc_tcp_dial_t *d = calloc(1, sizeof(*d) + (size_t)ctx->nsocks * sizeof(d->sock[0]));
    if (d == NULL) {
        hc_error(NET, "peer %d: out of memory for a dial", peer->rank);
        return HCOMM_ERR_NO_MEMORY;
    }
    memcpy(&d->ss, sa, salen);
    d->len = salen;
    for (int i = 0; i < ctx->nsocks; i++) {
        d->sock[i].fd     = -1;
        hcomm_status_t st = hc_tcp_hello_encode(ctx, i, peer->nonce, d->sock[i].hello);
        if (st != HCOMM_SUCCESS) {
            hc_error(NET, "peer %d: cannot make the hello of socket %d", peer->rank, i);
            free(d);
            return st;
        }
    }
    ctx->dials[peer->rank] = d;
    ctx->ndials++;
    return HCOMM_SUCCESS;
}

/* Moves socket i on as far as it goes without waiting: HCOMM_SUCCESS once
 * its hello is all sent, HCOMM_IN_PROGRESS before, else the failure (logged
 * once, here). ready: poll found its connect ended. */
static hcomm_status_t sock_step(hc_tl_ctx_t *ctx, hc_tcp_dial_t *d, int peer, int i, int ready)
{
    /* quiet: the line below says what failed, once; a refusal is the peer's
     * listener closed (it listened from init on): HCOMM_ERR_REMOTE at once */
    hc_sock_peer_t who = {.subsys = HC_SUBSYS(NET), .rank = peer, .listening = 1, .quiet_close = 1};
    dial_sock_t   *s   = &d->sock[i];
    hcomm_status_t st;
    if (s->fd < 0) {
        st = hc_sock_connect_start((struct sockaddr *)&d->ss, d->len, ctx->sockbuf, who, &s->fd);
        if (st == HCOMM_IN_PROGRESS)
            return st;
        s->connected = st == HCOMM_SUCCESS;
    } else if (!s->connected) {
        if (!ready)
            return HCOMM_IN_PROGRESS;
        st = hc_sock_connect_end(s->fd, who);
        if (st == HCOMM_ERR_TIMEOUT) { /* the kernel's SYN retries ran out: the context's
                                        * timeout, not the kernel's, ends the dial */
            close(s->fd);
            s->fd = -1;
            return HCOMM_IN_PROGRESS;
        }
        s->connected = st == HCOMM_SUCCESS;
    } else {
        st = HCOMM_SUCCESS;
    }
    if (st != HCOMM_SUCCESS) {
        hc_error(NET, "peer %d: connect of socket %d: %s", peer, i,
                 st == HCOMM_ERR_REMOTE ? "refused: it closed its listener (failed, was "
                                          "destroyed or died)"
                                        : hcomm_status_str(st));
        return st;
    }
    /* the hello fits a fresh socket's buffer, but a short send only waits for the next call */
    while (s->sent < sizeof(s->hello)) {
        ssize_t n = send(s->fd, s->hello + s->sent, sizeof(s->hello) - s->sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            s->sent += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return HCOMM_IN_PROGRESS;
        hc_error(NET, "peer %d: no hello on socket %d: %s", peer, i,
                 n < 0 ? strerror(errno) : "no progress");
        return n < 0 ? hc_sock_status(errno) : HCOMM_ERR_SYSTEM;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_tcp_dial_step(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer,
                                const struct sockaddr *sa, socklen_t salen, int *fds)
{
    int            r = peer->rank;
    hcomm_status_t st;
    if (ctx->dials[r] == NULL && (st = dial_new(ctx, peer, sa, salen)) != HCOMM_SUCCESS)
        return st;
    hc_tcp_dial_t *d = ctx->dials[r];
    struct pollfd  pf[HC_TCP_MAX_SOCKS];
    int            np = 0, done = 0;
    for (int i = 0; i < ctx->nsocks; i++)
        if (d->sock[i].fd >= 0 && !d->sock[i].connected)
            pf[np++] = (struct pollfd){.fd = d->sock[i].fd, .events = POLLOUT};
    if (np > 0 && poll(pf, (nfds_t)np, 0) < 0 && errno != EINTR) {
        hc_error(NET, "peer %d: poll: %s", r, strerror(errno));
        hc_tcp_dial_drop(ctx, r);
        return HCOMM_ERR_SYSTEM;
    }
    for (int i = 0, k = 0; i < ctx->nsocks; i++) {
        int ready = 0;
        if (k < np && pf[k].fd == d->sock[i].fd)
            ready = pf[k++].revents != 0;
        st = sock_step(ctx, d, r, i, ready);
        if (st != HCOMM_SUCCESS && st != HCOMM_IN_PROGRESS) {
            hc_tcp_dial_drop(ctx, r);
            return st;
        }
        done += st == HCOMM_SUCCESS;
    }
    if (done < ctx->nsocks)
        return HCOMM_IN_PROGRESS;
    for (int i = 0; i < ctx->nsocks; i++)
        fds[i] = d->sock[i].fd;
    dial_free(ctx, r, 1);
    return HCOMM_SUCCESS;
}

int hc_tcp_dial_fds(const hc_tl_ctx_t *ctx, struct pollfd *pfds, int max)
{
    int n = 0;
    for (int r = 0; ctx->ndials > 0 && r < ctx->nranks; r++) {
        const hc_tcp_dial_t *d = ctx->dials[r];
        for (int i = 0; d != NULL && i < ctx->nsocks; i++) {
            if (d->sock[i].fd < 0 || d->sock[i].sent == sizeof(d->sock[i].hello))
                continue;
            if (n == max)
                return -1;
            pfds[n++] = (struct pollfd){.fd = d->sock[i].fd, .events = POLLOUT};
        }
    }
    return n;
}
