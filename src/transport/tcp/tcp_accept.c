/* tcp_accept.c - the passive side of connection set-up: accepts from the
 * listener, reads hellos without ever blocking on one client, and keeps
 * connections of ranks whose connect() comes later. */
#include "transport/tcp/tcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

static void conn_drop(hc_tl_ctx_t *ctx, int i)
{
    close(ctx->conns[i].fd);
    ctx->conns[i] = ctx->conns[--ctx->nconns];
}

static int conn_taken(const hc_tl_ctx_t *ctx, int rank, int idx)
{
    for (int i = 0; i < ctx->nconns; i++)
        if (ctx->conns[i].rank == rank && ctx->conns[i].idx == idx)
            return 1;
    return 0;
}

/* Checks a complete hello. Returns 1 if it names a lower rank's socket, 0 if the
 * connection is refused (logged), or an error status for a configuration that
 * differs between the two ranks. */
static int hello_check(hc_tl_ctx_t *ctx, hc_tcp_conn_t *c, const int *fds, int peer)
{
    uint64_t w0     = hc_tcp_get64(c->hello);
    uint64_t rank   = hc_tcp_get64(c->hello + 24);
    uint64_t w4     = hc_tcp_get64(c->hello + 32);
    uint64_t smin   = hc_tcp_get64(c->hello + 40);
    uint32_t idx    = (uint32_t)w4;
    uint32_t nsocks = (uint32_t)(w4 >> 32);

    if ((uint32_t)w0 != HC_TCP_MAGIC || memcmp(c->hello + 8, ctx->cookie, 16) != 0) {
        hc_warn(NET, "refused connection from %s: wrong cookie", c->from);
        return 0;
    }
    if ((w0 >> 32) != HC_TCP_VERSION || rank >= (uint64_t)ctx->rank || idx >= nsocks) {
        hc_warn(NET, "refused connection from %s: bad hello (version %u rank %llu socket %u)",
                c->from, (unsigned)(w0 >> 32), (unsigned long long)rank, idx);
        return 0;
    }
    if (nsocks != (uint32_t)ctx->nsocks || smin != ctx->stripe_min) {
        hc_error(NET, "peer %d: HCOMM_TCP_NSOCKS/HCOMM_TCP_STRIPE_MIN differ: %u/%llu there, "
                      "%d/%zu here", (int)rank, nsocks, (unsigned long long)smin, ctx->nsocks,
                 ctx->stripe_min);
        return HCOMM_ERR_INVALID_USAGE;
    }
    if (ctx->by_rank[rank] != NULL || conn_taken(ctx, (int)rank, (int)idx) ||
        ((int)rank == peer && fds[idx] >= 0)) {
        hc_warn(NET, "refused connection from %s: duplicate socket %u of rank %d", c->from,
                idx, (int)rank);
        return 0;
    }
    c->rank = (int)rank;
    c->idx  = (int)idx;
    return 1;
}

/* Reads more of a pending hello. Returns an error status only for a fatal one. */
static hcomm_status_t conn_read(hc_tl_ctx_t *ctx, int i, const int *fds, int peer)
{
    hc_tcp_conn_t *c = &ctx->conns[i];
    ssize_t n = recv(c->fd, c->hello + c->got, HC_TCP_HELLO_BYTES - c->got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return HCOMM_SUCCESS;
    if (n <= 0) {
        hc_debug(NET, "connection from %s closed before its hello: %s", c->from,
                 n == 0 ? "end of stream" : strerror(errno));
        conn_drop(ctx, i);
        return HCOMM_SUCCESS;
    }
    c->got += (size_t)n;
    if (c->got < HC_TCP_HELLO_BYTES)
        return HCOMM_SUCCESS;
    int r = hello_check(ctx, c, fds, peer);
    if (r != 1)
        conn_drop(ctx, i);
    return r < 0 ? (hcomm_status_t)r : HCOMM_SUCCESS;
}

static hcomm_status_t accept_all(hc_tl_ctx_t *ctx)
{
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t               sl = sizeof(sa);
        int fd = accept4(ctx->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return HCOMM_SUCCESS;
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            hc_error(NET, "accept: %s", strerror(errno));
            return HCOMM_ERR_SYSTEM;
        }
        if (ctx->nconns == ctx->conns_cap) {
            int            cap = ctx->conns_cap ? 2 * ctx->conns_cap : 8;
            hc_tcp_conn_t *p   = realloc(ctx->conns, (size_t)cap * sizeof(*p));
            if (p == NULL) {
                close(fd);
                hc_error(NET, "out of memory for %d pending connections", cap);
                return HCOMM_ERR_NO_MEMORY;
            }
            ctx->conns     = p;
            ctx->conns_cap = cap;
        }
        hc_sock_tune(fd, ctx->sockbuf);
        hc_tcp_conn_t *c = &ctx->conns[ctx->nconns++];
        memset(c, 0, sizeof(*c));
        c->fd   = fd;
        c->rank = -1;
        c->idx  = -1;
        hc_sock_addr_str((struct sockaddr *)&sa, c->from, sizeof(c->from));
    }
}

