/* ofi_conn.c - connection set-up and the control messages: the lower rank of
 * a pair inserts the peer in its address vector and says hello; the higher
 * one's connect waits, without waiting, for that hello. Every control message
 * carries a MAC under the cookie (never the cookie); one without a good MAC is
 * refused (nack); fini says bye, with what the peer should no longer wait for. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/auth.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/proc.h"
#include "transport/ofi/ofi.h"

/* Posts a control receive; one the provider has no room for now (shm's
 * receive entries also hold unexpected messages) waits in ctl_idle. */
hcomm_status_t hc_ofi_ctl_post_rx(hc_tl_ctx_t *ctx, hc_ofi_op_t *op)
{
    op->kind = HC_OFI_OP_CTL_RX;
    op->ep   = NULL;
    op->req  = NULL;
    if (op->mr == NULL) {
        hcomm_status_t st = hc_ofi_mr_get(&ctx->mrc, &op->ctl, sizeof(op->ctl), 1, &op->mr);
        if (st != HCOMM_SUCCESS)
            return st;
    }
    int rc = (int)fi_trecv(ctx->ep, &op->ctl, sizeof(op->ctl), hc_ofi_mr_desc(op->mr),
                           FI_ADDR_UNSPEC, HC_OFI_TAG_CTL, 0, &op->fctx);
    if (rc == -FI_EAGAIN || rc == -FI_ENOMEM) {
        op->next      = ctx->ctl_idle;
        ctx->ctl_idle = op;
        return HCOMM_SUCCESS;
    }
    if (rc != 0) {
        hc_error(NET, "ofi: posting a control receive: %s", hc_ofi_lib.fi_strerror(-rc));
        return HCOMM_ERR_SYSTEM;
    }
    ctx->rx_live++;
    return HCOMM_SUCCESS;
}

#define CTL_LABEL "hcomm ofi control"

static int ctl_tag_ok(const hc_tl_ctx_t *ctx, const hc_ofi_ctl_t *m)
{
    hc_auth_part_t part = {m, offsetof(hc_ofi_ctl_t, tag)};
    return hc_auth_tag_check(ctx->cookie, CTL_LABEL, &part, 1, m->tag);
}

static hc_tl_ep_t *ep_of(hc_tl_ctx_t *ctx, int rank)
{
    return rank >= 0 && rank < ctx->nranks ? ctx->by_rank[rank] : NULL;
}

static void ctl_apply(hc_tl_ctx_t *ctx, const hc_ofi_ctl_t *m)
{
    int         from   = m->rank;
    int         cookie = ctl_tag_ok(ctx, m);
    hc_tl_ep_t *ep     = ep_of(ctx, from);
    switch (m->kind) {
    case HC_OFI_CTL_HELLO:
        if (from > ctx->rank || ctx->hello[from] != HC_OFI_HELLO_NONE)
            hc_warn(NET, "ofi: unexpected hello from rank %d ignored", from);
        else if (!cookie)
            hc_error(NET, "ofi: rank %d said hello without proof of the job secret: refused", from);
        if (from < ctx->rank && ctx->hello[from] == HC_OFI_HELLO_NONE)
            ctx->hello[from] = cookie ? HC_OFI_HELLO_OK : HC_OFI_HELLO_BAD;
        break;
    case HC_OFI_CTL_BYE:
        if (!cookie)
            hc_warn(NET, "ofi: bye from rank %d without proof of the job secret ignored", from);
        else if (ep != NULL) {
            hc_ofi_ep_gone(ep, m->limit, m->taken);
            hc_ofi_ctl_send(ctx, ep->addr, HC_OFI_CTL_BYE_ACK, 0, 0);
        } else
            ctx->bye[from] = m->limit + 1; /* for a connect still to come */
        break;
    case HC_OFI_CTL_BYE_ACK:
        if (cookie && ep != NULL)
            ep->bye_wait = 0;
        break;
    case HC_OFI_CTL_CREDIT:
        if (cookie && m->limit > ctx->grant[from])
            ctx->grant[from] = m->limit;
        break;
    case HC_OFI_CTL_NACK:
        if (ep != NULL && ep->status == HCOMM_SUCCESS) {
            hc_error(NET, "ofi: rank %d refused the connection: wrong job secret", from);
            if (ep->pend_fail == HCOMM_SUCCESS)
                ep->pend_fail = HCOMM_ERR_AUTH;
        }
        break;
    default:
        hc_warn(NET, "ofi: control message of unknown kind %u from rank %d ignored", m->kind, from);
    }
}

