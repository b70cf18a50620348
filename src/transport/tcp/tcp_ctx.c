/* tcp_ctx.c - the tcp transport's context: the listening socket, connection
 * set-up (lower rank dials, higher rank accepts), and the ops table. */
#include "transport/tcp/tcp.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sock.h"

/* Asks for big socket buffers only where the kernel grants them in full; a
 * capped request would switch off its autotuning for a smaller buffer. */
static int probe_sockbuf(int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int       want = HC_TCP_SOCKBUF, got_s = 0, got_r = 0;
    socklen_t l = sizeof(int);
    int ok = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)) == 0 &&
             setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want)) == 0 &&
             getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got_s, &l) == 0 &&
             (l = sizeof(int), getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got_r, &l) == 0);
    close(fd);
    return ok && got_s >= want && got_r >= want ? want : 0;
}

static hcomm_status_t ctx_listen(hc_tl_ctx_t *ctx, const char *ip)
{
    struct sockaddr_storage ss;
    socklen_t               len;
    char                    hp[HC_SOCK_ADDRSTRLEN];
    snprintf(hp, sizeof(hp), strchr(ip, ':') != NULL ? "[%s]:0" : "%s:0", ip);
    hcomm_status_t st = hc_sock_parse_addr(hp, HC_SUBSYS(NET), &ss, &len);
    if (st != HCOMM_SUCCESS)
        return st;
    ctx->sockbuf = probe_sockbuf(ss.ss_family);
    ctx->addrlen = sizeof(ctx->addr);
    return hc_sock_listen((struct sockaddr *)&ss, len, ctx->sockbuf, HC_SUBSYS(NET),
                          &ctx->listen_fd, &ctx->addr, &ctx->addrlen);
}

hcomm_status_t hc_tcp_pfds_reserve(hc_tl_ctx_t *ctx, size_t n)
{
    if (n <= ctx->pfds_cap)
        return HCOMM_SUCCESS;
    size_t         cap = n < 16 ? 16 : n * 2;
    struct pollfd *p   = realloc(ctx->pfds, cap * sizeof(*p));
    if (p == NULL) {
        hc_error(NET, "out of memory for %zu poll entries", cap);
        return HCOMM_ERR_NO_MEMORY;
    }
    ctx->pfds     = p;
    ctx->pfds_cap = cap;
    return HCOMM_SUCCESS;
}

static void tcp_fini(hc_tl_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    for (int i = 0; i < ctx->neps; i++)
        hc_tcp_ep_destroy(ctx->eps[i]);
    for (int i = 0; i < ctx->nconns; i++)
        close(ctx->conns[i].fd);
    if (ctx->listen_fd >= 0)
        close(ctx->listen_fd);
    for (int r = 0; ctx->claimed != NULL && r < ctx->nranks; r++)
        hc_tcp_unclaim(ctx, r);
    for (int r = 0; ctx->dials != NULL && r < ctx->nranks; r++)
        hc_tcp_dial_drop(ctx, r);
    free(ctx->conns);
    free(ctx->pfds);
    free(ctx->claimed);
    free(ctx->since);
    free(ctx->dials);
    free(ctx->by_rank);
    free(ctx->eps);
    free(ctx);
}

static hcomm_status_t tcp_init(hc_tl_ctx_t **ctx_p, const hc_tl_params_t *p)
{
    if (ctx_p == NULL || p == NULL || p->bind_ip == NULL || p->nranks <= 0 || p->rank < 0 ||
        p->rank >= p->nranks)
        return HCOMM_ERR_INVALID_ARG;
    const hc_params_t *prm = p->params != NULL ? p->params : hc_params_get();
    hc_tl_ctx_t       *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        goto err_nomem;
    ctx->listen_fd = -1;
    ctx->by_rank   = calloc((size_t)p->nranks, sizeof(*ctx->by_rank));
    ctx->claimed   = calloc((size_t)p->nranks, sizeof(*ctx->claimed));
    ctx->since     = calloc((size_t)p->nranks, sizeof(*ctx->since));
    ctx->dials     = calloc((size_t)p->nranks, sizeof(*ctx->dials));
    if (ctx->by_rank == NULL || ctx->claimed == NULL || ctx->since == NULL || ctx->dials == NULL)
        goto err_fini;
    ctx->rank   = p->rank;
    ctx->nranks = p->nranks;
    memcpy(ctx->cookie, p->cookie, sizeof(ctx->cookie));
    if (p->self != NULL)
        memcpy(ctx->nonce, p->self->nonce, sizeof(ctx->nonce));
    ctx->timeout      = hc_tl_timeout_init(p, prm);
    ctx->nsocks     = prm->tcp_nsocks < 1 ? 1 : prm->tcp_nsocks;
    ctx->nsocks     = ctx->nsocks > HC_TCP_MAX_SOCKS ? HC_TCP_MAX_SOCKS : ctx->nsocks;
    ctx->stripe_min = prm->tcp_stripe_min;
    hcomm_status_t st = ctx_listen(ctx, p->bind_ip);
    if (st != HCOMM_SUCCESS) {
        tcp_fini(ctx);
        return st;
    }
    *ctx_p = ctx;
    return HCOMM_SUCCESS;

err_fini:
    tcp_fini(ctx);
err_nomem:
    hc_error(NET, "out of memory for the tcp context");
    return HCOMM_ERR_NO_MEMORY;
}

