/* ucx_close.c - closing the ucx transport's endpoints at fini, bounded in
 * time: a flush, so that what was sent (and the bye) leaves this process, then
 * a forced close, which waits for no peer. A same-host endpoint (created
 * without peer error handling, which a forced close needs) is closed in flush
 * mode, which its shared memory completes at once. */
#include <stdlib.h>

#include "base/clock.h"
#include "base/log.h"
#include "transport/ucx/ucx.h"

#define CLOSE_GRACE_S 0.2 /* for the forced closes, after the flush's time */

/* Progresses until every request is done or the deadline passed; frees them
 * all (UCX completes the rest alone). Returns how many were not done. */
static int wait_all(hc_tl_ctx_t *ctx, void **reqs, int n, double deadline)
{
    int left;

    for (;;) {
        left = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i] != NULL && hc_ucx_api.ucp_request_check_status(reqs[i]) != UCS_INPROGRESS) {
                hc_ucx_api.ucp_request_free(reqs[i]);
                reqs[i] = NULL;
            }
            left += reqs[i] != NULL;
        }
        if (left == 0 || hc_clock_now() > deadline)
            break;
        hc_ucx_api.ucp_worker_progress(ctx->worker);
    }
    for (int i = 0; i < n; i++)
        if (reqs[i] != NULL) {
            hc_ucx_api.ucp_request_free(reqs[i]);
            reqs[i] = NULL;
        }
    return left;
}

/* A forced close completes at once but purges the endpoint's requests later,
 * from progress: progress until the worker is idle, so that nothing is left
 * to the worker's destruction (which warns about it). */
static void settle(hc_tl_ctx_t *ctx, double deadline)
{
    for (int idle = 0; idle < 2 && hc_clock_now() < deadline;)
        idle = hc_ucx_api.ucp_worker_progress(ctx->worker) != 0 ? 0 : idle + 1;
}

static void *started(ucs_status_ptr_t p)
{
    return UCS_PTR_IS_PTR(p) ? p : NULL;
}

/* Flushes the endpoint (peer mode) or closes it in flush mode; the request.
 * A same-host endpoint whose peer went is left to the worker's destruction,
 * which closes it without a flush that UCX would report as an error. */
static void *close_start(hc_tl_ep_t *ep)
{
    ucp_request_param_t none = {.op_attr_mask = 0};
    void               *req  = NULL;

    if (ep->err_peer)
        return ep->gone == HC_UCX_PEER_OK ? started(hc_ucx_api.ucp_ep_flush_nbx(ep->uep, &none))
                                          : NULL;
    if (ep->gone == HC_UCX_PEER_OK)
        req = started(hc_ucx_api.ucp_ep_close_nbx(ep->uep, &none));
    ep->uep = NULL;
    return req;
}

static void close_force(hc_tl_ep_t *ep, void **req)
{
    ucp_request_param_t force = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags        = UCP_EP_CLOSE_FLAG_FORCE};

    if (ep->uep != NULL && ep->err_peer)
        *req = started(hc_ucx_api.ucp_ep_close_nbx(ep->uep, &force));
    ep->uep = NULL;
}

/* Takes in what came meanwhile: byes of peers that closed first, failures
 * UCX noticed, so that endpoints to peers already gone are not flushed. */
static void take_news(hc_tl_ctx_t *ctx)
{
    settle(ctx, hc_clock_now() + CLOSE_GRACE_S);
    if (hc_ucx_check_pids(ctx) > 0)
        settle(ctx, hc_clock_now() + CLOSE_GRACE_S);
    for (int i = 0; i < ctx->nlist; i++)
        if (ctx->list[i]->status == HCOMM_SUCCESS)
            hc_ucx_bye_check(ctx->list[i]);
}

void hc_ucx_close_eps(hc_tl_ctx_t *ctx)
{
    double span     = hc_tl_timeout(&ctx->timeout) < HC_UCX_CLOSE_S ? hc_tl_timeout(&ctx->timeout)
                                                                    : HC_UCX_CLOSE_S;
    double deadline = hc_clock_now() + span;
    void **reqs     = calloc((size_t)ctx->nlist + 1, sizeof(*reqs));
    int    left, pending = 0;

    take_news(ctx);
    for (int i = 0; i < ctx->nlist; i++) {
        /* requests still pending: a teardown after a failure (a peer that
         * stopped answering), whose flush would wait out the whole span */
        pending |= ctx->list[i]->sq_head != NULL || ctx->list[i]->rq_head != NULL;
        hc_ucx_bye_send(ctx->list[i]); /* after what was sent, before the flush */
        hc_ucx_ep_abandon(ctx->list[i]);
    }
    if (reqs == NULL) { /* one at a time, with what little there is */
        hc_warn(NET, "out of memory closing %d endpoints: closing one by one", ctx->nlist);
        for (int i = 0; i < ctx->nlist; i++) {
            void *one = NULL;
            if (ctx->list[i]->uep != NULL)
                one = close_start(ctx->list[i]);
            wait_all(ctx, &one, 1, hc_clock_now() + CLOSE_GRACE_S);
            close_force(ctx->list[i], &one);
            wait_all(ctx, &one, 1, hc_clock_now() + CLOSE_GRACE_S);
        }
        return;
    }
    for (int i = 0; i < ctx->nlist; i++)
        if (ctx->list[i]->uep != NULL)
            reqs[i] = close_start(ctx->list[i]);
    if (pending && hc_clock_now() + HC_UCX_CLOSE_PENDING_S < deadline)
        deadline = hc_clock_now() + HC_UCX_CLOSE_PENDING_S;
    left = wait_all(ctx, reqs, ctx->nlist, deadline);
    if (left > 0)
        hc_debug(NET, "%d endpoint(s) not flushed within %.1f s: closed anyway", left,
                 pending ? HC_UCX_CLOSE_PENDING_S : span);
    for (int i = 0; i < ctx->nlist; i++)
        close_force(ctx->list[i], &reqs[i]);
    wait_all(ctx, reqs, ctx->nlist, hc_clock_now() + CLOSE_GRACE_S);
    free(reqs);
    settle(ctx, hc_clock_now() + CLOSE_GRACE_S);
}

void hc_ucx_drain(hc_tl_ctx_t *ctx)
{
    uint8_t             scratch[HC_UCX_DRAIN_BYTES];
    ucp_tag_recv_info_t info;
    ucp_request_param_t none = {.op_attr_mask = 0};

    for (int i = 0; i < HC_UCX_DRAIN_MSGS; i++) {
        ucp_tag_message_h msg = hc_ucx_api.ucp_tag_probe_nb(ctx->worker, 0, 0, 0, &info);
        void             *req;

        if (msg == NULL || info.length > sizeof(scratch))
            return;
        msg =
            hc_ucx_api.ucp_tag_probe_nb(ctx->worker, 0, 0, 1, &info); /* the same one, taken out */
        req =
            started(hc_ucx_api.ucp_tag_msg_recv_nbx(ctx->worker, scratch, info.length, msg, &none));
        wait_all(ctx, &req, 1, hc_clock_now() + CLOSE_GRACE_S);
    }
}