/* A control message arrived in op: applies it and posts op again. */
void hc_ofi_ctl_recv(hc_tl_ctx_t *ctx, hc_ofi_op_t *op, size_t len)
{
    const hc_ofi_ctl_t *m = &op->ctl;
    if (len != sizeof(*m) || m->magic != HC_OFI_MAGIC || m->version != HC_OFI_VERSION ||
        m->rank < 0 || m->rank >= ctx->nranks || m->rank == ctx->rank)
        hc_warn(NET, "ofi: malformed control message (%zu bytes) ignored", len);
    else
        ctl_apply(ctx, m);
    if (hc_ofi_ctl_post_rx(ctx, op) != HCOMM_SUCCESS)
        hc_ofi_op_put(ctx, op);
}

static int ctl_try(hc_tl_ctx_t *ctx, fi_addr_t to, const hc_ofi_ctl_t *m)
{
    uint64_t tag = HC_OFI_TAG_CTL;
    if (ctx->inject >= sizeof(*m))
        return (int)fi_tinject(ctx->ep, m, sizeof(*m), to, tag);
    if (ctx->tx_live >= ctx->tx_cap)
        return -FI_EAGAIN;
    hc_ofi_op_t *op = hc_ofi_op_get(ctx);
    if (op == NULL)
        return -FI_ENOMEM;
    op->kind = HC_OFI_OP_CTL_TX;
    op->to   = to;
    op->ctl  = *m;
    if (hc_ofi_mr_get(&ctx->mrc, &op->ctl, sizeof(op->ctl), 1, &op->mr) != HCOMM_SUCCESS) {
        hc_ofi_op_put(ctx, op);
        return -FI_ENOMEM;
    }
    int rc = (int)fi_tsend(ctx->ep, &op->ctl, sizeof(op->ctl), hc_ofi_mr_desc(op->mr), to, tag,
                           &op->fctx);
    if (rc != 0)
        hc_ofi_op_put(ctx, op);
    else
        ctx->tx_live++;
    return rc;
}

static hcomm_status_t ctlq_push(hc_tl_ctx_t *ctx, fi_addr_t to, const hc_ofi_ctl_t *m)
{
    if (ctx->nctlq == ctx->ctlq_cap) {
        int            cap = ctx->ctlq_cap ? 2 * ctx->ctlq_cap : 8;
        hc_ofi_ctlq_t *q   = realloc(ctx->ctlq, (size_t)cap * sizeof(*q));
        if (q == NULL) {
            hc_error(NET, "ofi: out of memory for %d control messages", cap);
            return HCOMM_ERR_NO_MEMORY;
        }
        ctx->ctlq     = q;
        ctx->ctlq_cap = cap;
    }
    ctx->ctlq[ctx->nctlq++] = (hc_ofi_ctlq_t){.to = to, .msg = *m};
    return HCOMM_SUCCESS;
}

/* A hello is out: data may follow it. A peer that has not connected yet
 * leaves what comes before its hello unexpected, and some providers (shm)
 * stop taking anything once their unexpected-message room is full, the
 * hello with the rest. */
static void ctl_sent(hc_tl_ctx_t *ctx, fi_addr_t to, const hc_ofi_ctl_t *m)
{
    for (int i = 0; m->kind == HC_OFI_CTL_HELLO && i < ctx->neps; i++)
        if (ctx->eps[i]->addr == to)
            ctx->eps[i]->hello_out = 1;
}

/* A control message that could not go. The peer's sends wait for our
 * credits and its connection for our hello: without them it stalls until the
 * operation's timeout, so the endpoint fails now, saying why. A lost bye or
 * its ack, or anything to a peer already leaving, costs only a wait at fini. */
void hc_ofi_ctl_failed(hc_tl_ctx_t *ctx, fi_addr_t to, int kind, int err)
{
    hc_tl_ep_t *ep = NULL;
    for (int i = 0; i < ctx->neps && ep == NULL; i++)
        if (ctx->eps[i]->addr == to)
            ep = ctx->eps[i];
    if (ep == NULL || kind == HC_OFI_CTL_BYE || kind == HC_OFI_CTL_BYE_ACK || ep->gone) {
        hc_debug(NET, "ofi: a control message to a peer leaving, or unknown, failed: %s",
                 hc_ofi_lib.fi_strerror(err));
        return;
    }
    hc_error(NET, "ofi: peer %d: a control message failed: %s", ep->peer,
             hc_ofi_lib.fi_strerror(err));
    if (ep->pend_fail == HCOMM_SUCCESS)
        ep->pend_fail = HCOMM_ERR_REMOTE;
}

