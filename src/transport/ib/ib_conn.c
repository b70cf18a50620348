/* ib_conn.c - the side channel over which a pair of ranks swaps connection
 * data (ib.h: Connecting), and whose hang-up says the peer is gone. The
 * lower rank dials and sends HELLO; the higher one accepts without waiting,
 * answers with REPLY; the lower one's READY byte ends it. Never run with a
 * device present (see ib.h); its socket side is hcomm's usual (base/sock.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "transport/ib/ib.h"

hcomm_status_t hc_ib_listen(hc_tl_ctx_t *ctx, const char *ip)
{
    struct sockaddr_storage ss, bound;
    socklen_t               len, blen = sizeof(bound);
    char                    hp[HC_SOCK_ADDRSTRLEN];
    snprintf(hp, sizeof(hp), strchr(ip, ':') != NULL ? "[%s]:0" : "%s:0", ip);
    hcomm_status_t st = hc_sock_parse_addr(hp, HC_SUBSYS(NET), &ss, &len);
    if (st == HCOMM_SUCCESS)
        st = hc_sock_listen((struct sockaddr *)&ss, len, 0, HC_SUBSYS(NET), &ctx->listen_fd, &bound,
                            &blen);
    if (st == HCOMM_SUCCESS && hc_ib_addr_set_sockaddr(&ctx->self, (struct sockaddr *)&bound))
        st = HCOMM_ERR_INVALID_ARG;
    return st;
}

hcomm_status_t hc_ib_dial(hc_tl_ep_t *ep, const hc_ib_addr_t *peer)
{
    struct sockaddr_storage ss;
    socklen_t               len      = hc_ib_addr_sockaddr(peer, &ss);
    double                  deadline = hc_clock_now() + hc_tl_timeout(&ep->ctx->timeout);
    hc_sock_peer_t          who      = {.subsys = HC_SUBSYS(NET), .rank = ep->peer};
    hc_ib_conn_t            c;
    uint8_t                 buf[HC_IB_CONN_MAX];
    hcomm_status_t st = hc_sock_connect((struct sockaddr *)&ss, len, 0, deadline, who, &ep->fd);
    if (st != HCOMM_SUCCESS)
        return st;
    hc_ib_ep_conn(ep, HC_IB_CONN_HELLO, &c);
    size_t n = hc_ib_conn_encode(&c, buf, sizeof(buf));
    st       = hc_sock_send_all(ep->fd, buf, n, deadline, who);
    if (st == HCOMM_SUCCESS)
        ep->state = HC_IB_EP_DIALED;
    return st;
}

/* Reads what is there of a connection message into buf (*got bytes so far;
 * *total 0 until its header is in). 1 complete (*total its length), 0 more
 * to come, -1 the stream ended or failed (errno, 0 for an end), -2 not a
 * connection message (why says). */
int hc_ib_conn_read(int fd, uint8_t *buf, size_t *got, size_t *total, char *why, size_t wl)
{
    for (;;) {
        if (*got >= HC_IB_CONN_HDR && *total == 0 && (*total = hc_ib_conn_peek(buf, why, wl)) == 0)
            return -2;
        size_t want = *got < HC_IB_CONN_HDR ? HC_IB_CONN_HDR : *total;
        if (*got == want)
            return 1;
        ssize_t n = recv(fd, buf + *got, want - *got, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            errno = n == 0 ? 0 : errno;
            return -1;
        }
        *got += (size_t)n;
    }
}

/* ---- the higher rank: accepting ---- */

static void pend_drop(hc_tl_ctx_t *ctx, int i)
{
    close(ctx->pend[i].fd);
    ctx->pend[i] = ctx->pend[--ctx->npend];
}

void hc_ib_pend_close_all(hc_tl_ctx_t *ctx)
{
    while (ctx->npend > 0)
        pend_drop(ctx, ctx->npend - 1);
    free(ctx->pend);
    ctx->pend = NULL;
}

/* The first refusal is a warning; the rest are debug lines (a flood of
 * strangers floods nothing). */
static void pend_refuse(hc_tl_ctx_t *ctx, int i, const char *why)
{
    hc_log_level_t level = ctx->refused++ == 0 ? HC_LOG_WARN : HC_LOG_DEBUG; /* a macro: once */
    hc_log_as(level, HC_SUBSYS(NET), "ib: refused connection from %s: %s", ctx->pend[i].from, why);
    pend_drop(ctx, i);
}

/* Drops the oldest connection not yet proven; 0 if there is none. */
static int pend_make_room(hc_tl_ctx_t *ctx)
{
    int oldest = -1;
    for (int i = 0; i < ctx->npend; i++)
        if (ctx->pend[i].rank < 0 &&
            (oldest < 0 || ctx->pend[i].deadline < ctx->pend[oldest].deadline))
            oldest = i;
    if (oldest < 0)
        return 0;
    pend_refuse(ctx, oldest, "pending connections are full: the oldest makes room");
    return 1;
}

static int pend_unproven(const hc_tl_ctx_t *ctx)
{
    int n = 0;
    for (int i = 0; i < ctx->npend; i++)
        n += ctx->pend[i].rank < 0;
    return n;
}

