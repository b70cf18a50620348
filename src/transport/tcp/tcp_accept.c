/* tcp_accept.c - the passive side of connection set-up: accepts from the
 * listener, reads hellos without ever blocking on one client, and keeps the
 * sockets of ranks whose connect() comes later, or is still missing some.
 * Connections not yet proven are few (HC_TCP_MAX_PENDING, the oldest make
 * room) and brief (HC_TCP_HELLO_TIMEOUT): strangers cost the ranks nothing. */
#include "transport/tcp/tcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"

static void conn_drop(hc_tl_ctx_t *ctx, int i)
{
    close(ctx->conns[i].fd);
    ctx->conns[i] = ctx->conns[--ctx->nconns];
}

/* The first refusal is a warning; later ones are debug lines, so that a flood
 * of strangers cannot flood the log. */
static void conn_refuse(hc_tl_ctx_t *ctx, int i, const char *why)
{
    hc_log_level_t level = ctx->refused++ == 0 ? HC_LOG_WARN : HC_LOG_DEBUG; /* a macro: once */
    hc_log_as(level, HC_SUBSYS(NET), "refused connection from %s: %s", ctx->conns[i].from, why);
    conn_drop(ctx, i);
}

/* Whether socket idx of rank arrived already (waiting to be claimed, or claimed). */
static int conn_taken(const hc_tl_ctx_t *ctx, int rank, int idx)
{
    for (int i = 0; i < ctx->nconns; i++)
        if (ctx->conns[i].rank == rank && ctx->conns[i].idx == idx)
            return 1;
    return ctx->claimed[rank] != NULL && ctx->claimed[rank][idx] >= 0;
}

int hc_tcp_hello_check(hc_tl_ctx_t *ctx, hc_tcp_conn_t *c, const char **why)
{
    uint64_t       w0       = hc_tcp_get64(c->hello);
    uint64_t       rank     = hc_tcp_get64(c->hello + 8);
    uint64_t       w2       = hc_tcp_get64(c->hello + 16);
    uint64_t       smin     = hc_tcp_get64(c->hello + 24);
    uint32_t       idx      = (uint32_t)w2;
    uint32_t       nsocks   = (uint32_t)(w2 >> 32);
    hc_auth_part_t parts[2] = {{c->hello, HC_TCP_HELLO_FIELDS}, {ctx->nonce, 16}};

    if ((uint32_t)w0 != HC_TCP_MAGIC || (w0 >> 32) != HC_TCP_VERSION) {
        *why = "not an hcomm tcp hello of this version";
        return 0;
    }
    if (!hc_auth_check(ctx->cookie, "hcomm tcp hello", parts, 2, c->hello + HC_TCP_HELLO_FIELDS)) {
        *why = "no proof of the job secret";
        return 0;
    }
    if (rank >= (uint64_t)ctx->rank || idx >= nsocks) {
        hc_warn(NET, "refused connection from %s: bad hello (rank %llu socket %u)", c->from,
                (unsigned long long)rank, idx);
        return 0;
    }
    if (nsocks != (uint32_t)ctx->nsocks || smin != ctx->stripe_min) {
        hc_error(NET, "peer %d: HCOMM_TCP_NSOCKS/HCOMM_TCP_STRIPE_MIN differ: %u/%llu there, "
                      "%d/%zu here", (int)rank, nsocks, (unsigned long long)smin, ctx->nsocks,
                 ctx->stripe_min);
        return HCOMM_ERR_INVALID_USAGE;
    }
    if (ctx->by_rank[rank] != NULL || conn_taken(ctx, (int)rank, (int)idx)) {
        *why = "a duplicate socket of a rank";
        return 0;
    }
    c->rank = (int)rank;
    c->idx  = (int)idx;
    return 1;
}

/* Reads more of a pending hello. Returns an error status only for a fatal one. */
static hcomm_status_t conn_read(hc_tl_ctx_t *ctx, int i)
{
    hc_tcp_conn_t *c = &ctx->conns[i];
    ssize_t        n = recv(c->fd, c->hello + c->got, HC_TCP_HELLO_BYTES - c->got, MSG_DONTWAIT);
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
    const char *why = NULL;
    int         r   = hc_tcp_hello_check(ctx, c, &why);
    if (r == 0 && why != NULL)
        conn_refuse(ctx, i, why);
    else if (r != 1)
        conn_drop(ctx, i);
    return r < 0 ? (hcomm_status_t)r : HCOMM_SUCCESS;
}

/* Unproven connections: how many, and the oldest (-1: none). */
static int conn_unproven(const hc_tl_ctx_t *ctx, int *oldest)
{
    int n   = 0;
    *oldest = -1;
    for (int i = 0; i < ctx->nconns; i++) {
        if (ctx->conns[i].rank >= 0)
            continue;
        n++;
        if (*oldest < 0 || ctx->conns[i].deadline < ctx->conns[*oldest].deadline)
            *oldest = i;
    }
    return n;
}