/* Sends a control message now, or once the provider has room (progress). */
hcomm_status_t hc_ofi_ctl_send(hc_tl_ctx_t *ctx, fi_addr_t to, int kind, uint64_t limit,
                               uint64_t taken)
{
    hc_ofi_ctl_t m = {.magic   = HC_OFI_MAGIC,
                      .version = HC_OFI_VERSION,
                      .kind    = (uint16_t)kind,
                      .rank    = ctx->rank,
                      .limit   = limit,
                      .taken   = taken};
    hc_auth_part_t part = {&m, offsetof(hc_ofi_ctl_t, tag)};
    if (hc_auth_tag(ctx->cookie, CTL_LABEL, &part, 1, m.tag) != 0)
        return HCOMM_ERR_SYSTEM;
    int rc = ctx->nctlq > 0 ? -FI_EAGAIN : ctl_try(ctx, to, &m);
    if (rc == -FI_EAGAIN)
        return ctlq_push(ctx, to, &m);
    if (rc != 0)
        hc_ofi_ctl_failed(ctx, to, kind, -rc);
    ctl_sent(ctx, to, &m);
    return HCOMM_SUCCESS;
}

void hc_ofi_ctl_flush(hc_tl_ctx_t *ctx)
{
    hc_ofi_op_t *idle = ctx->ctl_idle;
    ctx->ctl_idle     = NULL;
    while (idle != NULL) {
        hc_ofi_op_t *op = idle;
        idle            = op->next;
        if (hc_ofi_ctl_post_rx(ctx, op) != HCOMM_SUCCESS)
            hc_ofi_op_put(ctx, op);
    }
    int i = 0;
    for (; i < ctx->nctlq; i++) {
        int rc = ctl_try(ctx, ctx->ctlq[i].to, &ctx->ctlq[i].msg);
        if (rc == -FI_EAGAIN)
            break;
        if (rc != 0)
            hc_ofi_ctl_failed(ctx, ctx->ctlq[i].to, ctx->ctlq[i].msg.kind, -rc);
        ctl_sent(ctx, ctx->ctlq[i].to, &ctx->ctlq[i].msg);
    }
    memmove(ctx->ctlq, ctx->ctlq + i, (size_t)(ctx->nctlq - i) * sizeof(*ctx->ctlq));
    ctx->nctlq -= i;
}

/* Whether a peer has yet to acknowledge our bye; one whose pid is gone never will. */
static int byes_pending(hc_tl_ctx_t *ctx)
{
    int n = 0;
    for (int i = 0; i < ctx->neps; i++) {
        hc_tl_ep_t *ep = ctx->eps[i];
        if (ep->bye_wait && hc_proc_gone(ep->pid, -1))
            ep->bye_wait = 0;
        n += ep->bye_wait;
    }
    return n;
}

/* fini: tells each live peer which of our messages never to wait for, and
 * waits a moment for it to take that: the provider does not flush on close,
 * and a socket closed with data unread resets the connection, losing what
 * we sent last. A bye arrives after our data, so its ack says all came. */
void hc_ofi_say_bye(hc_tl_ctx_t *ctx)
{
    for (int i = 0; i < ctx->neps; i++) {
        hc_tl_ep_t *ep = ctx->eps[i];
        if (ep->status == HCOMM_SUCCESS && !ep->gone) {
            hc_ofi_ctl_send(ctx, ep->addr, HC_OFI_CTL_BYE, hc_ofi_ep_tx_done_seq(ep),
                            hc_ofi_ep_rx_done_seq(ep));
            ep->bye_wait = 1;
        }
        hc_ofi_ep_drop(ep);
    }
    double now    = hc_clock_now();
    double linger =
        now + (hc_tl_timeout(&ctx->timeout) < HC_OFI_LINGER_S ? hc_tl_timeout(&ctx->timeout)
                                                              : HC_OFI_LINGER_S);
    double flush  = now + HC_OFI_FLUSH_S;
    for (int k = 0;
         k < 16 || (now < linger && (byes_pending(ctx) || (ctx->nctlq > 0 && now < flush))); k++) {
        hc_ofi_progress(ctx);
        if (k >= 16)
            sched_yield(); /* the peers that ack may need this CPU */
        now = hc_clock_now();
    }
}

/* ---- connect ---- */

