/* ib_ctx.c - the ib transport's context (its rails and side channel
 * listener), its address, reachability, connect, and the ops table. Never
 * run with a device present (see ib.h): on the build machine init only ever
 * took the HCOMM_ERR_UNSUPPORTED way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "transport/ib/ib.h"

static void ib_fini(hc_tl_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    for (uint32_t i = 0; i < ctx->neps; i++)
        hc_ib_ep_destroy(ctx->eps[i]);
    hc_ib_pend_close_all(ctx);
    if (ctx->listen_fd >= 0)
        close(ctx->listen_fd);
    for (int r = 0; r < ctx->nrails; r++)
        hc_ib_rail_close(&ctx->rail[r]);
    free(ctx->pfds);
    free(ctx->pfd_ep);
    free(ctx->since);
    free(ctx->by_rank);
    free(ctx->eps);
    free(ctx);
}

/* The address blob, and one info line naming the rails. */
static void describe(hc_tl_ctx_t *ctx)
{
    char line[512];
    int  k           = 0;
    ctx->self.nrails = ctx->nrails;
    for (int i = 0; i < ctx->nrails; i++) {
        const hc_ib_port_t *p = &ctx->rail[i].port;
        hc_ib_addr_rail_t  *r = &ctx->self.rail[i];
        r->link               = (uint8_t)p->nic.link;
        r->port               = (uint8_t)p->nic.port;
        r->mtu                = p->mtu;
        r->lid                = p->lid;
        r->mbps               = (uint32_t)(p->nic.gbps * 8000.0);
        memcpy(r->gid, p->gid, 16);
        if (k < (int)sizeof(line))
            k += snprintf(line + k, sizeof(line) - (size_t)k, "%s%s:%d (%s, %.1f GB/s)",
                          i ? ", " : "", p->nic.name, p->nic.port,
                          p->nic.link == HC_IB_LINK_IB ? "InfiniBand" : "RoCE", p->nic.gbps);
    }
    ctx->bloblen = hc_ib_addr_encode(&ctx->self, ctx->blob, sizeof(ctx->blob));
    hc_info(NET, "ib: %d rail(s): %s", ctx->nrails, line);
}

/* The ports to use: > 0, or the status init returns (logged). */
static int find_ports(const hc_params_t *prm, hc_ib_port_t *ports, hcomm_status_t *st)
{
    char why[HC_IB_WHY];
    int  n =
        hc_ib_ports_scan(prm->ib_hca, prm->ib_gid_index, ports, HC_IB_MAX_RAILS, why, sizeof(why));
    if (n < 0) {
        hc_error(NET, "ib: %s", why);
        *st = HCOMM_ERR_INVALID_USAGE;
    } else if (n == 0 && strcmp(prm->transport, "ib") == 0) { /* forced: say why, loudly */
        hc_error(NET, "ib: HCOMM_TRANSPORT=ib, but no RDMA device with an active port (%s)", why);
        *st = HCOMM_ERR_UNSUPPORTED;
    } else if (n == 0) {
        hc_info(NET, "ib: no RDMA device with an active port (%s)", why);
        *st = HCOMM_ERR_UNSUPPORTED;
    } else if (n > HC_IB_MAX_RAILS) {
        hc_info(NET, "ib: %d active ports, using the first %d (HCOMM_IB_HCA chooses)", n,
                HC_IB_MAX_RAILS);
        n = HC_IB_MAX_RAILS;
    }
    return n;
}

static hcomm_status_t ib_init(hc_tl_ctx_t **ctx_p, const hc_tl_params_t *p)
{
    if (ctx_p == NULL || p == NULL || p->bind_ip == NULL || p->nranks <= 0 || p->rank < 0 ||
        p->rank >= p->nranks)
        return HCOMM_ERR_INVALID_ARG;
    const hc_params_t *prm = p->params != NULL ? p->params : hc_params_get();
    hc_ib_port_t       ports[HC_IB_MAX_RAILS];
    hcomm_status_t     st = HCOMM_SUCCESS;
    int                n  = find_ports(prm, ports, &st);
    if (n <= 0)
        return st;
    hc_tl_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (ctx != NULL) {
        ctx->listen_fd = -1;
        ctx->by_rank   = calloc((size_t)p->nranks, sizeof(*ctx->by_rank));
        ctx->since     = calloc((size_t)p->nranks, sizeof(*ctx->since));
    }
    if (ctx == NULL || ctx->by_rank == NULL || ctx->since == NULL) {
        hc_error(NET, "out of memory for the ib context");
        ib_fini(ctx);
        return HCOMM_ERR_NO_MEMORY;
    }
    ctx->rank   = p->rank;
    ctx->nranks = p->nranks;
    memcpy(ctx->cookie, p->cookie, sizeof(ctx->cookie));
    ctx->timeout = hc_tl_timeout_init(p, prm);
    for (; ctx->nrails < n && st == HCOMM_SUCCESS; ctx->nrails++)
        st = hc_ib_rail_open(&ctx->rail[ctx->nrails], &ports[ctx->nrails], p->nranks);
    if (st != HCOMM_SUCCESS) { /* a device there, but not usable (logged): go on without */
        ctx->nrails--;         /* the one that failed closed itself */
        ib_fini(ctx);
        return HCOMM_ERR_UNSUPPORTED;
    }
    st = hc_ib_listen(ctx, p->bind_ip);
    if (st != HCOMM_SUCCESS) {
        ib_fini(ctx);
        return st;
    }
    describe(ctx);
    *ctx_p = ctx;
    return HCOMM_SUCCESS;
}