/* Drops the oldest unproven connection to make room; 0 if there was none. */
static int conn_make_room(hc_tl_ctx_t *ctx)
{
    int oldest;
    if (conn_unproven(ctx, &oldest) == 0)
        return 0;
    conn_refuse(ctx, oldest, "pending connections are full: the oldest makes room");
    return 1;
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
            /* Out of fds: a stranger's goes; without one to drop, try later,
             * saying so once (a peer's connection waits in the backlog) */
            if (errno == EMFILE || errno == ENFILE) {
                if (conn_make_room(ctx))
                    continue;
                if (!ctx->told_nofd)
                    hc_error(NET,
                             "accept: %s: peers' connections wait until descriptors are "
                             "freed (raise the limit: ulimit -n)",
                             strerror(errno));
                ctx->told_nofd = 1;
                return HCOMM_SUCCESS;
            }
            hc_log_level_t level = ctx->refused++ == 0 ? HC_LOG_WARN : HC_LOG_DEBUG;
            hc_log_as(level, HC_SUBSYS(NET), "accept: %s", strerror(errno));
            return HCOMM_SUCCESS;
        }
        int oldest;
        if (conn_unproven(ctx, &oldest) >= HC_TCP_MAX_PENDING)
            conn_make_room(ctx);
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
        c->fd       = fd;
        c->rank     = -1;
        c->idx      = -1;
        c->deadline = hc_clock_now() + HC_TCP_HELLO_TIMEOUT;
        hc_sock_addr_str((struct sockaddr *)&sa, c->from, sizeof(c->from));
        /* A rank's hello is usually here already. */
        hcomm_status_t st = conn_read(ctx, ctx->nconns - 1);
        if (st != HCOMM_SUCCESS)
            return st;
    }
}

/* Moves the sockets of peer that arrived into its claimed ones; how many it
 * now has. */
static int claim(hc_tl_ctx_t *ctx, int peer)
{
    int *fds = ctx->claimed[peer], n = 0;
    for (int i = ctx->nconns - 1; i >= 0; i--) {
        if (ctx->conns[i].rank != peer)
            continue;
        fds[ctx->conns[i].idx] = ctx->conns[i].fd;
        ctx->conns[i]          = ctx->conns[--ctx->nconns];
    }
    for (int i = 0; i < ctx->nsocks; i++)
        n += fds[i] >= 0;
    return n;
}

/* One look, without waiting, at the listener and the connections still
 * saying hello. */
static hcomm_status_t accept_round(hc_tl_ctx_t *ctx, int peer)
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
    if (poll(pf, (nfds_t)np, 0) < 0) {
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
        if (pf[k--].revents != 0 && (st = conn_read(ctx, i)) != HCOMM_SUCCESS)
            return st;
    }
    double now = hc_clock_now();
    for (int i = ctx->nconns - 1; i >= 0; i--)
        if (ctx->conns[i].rank < 0 && ctx->conns[i].deadline <= now)
            conn_refuse(ctx, i, "no hello in time");
    if (pf[0].revents != 0)
        return accept_all(ctx);
    return HCOMM_SUCCESS;
}

void hc_tcp_unclaim(hc_tl_ctx_t *ctx, int peer)
{
    int *fds = ctx->claimed[peer];
    for (int i = 0; fds != NULL && i < ctx->nsocks; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    ctx->claimed[peer] = NULL;
}

hcomm_status_t hc_tcp_accept_peer(hc_tl_ctx_t *ctx, int peer, int *fds)
{
    if (ctx->claimed[peer] == NULL) {
        ctx->claimed[peer] = malloc((size_t)ctx->nsocks * sizeof(int));
        if (ctx->claimed[peer] == NULL) {
            hc_error(NET, "peer %d: out of memory", peer);
            return HCOMM_ERR_NO_MEMORY;
        }
        for (int i = 0; i < ctx->nsocks; i++)
            ctx->claimed[peer][i] = -1;
    }
    hcomm_status_t st = accept_round(ctx, peer);
    if (st != HCOMM_SUCCESS) {
        hc_tcp_unclaim(ctx, peer);
        return st;
    }
    int have = claim(ctx, peer);
    if (have < ctx->nsocks)
        return HCOMM_IN_PROGRESS;
    memcpy(fds, ctx->claimed[peer], (size_t)ctx->nsocks * sizeof(int));
    free(ctx->claimed[peer]);
    ctx->claimed[peer] = NULL;
    return HCOMM_SUCCESS;
}
