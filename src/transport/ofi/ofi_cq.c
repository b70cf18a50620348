/* ofi_cq.c - progress: the completion queue, failures the provider reports,
 * peers that died, and the wait fd an idle rank sleeps on.
 *
 * Dead peers: the provider reports errors on operations it could not finish
 * (a connection reset, refused), which fail their endpoint; a bye says a peer
 * closed. A peer on this host is also watched by pid, since a peer killed
 * while a receive from it is posted leaves nothing for the provider to fail.
 * A remote peer that dies silently is left to the executor's HCOMM_TIMEOUT. */
#include <errno.h>
#include <signal.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/proc.h"
#include "transport/ofi/ofi.h"

static void op_finished(hc_tl_ctx_t *ctx, hc_ofi_op_t *op)
{
    if (op->kind == HC_OFI_OP_SEND || op->kind == HC_OFI_OP_CTL_TX)
        ctx->tx_live--;
    else
        ctx->rx_live--;
    if (op->ep != NULL)
        hc_ofi_op_unlink(op);
}

/* A chunk of a request failed: so does its endpoint, at the next pass. */
static void data_failed(hc_tl_ctx_t *ctx, hc_ofi_op_t *op, hcomm_status_t st)
{
    hc_tl_ep_t *ep = op->ep;
    op_finished(ctx, op);
    if (op->req != NULL && ep->status == HCOMM_SUCCESS) {
        HC_OFI_ERR(op->req) = (uint64_t)(int64_t)st;
        if (ep->pend_fail == HCOMM_SUCCESS)
            ep->pend_fail = st;
    }
    hc_ofi_op_put(ctx, op);
}

/* A chunk arrived: its length, and the message's that it carries, must be
 * the receive's, or the two sides disagree on the message's length. */
static int chunk_fits(const hc_tl_ctx_t *ctx, const hc_ofi_op_t *op,
                      const struct fi_cq_tagged_entry *e)
{
    return e->len == op->len && (e->flags & FI_REMOTE_CQ_DATA) &&
           (e->data & ctx->data_mask) == (op->req->len & ctx->data_mask);
}

static void data_done(hc_tl_ctx_t *ctx, hc_ofi_op_t *op, const struct fi_cq_tagged_entry *e)
{
    hc_tl_ep_t  *ep = op->ep;
    hc_tl_req_t *r  = op->req;
    /* the endpoint failed meanwhile: its request fails once all its
     * operations came back (progress); fini's forgot it */
    if (r == NULL || ep->status != HCOMM_SUCCESS) {
        op_finished(ctx, op);
        hc_ofi_op_put(ctx, op);
        return;
    }
    if (ep->gone)
        ep->quiet = hc_clock_now();
    if (op->kind != HC_OFI_OP_SEND && !chunk_fits(ctx, op, e)) {
        hc_error(NET,
                 "ofi: peer %d: a message of %llu bytes (chunk %u: %zu bytes) arrived for "
                 "a receive of %zu",
                 ep->peer, (unsigned long long)e->data, op->chunk, e->len, r->len);
        data_failed(ctx, op, HCOMM_ERR_PROTOCOL);
        return;
    }
    op_finished(ctx, op);
    if (op->kind == HC_OFI_OP_SINK) {
        hc_ofi_sink_done(ep, op);
        return;
    }
    HC_OFI_DONE(r)++;
    hc_ofi_op_put(ctx, op);
}

static void entry_done(hc_tl_ctx_t *ctx, const struct fi_cq_tagged_entry *e)
{
    hc_ofi_op_t *op = e->op_context;
    switch (op->kind) {
    case HC_OFI_OP_CTL_RX:
        ctx->rx_live--;
        hc_ofi_ctl_recv(ctx, op, e->len);
        break;
    case HC_OFI_OP_CTL_TX:
        ctx->tx_live--;
        hc_ofi_op_put(ctx, op);
        break;
    default:
        data_done(ctx, op, e);
    }
}