/* Moves the connections of peer that arrived into fds; returns how many. */
static int claim(hc_tl_ctx_t *ctx, int peer, int *fds)
{
    int n = 0;
    for (int i = ctx->nconns - 1; i >= 0; i--) {
        if (ctx->conns[i].rank != peer)
            continue;
        fds[ctx->conns[i].idx] = ctx->conns[i].fd;
        ctx->conns[i]          = ctx->conns[--ctx->nconns];
        n++;
    }
    return n;
}

/* One poll over the listener and the connections still saying hello. */
static hcomm_status_t accept_round(hc_tl_ctx_t *ctx, int peer, int *fds, int ms)
{
    hcomm_status_t st = hc_tcp_pfds_reserve(ctx, (size_t)ctx->nconns + 1);
    if (st != HCOMM_SUCCESS)
        return st;
    struct pollfd *pf = ctx->pfds;
    int            np = 1;
    pf[0]             = (struct pollfd){.fd = ctx->listen_fd, .events = POLLIN};
    for (int i = 0; i < ctx->nconns; i++)
        if (ctx->conns[i].rank < 0)
            pf[np++] = (struct pollfd){.fd = ctx->conns[i].fd, .events = POLLIN};
    if (poll(pf, (nfds_t)np, ms) < 0) {
        if (errno == EINTR)
            return HCOMM_SUCCESS;
        hc_error(NET, "peer %d: poll: %s", peer, strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    /* Backwards, so that dropping conns[i] (the last one moves in) keeps the
     * lower entries where pf says they are. */
    for (int i = ctx->nconns - 1, k = np - 1; i >= 0 && k >= 1; i--) {
        if (ctx->conns[i].rank >= 0 || ctx->conns[i].fd != pf[k].fd)
            continue;
        if (pf[k--].revents != 0 && (st = conn_read(ctx, i, fds, peer)) != HCOMM_SUCCESS)
            return st;
    }
    if (pf[0].revents != 0)
        return accept_all(ctx);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_tcp_accept_peer(hc_tl_ctx_t *ctx, int peer, int *fds, double deadline)
{
    hcomm_status_t st   = HCOMM_SUCCESS;
    int            have = 0;
    for (int i = 0; i < ctx->nsocks; i++)
        fds[i] = -1;
    for (;;) {
        have += claim(ctx, peer, fds);
        if (have == ctx->nsocks)
            return HCOMM_SUCCESS;
        int ms = hc_clock_ms_left(deadline);
        if (ms < 0) {
            hc_error(NET, "peer %d: timed out after %.1f s waiting for its connection "
                          "(%d of %d sockets)", peer, ctx->timeout, have, ctx->nsocks);
            st = HCOMM_ERR_TIMEOUT;
            goto err_close;
        }
        st = accept_round(ctx, peer, fds, ms);
        if (st != HCOMM_SUCCESS)
            goto err_close;
    }

err_close:
    for (int i = 0; i < ctx->nsocks; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
    return st;
}