static hcomm_status_t ib_address(hc_tl_ctx_t *ctx, void *buf, size_t *len)
{
    if (ctx == NULL || buf == NULL || len == NULL)
        return HCOMM_ERR_INVALID_ARG;
    memcpy(buf, ctx->blob, ctx->bloblen);
    *len = ctx->bloblen;
    return HCOMM_SUCCESS;
}

static int ib_reachable(hc_tl_ctx_t *ctx, const hc_peer_info_t *self, const hc_peer_info_t *peer,
                        const void *addr, size_t len)
{
    hc_ib_addr_t a;
    char         why[HC_IB_WHY];
    (void)self, (void)peer;
    if (ctx == NULL || hc_ib_addr_decode(addr, len, &a, why, sizeof(why)) != HCOMM_SUCCESS)
        return 0;
    return hc_ib_addr_rails(&ctx->self, &a) > 0;
}

static hcomm_status_t eps_reserve(hc_tl_ctx_t *ctx)
{
    if (ctx->neps < ctx->eps_cap)
        return HCOMM_SUCCESS;
    uint32_t     cap = ctx->eps_cap ? 2 * ctx->eps_cap : 8;
    hc_tl_ep_t **e   = realloc(ctx->eps, cap * sizeof(*e));
    if (e == NULL) {
        hc_error(NET, "out of memory for %u ib endpoints", cap);
        return HCOMM_ERR_NO_MEMORY;
    }
    ctx->eps     = e;
    ctx->eps_cap = cap;
    return HCOMM_SUCCESS;
}

static void ep_add(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep, hc_tl_ep_t **ep_p)
{
    ctx->eps[ctx->neps++]  = ep;
    ctx->by_rank[ep->peer] = ep;
    *ep_p                  = ep;
}

/* The higher rank's side: the peer's HELLO, once it is here. */
static hcomm_status_t connect_passive(hc_tl_ctx_t *ctx, int peer, int nrails, hc_tl_ep_t **ep_p)
{
    hc_ib_conn_t   c;
    int            fd;
    hc_tl_ep_t    *ep;
    hcomm_status_t st = hc_ib_accept_peer(ctx, peer, &fd, &c);
    if (st == HCOMM_IN_PROGRESS) {
        double now = hc_clock_now();
        if (ctx->since[peer] == 0)
            ctx->since[peer] = now;
        if (now - ctx->since[peer] < hc_tl_timeout(&ctx->timeout))
            return HCOMM_IN_PROGRESS;
        hc_error(NET, "peer %d: no ib connection from it within %.1f s", peer,
                 hc_tl_timeout(&ctx->timeout));
        return HCOMM_ERR_TIMEOUT;
    }
    if (st != HCOMM_SUCCESS)
        return st;
    if (c.nrails != (uint32_t)nrails) {
        hc_error(NET, "peer %d: connects over %u rails, the address blobs say %d", peer, c.nrails,
                 nrails);
        close(fd);
        return HCOMM_ERR_PROTOCOL;
    }
    st = hc_ib_ep_create(ctx, peer, nrails, &ep);
    if (st != HCOMM_SUCCESS) {
        close(fd);
        return st;
    }
    ep->fd = fd;
    st     = hc_ib_answer(ep, &c);
    if (st != HCOMM_SUCCESS) {
        hc_ib_ep_destroy(ep);
        return st;
    }
    ep_add(ctx, ep, ep_p);
    return HCOMM_SUCCESS;
}

static hcomm_status_t ib_connect(hc_tl_ctx_t *ctx, const hc_peer_info_t *info, const void *addr,
                                 size_t len, hc_tl_ep_t **ep_p)
{
    hc_ib_addr_t a;
    char         why[HC_IB_WHY];
    if (ctx == NULL || info == NULL || ep_p == NULL)
        return HCOMM_ERR_INVALID_ARG;
    int peer = info->rank;
    if (peer < 0 || peer >= ctx->nranks || peer == ctx->rank || ctx->by_rank[peer] != NULL) {
        hc_error(NET, "peer %d: cannot connect (self %d of %d, or connected already)", peer,
                 ctx->rank, ctx->nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    if (hc_ib_addr_decode(addr, len, &a, why, sizeof(why)) != HCOMM_SUCCESS) {
        hc_error(NET, "peer %d: malformed ib address: %s", peer, why);
        return HCOMM_ERR_INVALID_ARG;
    }
    int nrails = hc_ib_addr_rails(&ctx->self, &a);
    if (nrails == 0) {
        hc_error(NET, "peer %d: no rail of the same link layer as ours", peer);
        return HCOMM_ERR_UNREACHABLE;
    }
    hcomm_status_t st = eps_reserve(ctx);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ctx->rank > peer)
        return connect_passive(ctx, peer, nrails, ep_p);
    hc_tl_ep_t *ep; /* this rank acts: its QPs, and HELLO; the peer answers later */
    st = hc_ib_ep_create(ctx, peer, nrails, &ep);
    if (st == HCOMM_SUCCESS && (st = hc_ib_dial(ep, &a)) != HCOMM_SUCCESS)
        hc_ib_ep_destroy(ep);
    if (st == HCOMM_SUCCESS)
        ep_add(ctx, ep, ep_p);
    return st;
}

const hc_tl_ops_t hc_tl_ib_ops = {
    .name      = "ib",
    .caps      = HC_TL_CAP_HOST_MEM,
    .init      = ib_init,
    .fini      = ib_fini,
    .address   = ib_address,
    .reachable = ib_reachable,
    .connect   = ib_connect,
    .isend     = hc_ib_isend,
    .irecv     = hc_ib_irecv,
    .progress  = hc_ib_progress,
    .ep_status = hc_ib_ep_status,
    .wait_fds  = NULL, /* polled only: see ib.h */
};