/* A complete HELLO: 1 kept (p->rank set), 0 to refuse (why says why). */
static int hello_check(hc_tl_ctx_t *ctx, hc_ib_pend_t *p, size_t len, char *why, size_t wl)
{
    hc_ib_conn_t c;
    if (hc_ib_conn_decode(p->buf, len, &c, why, wl) != HCOMM_SUCCESS ||
        hc_ib_conn_check(&c, ctx->cookie, HC_IB_CONN_HELLO, (uint32_t)ctx->rank, -1, HC_IB_NSLOTS,
                         HC_IB_SLOT_BYTES, why, wl) != HCOMM_SUCCESS)
        return 0;
    int dup = 0;
    for (int i = 0; i < ctx->npend; i++)
        dup |= ctx->pend[i].rank == (int)c.rank;
    if (ctx->by_rank[c.rank] != NULL || dup) {
        snprintf(why, wl, "rank %u is connected or connecting already", c.rank);
        return 0;
    }
    p->rank = (int)c.rank;
    p->got  = len;
    return 1;
}

static void pend_read(hc_tl_ctx_t *ctx, int i)
{
    hc_ib_pend_t *p              = &ctx->pend[i];
    size_t        total          = 0;
    char          why[HC_IB_WHY] = "";
    int           rc = hc_ib_conn_read(p->fd, p->buf, &p->got, &total, why, sizeof(why));
    if (rc == 0)
        return;
    if (rc == -1) {
        hc_debug(NET, "ib: connection from %s closed before its HELLO: %s", p->from,
                 errno != 0 ? strerror(errno) : "end of stream");
        pend_drop(ctx, i);
    } else if (rc != 1 || !hello_check(ctx, p, total, why, sizeof(why))) {
        pend_refuse(ctx, i, why);
    }
}

static hcomm_status_t accept_all(hc_tl_ctx_t *ctx)
{
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t               sl = sizeof(sa);
        int fd = accept4(ctx->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return HCOMM_SUCCESS;
        /* Out of fds: a stranger's goes; without one, try again later. */
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && pend_make_room(ctx))
            continue;
        if (fd < 0) {
            hc_warn(NET, "ib: accept: %s", strerror(errno));
            return HCOMM_SUCCESS;
        }
        if (pend_unproven(ctx) >= HC_IB_MAX_PENDING)
            pend_make_room(ctx);
        if (ctx->npend == ctx->pend_cap) {
            int           cap = ctx->pend_cap ? 2 * ctx->pend_cap : 8;
            hc_ib_pend_t *p   = realloc(ctx->pend, (size_t)cap * sizeof(*p));
            if (p == NULL) {
                close(fd);
                hc_error(NET, "ib: out of memory for %d pending connections", cap);
                return HCOMM_ERR_NO_MEMORY;
            }
            ctx->pend     = p;
            ctx->pend_cap = cap;
        }
        hc_ib_pend_t *p = &ctx->pend[ctx->npend++];
        memset(p, 0, sizeof(*p));
        p->fd       = fd;
        p->rank     = -1;
        p->deadline = hc_clock_now() + HC_IB_HELLO_TIMEOUT;
        hc_sock_addr_str((struct sockaddr *)&sa, p->from, sizeof(p->from));
    }
}

hcomm_status_t hc_ib_accept_peer(hc_tl_ctx_t *ctx, int peer, int *fd_p, hc_ib_conn_t *c)
{
    hcomm_status_t st = accept_all(ctx);
    if (st != HCOMM_SUCCESS)
        return st;
    for (int i = ctx->npend - 1; i >= 0; i--) /* backwards: a drop moves the last one in */
        if (ctx->pend[i].rank < 0)
            pend_read(ctx, i);
    double now = hc_clock_now();
    for (int i = ctx->npend - 1; i >= 0; i--)
        if (ctx->pend[i].rank < 0 && ctx->pend[i].deadline <= now)
            pend_refuse(ctx, i, "no HELLO in time");
    for (int i = 0; i < ctx->npend; i++) {
        if (ctx->pend[i].rank != peer)
            continue;
        char why[HC_IB_WHY];
        st           = hc_ib_conn_decode(ctx->pend[i].buf, ctx->pend[i].got, c, why, sizeof(why));
        *fd_p        = ctx->pend[i].fd;
        ctx->pend[i] = ctx->pend[--ctx->npend];
        return st; /* decoded once already: cannot fail */
    }
    return HCOMM_IN_PROGRESS;
}

hcomm_status_t hc_ib_answer(hc_tl_ep_t *ep, const hc_ib_conn_t *c)
{
    hc_sock_peer_t who = {.subsys = HC_SUBSYS(NET), .rank = ep->peer};
    uint8_t        buf[HC_IB_CONN_MAX];
    hc_ib_conn_t   mine;
    ep->remote = *c;
    for (int i = 0; i < ep->nrails; i++) {
        hcomm_status_t st = hc_ib_qp_connect(ep, i);
        if (st != HCOMM_SUCCESS)
            return st;
    }
    hc_ib_ep_conn(ep, HC_IB_CONN_REPLY, &mine);
    size_t n = hc_ib_conn_encode(&mine, buf, sizeof(buf));
    /* a few hundred bytes into an idle socket: the kernel takes them at once */
    hcomm_status_t st =
        hc_sock_send_all(ep->fd, buf, n, hc_clock_now() + hc_tl_timeout(&ep->ctx->timeout), who);
    if (st == HCOMM_SUCCESS)
        ep->state = HC_IB_EP_ANSWERED;
    return st;
}
