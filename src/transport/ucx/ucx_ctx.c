/* ucx_ctx.c - the ucx transport's context: one UCP context and worker per
 * communicator, the address blob, sleeping on the worker's event fd, fini,
 * and the ops table. UCX reads its UCX_* variables itself (UCX_TLS,
 * UCX_NET_DEVICES, ...): nothing here overrides them. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/params.h"
#include "transport/ucx/ucx.h"

static hcomm_status_t off(const char *what, ucs_status_t s)
{
    hc_info(NET, "ucx: %s: %s; the ucx transport is off", what, hc_ucx_api.ucs_status_string(s));
    return HCOMM_ERR_UNSUPPORTED;
}

static ucs_status_t query_address(hc_tl_ctx_t *ctx, unsigned flags, ucp_worker_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    attr->field_mask    = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
    attr->address_flags = flags;
    return hc_ucx_api.ucp_worker_query(ctx->worker, attr);
}

/* Copies the chosen worker address behind the blob's header. */
static hcomm_status_t blob_fill(hc_tl_ctx_t *ctx, const ucp_worker_attr_t *use)
{
    hc_ucx_blob_t hdr = {.magic = HC_UCX_MAGIC, .addr_len = (uint32_t)use->address_length};
    unsigned      major, minor, release;

    hc_ucx_api.ucp_get_version(&major, &minor, &release);
    hdr.major     = (uint16_t)major;
    hdr.minor     = (uint16_t)minor;
    ctx->blob_len = sizeof(hdr) + use->address_length;
    ctx->blob     = malloc(ctx->blob_len);
    if (ctx->blob == NULL) {
        hc_error(NET, "out of memory for the ucx address");
        return HCOMM_ERR_NO_MEMORY;
    }
    memcpy(ctx->blob, &hdr, sizeof(hdr));
    memcpy(ctx->blob + sizeof(hdr), use->address, use->address_length);
    return HCOMM_SUCCESS;
}

/* The blob: the worker's address, or where that is too big for HC_TL_ADDR_MAX
 * (many devices) its network-only one. The two differ when UCX has shared
 * memory (or self) transports here: shm_tls. */
static hcomm_status_t ctx_address(hc_tl_ctx_t *ctx)
{
    const size_t      room = HC_TL_ADDR_MAX - sizeof(hc_ucx_blob_t);
    ucp_worker_attr_t full, net, *use = &full;
    hcomm_status_t    st = HCOMM_ERR_UNSUPPORTED;
    ucs_status_t      s  = query_address(ctx, 0, &full);

    if (s != UCS_OK)
        return off("querying the worker address", s);
    s = query_address(ctx, UCP_WORKER_ADDRESS_FLAG_NET_ONLY, &net);
    if (s != UCS_OK) {
        hc_ucx_api.ucp_worker_release_address(ctx->worker, full.address);
        return off("querying the network-only worker address", s);
    }
    ctx->shm_tls = full.address_length > net.address_length;
    if (full.address_length > room) {
        use = &net;
        hc_info(NET,
                "ucx: the worker address is %zu bytes, more than %zu: publishing the "
                "%zu-byte network-only one (peers reach this rank without shared memory)",
                full.address_length, room, net.address_length);
    }
    if (use->address_length <= room)
        st = blob_fill(ctx, use);
    else
        hc_info(NET,
                "ucx: the network-only worker address is %zu bytes, more than %zu; the "
                "ucx transport is off",
                net.address_length, room);
    hc_ucx_api.ucp_worker_release_address(ctx->worker, full.address);
    hc_ucx_api.ucp_worker_release_address(ctx->worker, net.address);
    return st;
}

/* hcomm's defaults for UCX settings, each applied only where the user's
 * environment does not set it (then UCX's own rules hold). UCX's tcp cuts
 * every message into pieces of its segment size (8K to send, 64K to receive),
 * one system call each and a copy out of its receive buffer: segments that
 * hold a whole pipelining chunk (HCOMM_CHUNK_BYTES, 256K) and its header move
 * it in one call (~1.5x the bandwidth of UCX's defaults, 1-64 MiB allreduce).
 * UCX 1.13 applies a transport's key only without the transport's prefix. */
static const struct {
    const char *env, *key, *value;
} tuned[] = {
    {"UCX_TCP_TX_SEG_SIZE", "TX_SEG_SIZE", "512K"},
    {"UCX_TCP_RX_SEG_SIZE", "RX_SEG_SIZE", "512K"},
};

