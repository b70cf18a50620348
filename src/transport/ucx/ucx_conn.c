/* ucx_conn.c - the ucx transport's connections: the lower rank of a pair
 * creates its UCP endpoint and says hello at once; the higher one waits (never
 * inside a call) for that hello, checks its MAC, then creates its own. */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/auth.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "base/proc.h"
#include "transport/ucx/ucx.h"

/* UCX found the endpoint broken (peer gone, connection lost). */
static void ep_err_cb(void *arg, ucp_ep_h uep, ucs_status_t status)
{
    hc_tl_ep_t *ep = arg;

    (void)uep;
    ep->ucx_error = status;
    if (ep->gone == HC_UCX_PEER_OK)
        ep->gone = HC_UCX_PEER_DEAD;
    hc_ucx_mark_ready(ep);
}

static int pid_gone(pid_t pid)
{
    return hc_proc_gone(pid, -1);
}

int hc_ucx_check_pids(hc_tl_ctx_t *ctx)
{
    int n = 0;

    for (int i = 0; i < ctx->nlist; i++) {
        hc_tl_ep_t *ep = ctx->list[i];

        if (ep->status != HCOMM_SUCCESS || ep->gone != HC_UCX_PEER_OK || !pid_gone(ep->peer_pid))
            continue;
        ep->gone = HC_UCX_PEER_DEAD;
        hc_ucx_mark_ready(ep);
        n++;
    }
    return n;
}

/* addr: the worker address, in a zeroed buffer of HC_TL_ADDR_MAX bytes */
static ucs_status_t uep_create(hc_tl_ep_t *ep, const void *addr)
{
    ucp_ep_params_t prm;

    /* UCX 1.13's shared memory (posix, sysv) cannot report a peer's failure:
     * in peer mode a same-host pair would go over loopback tcp, or nowhere
     * (UCX_TLS=posix,cma). Where UCX has shared memory, such a pair goes
     * without: the peer's pid is watched instead, and the callback still
     * hears of what UCX does notice. */
    ep->err_peer = ep->peer_pid == 0 || !ep->ctx->shm_tls;
    memset(&prm, 0, sizeof(prm));
    prm.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                     UCP_EP_PARAM_FIELD_ERR_HANDLER;
    prm.address         = (const ucp_address_t *)addr;
    prm.err_mode        = ep->err_peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    prm.err_handler.cb  = ep_err_cb;
    prm.err_handler.arg = ep;
    return hc_ucx_api.ucp_ep_create(ep->ctx->worker, &prm, &ep->uep);
}

/* Whether the peer's bye waits among the unexpected messages. */
static int bye_waiting(hc_tl_ctx_t *ctx, int r)
{
    ucp_tag_recv_info_t info;

    return hc_ucx_api.ucp_tag_probe_nb(ctx->worker, hc_ucx_ctl_tag(r, HC_UCX_TAG_BYE), UINT64_MAX,
                                       0, &info) != NULL;
}

/* The same after taking in what already arrived: a peer whose endpoint cannot
 * be made because it closed sent its bye first, maybe not yet progressed. */
static int bye_arrived(hc_tl_ctx_t *ctx, int r)
{
    for (int i = 0; i < HC_UCX_DRAIN_MAX && !bye_waiting(ctx, r); i++)
        hc_ucx_api.ucp_worker_progress(ctx->worker);
    return bye_waiting(ctx, r);
}