/* The higher rank of a pair: whether the lower one said hello yet. */
static hcomm_status_t await_hello(hc_tl_ctx_t *ctx, const hc_peer_info_t *info, fi_addr_t *fa,
                                  const uint8_t *name, size_t len)
{
    int    peer = info->rank;
    double now  = hc_clock_now();
    if (ctx->hello[peer] == HC_OFI_HELLO_OK)
        return HCOMM_SUCCESS;
    if (ctx->hello[peer] == HC_OFI_HELLO_BAD) {
        /* tell it, so that its endpoint fails rather than waits */
        if (fi_av_insert(ctx->av, name, 1, fa, 0, NULL) == 1)
            hc_ofi_ctl_send(ctx, *fa, HC_OFI_CTL_NACK, 0, 0);
        ctx->hello[peer] = HC_OFI_HELLO_NACKED;
        return HCOMM_ERR_AUTH;
    }
    if (ctx->hello[peer] == HC_OFI_HELLO_NACKED)
        return HCOMM_ERR_AUTH;
    if (ctx->since[peer] == 0)
        ctx->since[peer] = now;
    if (ctx->host_hash == info->host_hash && hc_proc_gone(info->pid, -1)) {
        char region[48];
        hc_error(NET, "ofi: peer %d (pid %d) died before it connected", peer, (int)info->pid);
        hc_ofi_region_name(ctx, name, len - HC_OFI_ADDR_HDR, info->pid, region, sizeof(region));
        hc_ofi_region_reap(region, peer);
        return HCOMM_ERR_REMOTE;
    }
    if (now - ctx->since[peer] < hc_tl_timeout(&ctx->timeout))
        return HCOMM_IN_PROGRESS;
    hc_error(NET, "ofi: peer %d: no hello from it within %.1f s", peer,
             hc_tl_timeout(&ctx->timeout));
    return HCOMM_ERR_TIMEOUT;
}

static hcomm_status_t ep_add(hc_tl_ctx_t *ctx, const hc_peer_info_t *info, fi_addr_t fa,
                             const hc_ofi_cut_t *cut, const uint8_t *name, size_t namelen,
                             hc_tl_ep_t **ep_p)
{
    int            peer = info->rank;
    pid_t          pid  = ctx->host_hash == info->host_hash && info->pid > 0 ? info->pid : 0;
    hc_tl_ep_t    *ep;
    hcomm_status_t st = hc_ofi_ep_create(ctx, peer, fa, cut, pid, &ep);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ctx->bye[peer] != 0)
        hc_ofi_ep_gone(ep, ctx->bye[peer] - 1, 0);
    ep->hello_out = peer < ctx->rank;
    hc_ofi_region_name(ctx, name, namelen, pid, ep->region, sizeof(ep->region));
    ctx->eps[ctx->neps++] = ep;
    ctx->by_rank[peer]    = ep;
    *ep_p                 = ep;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_ofi_connect(hc_tl_ctx_t *ctx, const hc_peer_info_t *info, const void *addr,
                              size_t len, hc_tl_ep_t **ep_p)
{
    if (ctx == NULL || info == NULL || ep_p == NULL)
        return HCOMM_ERR_INVALID_ARG;
    int peer = info->rank;
    if (peer < 0 || peer >= ctx->nranks || peer == ctx->rank || ctx->by_rank[peer] != NULL) {
        hc_error(NET, "ofi: peer %d: cannot connect (self %d of %d, or connected already)", peer,
                 ctx->rank, ctx->nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    const uint8_t *name;
    hc_ofi_cut_t   cut;
    if (hc_ofi_addr_parse(ctx, addr, len, &name, &cut) != 0) {
        hc_error(NET, "ofi: peer %d: malformed address, or another provider's (%zu bytes)", peer,
                 len);
        return HCOMM_ERR_INVALID_ARG;
    }
    fi_addr_t      fa = FI_ADDR_UNSPEC;
    hcomm_status_t st = peer < ctx->rank ? await_hello(ctx, info, &fa, name, len) : HCOMM_SUCCESS;
    if (st != HCOMM_SUCCESS)
        return st;
    int rc = fi_av_insert(ctx->av, name, 1, &fa, 0, NULL);
    if (rc != 1) {
        hc_error(NET, "ofi: peer %d: fi_av_insert: %s", peer,
                 rc < 0 ? hc_ofi_lib.fi_strerror(-rc) : "refused");
        return HCOMM_ERR_UNREACHABLE;
    }
    hc_tl_ep_t *ep;
    if ((st = ep_add(ctx, info, fa, &cut, name, len - HC_OFI_ADDR_HDR, &ep)) != HCOMM_SUCCESS)
        return st;
    if (peer > ctx->rank &&
        (st = hc_ofi_ctl_send(ctx, fa, HC_OFI_CTL_HELLO, 0, 0)) != HCOMM_SUCCESS)
        return st;
    hc_debug(NET, "ofi: peer %d: connected", peer);
    *ep_p = ep;
    return HCOMM_SUCCESS;
}