/* Whether UCX_TLS lets UCX use tcp: a key no transport takes draws UCX's
 * "invalid configurations" warning. */
static int tcp_allowed(void)
{
    const char *tls = hc_params_foreign("UCX_TLS");

    if (tls == NULL || *tls == '\0')
        return 1;
    if (*tls == '^')
        return strstr(tls, "tcp") == NULL;
    return strstr(tls, "tcp") != NULL || strstr(tls, "all") != NULL;
}

static void tune(ucp_config_t *cfg)
{
    if (!tcp_allowed())
        return;
    for (size_t i = 0; i < sizeof(tuned) / sizeof(tuned[0]); i++) {
        if (hc_params_foreign(tuned[i].env) != NULL)
            continue;
        ucs_status_t s = hc_ucx_api.ucp_config_modify(cfg, tuned[i].key, tuned[i].value);
        if (s != UCS_OK)
            hc_debug(NET, "ucx: %s=%s not applied: %s", tuned[i].env, tuned[i].value,
                     hc_ucx_api.ucs_status_string(s));
    }
}

static hcomm_status_t ctx_open(hc_tl_ctx_t *ctx)
{
    ucp_params_t prm = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                                      UCP_PARAM_FIELD_NAME,
                        .features          = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
                        .estimated_num_eps = (size_t)ctx->nranks,
                        .name              = "hcomm"};
    ucp_worker_params_t wp = {.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    ucp_config_t       *cfg;
    ucs_status_t        s = hc_ucx_api.ucp_config_read(NULL, NULL, &cfg);

    if (s != UCS_OK)
        return off("reading the UCX_* configuration", s);
    tune(cfg);
    s = hc_ucx_api.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &prm, cfg, &ctx->uctx);
    hc_ucx_api.ucp_config_release(cfg);
    if (s != UCS_OK) {
        ctx->uctx = NULL;
        return off("ucp_init", s);
    }
    s = hc_ucx_api.ucp_worker_create(ctx->uctx, &wp, &ctx->worker);
    if (s != UCS_OK) {
        ctx->worker = NULL;
        return off("creating a worker", s);
    }
    /* without an event fd (a transport without events) progress is polled */
    if (hc_ucx_api.ucp_worker_get_efd(ctx->worker, &ctx->efd) != UCS_OK)
        ctx->efd = -1;
    return ctx_address(ctx);
}

static void ucx_fini(hc_tl_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->worker != NULL) {
        /* the peers' byes still match while the flush progresses */
        hc_ucx_close_eps(ctx);
        for (int r = 0; r < ctx->nranks; r++)
            if (ctx->pend[r] != NULL)
                hc_ucx_ctl_release(ctx, &ctx->pend[r]->rx);
        for (int i = 0; i < ctx->nlist; i++) {
            hc_ucx_ctl_release(ctx, &ctx->list[i]->bye_rx);
            hc_ucx_ctl_release(ctx, &ctx->list[i]->hello_tx);
            hc_ucx_ctl_release(ctx, &ctx->list[i]->bye_tx);
        }
        hc_ucx_drain(ctx);
        hc_ucx_api.ucp_worker_destroy(ctx->worker);
    }
    if (ctx->uctx != NULL)
        hc_ucx_api.ucp_cleanup(ctx->uctx);
    for (int i = 0; i < ctx->nlist; i++)
        free(ctx->list[i]);
    for (int r = 0; ctx->pend != NULL && r < ctx->nranks; r++)
        free(ctx->pend[r]);
    hc_ucx_bounce_free_all(ctx);
    free(ctx->blob);
    free(ctx->ready);
    free(ctx->list);
    free(ctx->pend);
    free(ctx->eps);
    free(ctx);
}