static hcomm_status_t tcp_address(hc_tl_ctx_t *ctx, void *buf, size_t *len)
{
    if (ctx == NULL || buf == NULL || len == NULL)
        return HCOMM_ERR_INVALID_ARG;
    memcpy(buf, &ctx->addr, ctx->addrlen);
    *len = ctx->addrlen;
    return HCOMM_SUCCESS;
}

static int tcp_reachable(hc_tl_ctx_t *ctx, const hc_peer_info_t *self, const hc_peer_info_t *peer,
                         const void *addr, size_t len)
{
    (void)ctx, (void)self, (void)peer, (void)addr, (void)len;
    return 1;
}

static int addr_parse(const void *addr, size_t len, struct sockaddr_storage *ss)
{
    if (addr == NULL || len > sizeof(*ss) || len < sizeof(sa_family_t))
        return -1;
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, addr, len);
    if (ss->ss_family == AF_INET && len == sizeof(struct sockaddr_in))
        return 0;
    if (ss->ss_family == AF_INET6 && len == sizeof(struct sockaddr_in6))
        return 0;
    return -1;
}

/* Room for one more endpoint in the lists, and in the poll array for its sockets. */
static hcomm_status_t ctx_reserve(hc_tl_ctx_t *ctx)
{
    if (ctx->neps == ctx->eps_cap) {
        int          cap = ctx->eps_cap ? 2 * ctx->eps_cap : 8;
        hc_tl_ep_t **e   = realloc(ctx->eps, (size_t)cap * sizeof(*e));
        if (e == NULL) {
            hc_error(NET, "out of memory for %d endpoints", cap);
            return HCOMM_ERR_NO_MEMORY;
        }
        ctx->eps     = e;
        ctx->eps_cap = cap;
    }
    return hc_tcp_pfds_reserve(ctx, (size_t)(ctx->neps + 1) * (size_t)ctx->nsocks);
}

static hcomm_status_t tcp_connect(hc_tl_ctx_t *ctx, const hc_peer_info_t *info, const void *addr,
                                  size_t len, hc_tl_ep_t **ep_p)
{
    if (ctx == NULL || info == NULL || ep_p == NULL)
        return HCOMM_ERR_INVALID_ARG;
    int peer = info->rank;
    if (peer < 0 || peer >= ctx->nranks || peer == ctx->rank || ctx->by_rank[peer] != NULL) {
        hc_error(NET, "peer %d: cannot connect (self %d of %d, or connected already)", peer,
                 ctx->rank, ctx->nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    struct sockaddr_storage ss;
    if (addr_parse(addr, len, &ss) != 0) {
        hc_error(NET, "peer %d: malformed address (%zu bytes)", peer, len);
        return HCOMM_ERR_INVALID_ARG;
    }
    hcomm_status_t st = ctx_reserve(ctx);
    if (st != HCOMM_SUCCESS)
        return st;
    int fds[HC_TCP_MAX_SOCKS];
    int dials = ctx->rank < peer; /* this rank acts: dials, waiting for no one */
    if (dials)
        st = hc_tcp_dial_step(ctx, info, (struct sockaddr *)&ss, (socklen_t)len, fds);
    else /* the peer dials: its sockets are claimed as they arrive */
        st = hc_tcp_accept_peer(ctx, peer, fds);
    if (st == HCOMM_IN_PROGRESS) {
        double now = hc_clock_now();
        if (ctx->since[peer] == 0)
            ctx->since[peer] = now;
        if (now - ctx->since[peer] < hc_tl_timeout(&ctx->timeout))
            return HCOMM_IN_PROGRESS;
        if (dials) {
            hc_error(NET,
                     "peer %d: no connection to it within %.1f s (its host drops the "
                     "connection requests, or its listener's backlog is full)",
                     peer, hc_tl_timeout(&ctx->timeout));
            hc_tcp_dial_drop(ctx, peer);
        } else {
            hc_error(NET, "peer %d: no connection from it within %.1f s", peer,
                     hc_tl_timeout(&ctx->timeout));
            hc_tcp_unclaim(ctx, peer);
        }
        return HCOMM_ERR_TIMEOUT;
    }
    if (st != HCOMM_SUCCESS)
        return st;
    hc_tl_ep_t *ep;
    st = hc_tcp_ep_create(ctx, peer, fds, &ep);
    if (st != HCOMM_SUCCESS) {
        for (int i = 0; i < ctx->nsocks; i++)
            close(fds[i]);
        return st;
    }
    ctx->eps[ctx->neps++] = ep;
    ctx->by_rank[peer]    = ep;
    hc_debug(NET, "peer %d: connected with %d socket(s)", peer, ctx->nsocks);
    *ep_p = ep;
    return HCOMM_SUCCESS;
}

const hc_tl_ops_t hc_tl_tcp_ops = {
    .name      = "tcp",
    .caps      = HC_TL_CAP_HOST_MEM,
    .init      = tcp_init,
    .fini      = tcp_fini,
    .address   = tcp_address,
    .reachable = tcp_reachable,
    .connect   = tcp_connect,
    .isend     = hc_tcp_isend,
    .irecv     = hc_tcp_irecv,
    .progress  = hc_tcp_progress,
    .ep_status = hc_tcp_ep_status,
    .wait_fds  = hc_tcp_wait_fds,
};