static hcomm_status_t ep_create(hc_tl_ctx_t *ctx, const hc_peer_info_t *info, const void *addr,
                                hc_tl_ep_t **ep_p)
{
    int          r  = info->rank;
    hc_tl_ep_t  *ep = calloc(1, sizeof(*ep));
    ucs_status_t s;

    if (ep == NULL) {
        hc_error(NET, "peer %d: out of memory for an endpoint", r);
        return HCOMM_ERR_NO_MEMORY;
    }
    ep->ctx    = ctx;
    ep->peer   = r;
    ep->status = HCOMM_SUCCESS;
    if (ctx->host_hash != 0 && info->host_hash == ctx->host_hash && info->pid > 0)
        ep->peer_pid = info->pid;
    /* a peer that sent and closed before we connected (its shared memory
     * may be gone with it): what it sent is here, receives still take it */
    s = bye_waiting(ctx, r) ? UCS_ERR_NOT_CONNECTED : uep_create(ep, addr);
    if (s != UCS_OK && bye_arrived(ctx, r)) {
        hc_debug(NET, "peer %d: closed already: a receive-only endpoint", r);
        ep->uep = NULL;
    } else if (s != UCS_OK) {
        hc_error(NET, "peer %d: ucp_ep_create: %s (UCX_TLS=%s)", r, hc_ucx_api.ucs_status_string(s),
                 hc_params_foreign("UCX_TLS") != NULL ? hc_params_foreign("UCX_TLS") : "unset");
        free(ep);
        return HCOMM_ERR_UNREACHABLE;
    }
    hc_ucx_ctl_recv(ctx, ep, &ep->bye_rx, &ep->bye_in, sizeof(ep->bye_in), r, HC_UCX_TAG_BYE);
    if (ep->uep == NULL)
        hc_ucx_bye_check(ep); /* matched at once: closed before any send */
    ctx->eps[r]             = ep;
    ctx->list[ctx->nlist++] = ep;
    *ep_p                   = ep;
    return HCOMM_SUCCESS;
}

/* A hello's tag: a MAC under the key over its fields and the receiver's nonce. */
static int hello_tag(const uint8_t *key, const hc_ucx_hello_t *h, const uint8_t *nonce,
                     uint8_t *tag, int check)
{
    hc_auth_part_t parts[2] = {{h, offsetof(hc_ucx_hello_t, tag)}, {nonce, 16}};
    return check ? hc_auth_tag_check(key, "hcomm ucx hello", parts, 2, tag)
                 : hc_auth_tag(key, "hcomm ucx hello", parts, 2, tag);
}

/* The hello arrived: is it from the peer, with proof of our key? */
static hcomm_status_t hello_judge(const hc_tl_ctx_t *ctx, int r, const hc_ucx_pend_t *pend)
{
    const hc_ucx_hello_t *h = &pend->hello;

    if (pend->rx.status != UCS_OK) {
        hc_error(NET, "peer %d: receiving its hello: %s", r,
                 hc_ucx_api.ucs_status_string(pend->rx.status));
        return pend->rx.status == UCS_ERR_MESSAGE_TRUNCATED ? HCOMM_ERR_PROTOCOL : HCOMM_ERR_REMOTE;
    }
    if (pend->rx.length != sizeof(*h) || h->magic != HC_UCX_MAGIC || h->rank != (uint32_t)r) {
        hc_error(NET, "peer %d: malformed hello (%zu bytes)", r, pend->rx.length);
        return HCOMM_ERR_PROTOCOL;
    }
    if (!hello_tag(ctx->cookie, h, ctx->nonce, (uint8_t *)h->tag, 1)) {
        hc_error(NET, "peer %d: hello without proof of the job secret: refused", r);
        return HCOMM_ERR_AUTH;
    }
    return HCOMM_SUCCESS;
}

static void pend_drop(hc_tl_ctx_t *ctx, int r)
{
    hc_ucx_ctl_release(ctx, &ctx->pend[r]->rx);
    free(ctx->pend[r]);
    ctx->pend[r] = NULL;
}

/* Higher rank: HCOMM_SUCCESS once the peer's hello is in and right,
 * HCOMM_IN_PROGRESS before, an error when it is wrong, the peer died or the
 * timeout passed since the first call. */