static hcomm_status_t ucx_init(hc_tl_ctx_t **ctx_p, const hc_tl_params_t *p)
{
    const hc_params_t *prm;
    hc_tl_ctx_t       *ctx;
    hcomm_status_t     st;

    if (ctx_p == NULL || p == NULL || p->nranks <= 0 || p->rank < 0 || p->rank >= p->nranks)
        return HCOMM_ERR_INVALID_ARG;
    if (p->nranks > HC_UCX_MAX_RANKS) {
        hc_info(NET, "ucx: %d ranks, more than its tags hold (%d); the ucx transport is off",
                p->nranks, HC_UCX_MAX_RANKS);
        return HCOMM_ERR_UNSUPPORTED;
    }
    if (p->fabric_only && hc_params_foreign("UCX_TLS") == NULL && !hc_tl_host_has_fabric()) {
        hc_info(NET, "ucx: no RDMA device here, and UCX's tcp and shared memory are what "
                     "hcomm's tcp and shm do faster (HCOMM_NET=ucx,... or UCX_TLS uses them)");
        return HCOMM_ERR_UNSUPPORTED;
    }
    st = hc_ucx_load();
    if (st != HCOMM_SUCCESS)
        return st;
    prm = p->params != NULL ? p->params : hc_params_get();
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        goto err_nomem;
    ctx->efd   = -1;
    ctx->eps   = calloc((size_t)p->nranks, sizeof(*ctx->eps));
    ctx->pend  = calloc((size_t)p->nranks, sizeof(*ctx->pend));
    ctx->list  = calloc((size_t)p->nranks, sizeof(*ctx->list));
    ctx->ready = calloc((size_t)p->nranks, sizeof(*ctx->ready));
    if (ctx->eps == NULL || ctx->pend == NULL || ctx->list == NULL || ctx->ready == NULL)
        goto err_fini;
    ctx->rank      = p->rank;
    ctx->nranks    = p->nranks;
    ctx->timeout   = hc_tl_timeout_init(p, prm);
    ctx->host_hash = p->self != NULL ? p->self->host_hash : 0;
    memcpy(ctx->cookie, p->cookie, sizeof(ctx->cookie));
    if (p->self != NULL)
        memcpy(ctx->nonce, p->self->nonce, sizeof(ctx->nonce));
    st = ctx_open(ctx);
    if (st != HCOMM_SUCCESS) {
        ucx_fini(ctx);
        return st;
    }
    *ctx_p = ctx;
    return HCOMM_SUCCESS;

err_fini:
    ucx_fini(ctx);
err_nomem:
    hc_error(NET, "out of memory for the ucx context");
    return HCOMM_ERR_NO_MEMORY;
}

static hcomm_status_t ucx_address(hc_tl_ctx_t *ctx, void *buf, size_t *len)
{
    if (ctx == NULL || buf == NULL || len == NULL || *len < ctx->blob_len)
        return HCOMM_ERR_INVALID_ARG;
    memcpy(buf, ctx->blob, ctx->blob_len);
    *len = ctx->blob_len;
    return HCOMM_SUCCESS;
}

/* UCX decides at ucp_ep_create whether its transports reach the peer; here
 * only the blob's kind and UCX major version are checked. */
static int ucx_reachable(hc_tl_ctx_t *ctx, const hc_peer_info_t *self, const hc_peer_info_t *peer,
                         const void *addr, size_t len)
{
    (void)self, (void)peer;
    return hc_ucx_blob_ok(ctx, addr, len);
}

/* The worker's event fd, armed. UCX refuses to arm (busy) while events wait
 * for progress: a few rounds take them in; completions found meanwhile, or
 * events that keep coming, make the fd readable at once (ucp_worker_signal)
 * so that the caller progresses instead of sleeping. */
static int ucx_wait_fds(hc_tl_ctx_t *ctx, struct pollfd *pfds, int max)
{
    ucs_status_t s = UCS_ERR_BUSY;

    if (ctx->efd < 0 || max < 1)
        return -1;
    for (int i = 0; i < HC_UCX_ARM_TRIES && ctx->nready == 0; i++) {
        s = hc_ucx_api.ucp_worker_arm(ctx->worker);
        if (s != UCS_ERR_BUSY)
            break;
        hc_ucx_api.ucp_worker_progress(ctx->worker);
    }
    if (s == UCS_ERR_BUSY || ctx->nready > 0)
        s = hc_ucx_api.ucp_worker_signal(ctx->worker);
    if (s != UCS_OK)
        return -1;
    pfds[0] = (struct pollfd){.fd = ctx->efd, .events = POLLIN};
    return 1;
}

const hc_tl_ops_t hc_tl_ucx_ops = {
    .name      = "ucx",
    .caps      = HC_TL_CAP_HOST_MEM,
    .init      = ucx_init,
    .fini      = ucx_fini,
    .address   = ucx_address,
    .reachable = ucx_reachable,
    .connect   = hc_ucx_connect,
    .isend     = hc_ucx_isend,
    .irecv     = hc_ucx_irecv,
    .progress  = hc_ucx_progress,
    .ep_status = hc_ucx_ep_status,
    .wait_fds  = ucx_wait_fds,
};