static void cq_error(hc_tl_ctx_t *ctx)
{
    struct fi_cq_err_entry err = {0};
    char                   buf[256];
    if (fi_cq_readerr(ctx->cq, &err, 0) != 1)
        return;
    hc_ofi_op_t *op = err.op_context;
    err.err         = err.err < 0 ? -err.err : err.err; /* shm reports some negated */
    if (op == NULL)
        return;
    const char *why = fi_cq_strerror(ctx->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
    if (op->kind == HC_OFI_OP_CTL_RX) { /* cancelled only by fini's close */
        ctx->rx_live--;
        if (err.err == FI_ECANCELED || hc_ofi_ctl_post_rx(ctx, op) != HCOMM_SUCCESS)
            hc_ofi_op_put(ctx, op);
        return;
    }
    if (op->kind == HC_OFI_OP_CTL_TX) {
        hc_debug(NET, "ofi: a control message's completion: %s", why);
        hc_ofi_ctl_failed(ctx, op->to, op->ctl.kind, err.err);
        ctx->tx_live--;
        hc_ofi_op_put(ctx, op);
        return;
    }
    /* we cancel only the receives of a failed endpoint (or fini's); rxm
     * cancels one whose message was cut short by the peer's connection going */
    int failed = op->req == NULL || op->ep->status != HCOMM_SUCCESS;
    if (err.err == FI_ECANCELED && failed) {
        data_failed(ctx, op, HCOMM_ERR_ABORTED);
        return;
    }
    int first = !failed && op->ep->pend_fail == HCOMM_SUCCESS; /* log it once */
    if (first && err.err == FI_ETRUNC)
        hc_error(NET, "ofi: peer %d: a message longer than its receive of %zu bytes arrived",
                 op->ep->peer, op->req->len);
    else if (first)
        hc_error(NET, "ofi: peer %d: %s failed: %s (%s)", op->ep->peer,
                 op->kind == HC_OFI_OP_SEND ? "a send" : "a receive", hc_ofi_lib.fi_strerror(err.err), why);
    data_failed(ctx, op, err.err == FI_ETRUNC ? HCOMM_ERR_PROTOCOL : HCOMM_ERR_REMOTE);
}

/* Handles what the CQ holds, a bounded number of batches; returns how many
 * entries it read. */
static int cq_drain(hc_tl_ctx_t *ctx)
{
    struct fi_cq_tagged_entry e[HC_OFI_CQ_BATCH];
    int                       n = 0;
    for (int round = 0; round < 16; round++) {
        ssize_t got = fi_cq_read(ctx->cq, e, HC_OFI_CQ_BATCH);
        if (got == -FI_EAVAIL) {
            cq_error(ctx);
            n++;
            continue;
        }
        if (got == -FI_EAGAIN)
            break;
        if (got < 0) {
            hc_error(NET, "ofi: fi_cq_read: %s", hc_ofi_lib.fi_strerror((int)-got));
            break;
        }
        for (ssize_t i = 0; i < got; i++)
            entry_done(ctx, &e[i]);
        n += (int)got;
        if (got < HC_OFI_CQ_BATCH)
            break;
    }
    return n;
}

/* Peers on this host: a vanished pid is a dead peer. */
static void liveness(hc_tl_ctx_t *ctx)
{
    for (int i = 0; i < ctx->neps; i++) {
        hc_tl_ep_t *ep = ctx->eps[i];
        if (ep->status == HCOMM_SUCCESS && !ep->gone && hc_proc_gone(ep->pid, -1)) {
            hc_ofi_ep_gone(ep, UINT64_MAX, 0);
            hc_ofi_region_reap(ep->region, ep->peer);
            ep->region[0] = '\0';
        }
    }
}

static int ep_pass(hc_tl_ep_t *ep, double *now)
{
    if (ep->status != HCOMM_SUCCESS) /* failed: requests the provider gave back since */
        return ep->tx_head != NULL || ep->rx_head != NULL ? hc_ofi_ep_release(ep) : 0;
    if (ep->pend_fail != HCOMM_SUCCESS) {
        hcomm_status_t st    = ep->pend_fail;
        uint64_t       limit = hc_ofi_ep_tx_done_seq(ep), taken = hc_ofi_ep_rx_done_seq(ep);
        int            n = hc_ofi_ep_fail(ep, st);
        /* a failure of ours: the peer must not wait for what will not come;
         * fini lingers for its ack, as for the byes it sends itself */
        if (st != HCOMM_ERR_REMOTE && st != HCOMM_ERR_AUTH && !ep->gone) {
            hc_ofi_ctl_send(ep->ctx, ep->addr, HC_OFI_CTL_BYE, limit, taken);
            ep->bye_wait = 1;
        }
        return n;
    }
    hc_ofi_ep_post(ep);
    int n = hc_ofi_ep_release(ep);
    if (ep->gone && ep->status == HCOMM_SUCCESS) {
        if (*now == 0)
            *now = hc_clock_now();
        n += hc_ofi_ep_gone_step(ep, *now);
    }
    return n;
}

int hc_ofi_progress(hc_tl_ctx_t *ctx)
{
    if (ctx == NULL || ctx->ep == NULL)
        return 0;
    cq_drain(ctx);
    if (ctx->nctlq > 0 || ctx->ctl_idle != NULL)
        hc_ofi_ctl_flush(ctx);
    uint64_t ms = hc_clock_coarse_ms();
    if (ms >= ctx->next_check_ms) {
        ctx->next_check_ms = ms + HC_OFI_CHECK_MS;
        liveness(ctx);
    }
    int    n   = 0;
    double now = 0;
    for (int i = 0; i < ctx->neps; i++)
        n += ep_pass(ctx->eps[i], &now);
    return n;
}

/* Whether progress has work of its own that no completion will announce:
 * failures to deliver, a gone peer's grace, control messages queued. (Chunks
 * waiting for room or credit wait for completions and control messages.) */
static int busy(const hc_tl_ctx_t *ctx)
{
    if (ctx->nctlq > 0 || ctx->ctl_idle != NULL)
        return 1;
    for (int i = 0; i < ctx->neps; i++) {
        const hc_tl_ep_t *ep = ctx->eps[i];
        if (ep->status == HCOMM_SUCCESS && (ep->pend_fail != HCOMM_SUCCESS || ep->gone))
            return 1;
    }
    return 0;
}

/* The CQ's wait fd. Where progress has work of its own, or fi_trywait finds
 * completions to read first, the CQ is signalled so that poll() returns at
 * once: the caller progresses and asks again. -1 where the provider has no
 * wait fd. */
int hc_ofi_wait_fds(hc_tl_ctx_t *ctx, struct pollfd *pfds, int max)
{
    if (ctx == NULL || ctx->wait_fd < 0 || max < 1)
        return -1;
    struct fid *f     = &ctx->cq->fid;
    int         sleep = !busy(ctx);
    for (int k = 0; sleep && k < 2; k++) {
        if (fi_trywait(ctx->fabric, &f, 1) == 0)
            break;
        sleep = cq_drain(ctx) == 0 && k == 0;
    }
    if (!sleep && fi_cq_signal(ctx->cq) != 0)
        return 0; /* no way to wake poll(): let the caller spin */
    pfds[0] = (struct pollfd){.fd = ctx->wait_fd, .events = POLLIN};
    return 1;
}