static hcomm_status_t hello_wait(hc_tl_ctx_t *ctx, const hc_peer_info_t *info)
{
    int            r    = info->rank;
    hc_ucx_pend_t *pend = ctx->pend[r];
    double         now  = hc_clock_now();
    hcomm_status_t st;

    if (pend == NULL) {
        pend = calloc(1, sizeof(*pend));
        if (pend == NULL) {
            hc_error(NET, "peer %d: out of memory", r);
            return HCOMM_ERR_NO_MEMORY;
        }
        pend->since  = now;
        ctx->pend[r] = pend;
        hc_ucx_ctl_recv(ctx, NULL, &pend->rx, &pend->hello, sizeof(pend->hello), r,
                        HC_UCX_TAG_HELLO);
    }
    if (pend->rx.done) {
        st = hello_judge(ctx, r, pend);
        pend_drop(ctx, r);
        return st;
    }
    if (ctx->host_hash != 0 && info->host_hash == ctx->host_hash && pid_gone(info->pid)) {
        hc_error(NET, "peer %d (pid %d) died before its hello", r, (int)info->pid);
        pend_drop(ctx, r);
        return HCOMM_ERR_REMOTE;
    }
    if (now - pend->since < hc_tl_timeout(&ctx->timeout))
        return HCOMM_IN_PROGRESS;
    /* the receive stays posted: a late hello still connects a later call */
    hc_error(NET, "peer %d: no hello from it within %.1f s", r, hc_tl_timeout(&ctx->timeout));
    return HCOMM_ERR_TIMEOUT;
}

int hc_ucx_blob_ok(const hc_tl_ctx_t *ctx, const void *addr, size_t len)
{
    hc_ucx_blob_t hdr;

    if (addr == NULL || len <= sizeof(hdr) || len > HC_TL_ADDR_MAX)
        return 0;
    memcpy(&hdr, addr, sizeof(hdr));
    /* both ends of a pair compare the same two versions: they agree */
    return hdr.magic == HC_UCX_MAGIC && hdr.major == ((const hc_ucx_blob_t *)ctx->blob)->major &&
           hdr.addr_len > 0 && hdr.addr_len == len - sizeof(hdr);
}

hcomm_status_t hc_ucx_connect(hc_tl_ctx_t *ctx, const hc_peer_info_t *info, const void *addr,
                              size_t len, hc_tl_ep_t **ep_p)
{
    int            r = info != NULL ? info->rank : -1;
    hc_tl_ep_t    *ep;
    hcomm_status_t st;

    if (r < 0 || r >= ctx->nranks || r == ctx->rank || ctx->eps[r] != NULL || ep_p == NULL) {
        hc_error(NET, "peer %d: cannot connect (self %d of %d, or connected already)", r, ctx->rank,
                 ctx->nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    if (!hc_ucx_blob_ok(ctx, addr, len)) {
        hc_error(NET, "peer %d: a malformed ucx address, or another UCX version's (%zu bytes)", r,
                 len);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (ctx->rank > r) {
        st = hello_wait(ctx, info);
        if (st != HCOMM_SUCCESS)
            return st;
    }
    hc_ucx_hello_t hello = {.magic = HC_UCX_MAGIC, .rank = (uint32_t)ctx->rank};
    if (ctx->rank < r && hello_tag(ctx->cookie, &hello, info->nonce, hello.tag, 0) != 0)
        return HCOMM_ERR_SYSTEM;
    /* UCX reads the address as far as its contents say: from a copy with
     * zeros behind it, not past the caller's blob */
    uint8_t wa[HC_TL_ADDR_MAX] = {0};
    memcpy(wa, (const uint8_t *)addr + sizeof(hc_ucx_blob_t), len - sizeof(hc_ucx_blob_t));
    st = ep_create(ctx, info, wa, &ep);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ctx->rank < r && ep->uep != NULL) {
        ep->hello = hello;
        hc_ucx_ctl_send(ep, &ep->hello_tx, &ep->hello, sizeof(ep->hello), HC_UCX_TAG_HELLO);
    }
    hc_debug(NET, "peer %d: ucx endpoint created", r);
    *ep_p = ep;
    return HCOMM_SUCCESS;
}
