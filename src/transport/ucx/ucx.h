/* ucx.h - internals of the ucx transport (UCP tag matching), shared by its files.
 *
 * One UCP context and worker per transport context. The address blob is a
 * short header and the worker's address. Each message is one tagged UCP
 * message whose tag carries the sender's rank and a per-peer sequence number;
 * each receive is posted with its exact tag, so messages match the receives in
 * posting order whatever order UCX completes them in, and requests are handed
 * back in posting order per endpoint and direction.
 *
 * Control messages carry the top tag bit: the lower rank of a pair creates its
 * UCP endpoint at once and sends a hello with a MAC under the cookie; the
 * higher rank checks it before creating its own. An endpoint that closes (fini)
 * or fails here sends a bye that says how many of its messages were completely
 * sent: the peer still receives those, and fails the receives beyond them.
 *
 * A peer's death: UCX's error callback (endpoints to other hosts use peer
 * error handling), and for a same-host peer its pid, checked every few ms.
 * UCX itself is loaded at the first init (ucx_dl.c), not linked.
 *
 * Request scratch (hc_tl_req_t.priv): [0] the UCX request while UCX holds
 * one, [1] a sink receive's bounce buffer, [2] HC_UCX_DONE | ucs_status << 32
 * once UCX is done with it, [3] the bytes received.
 */
#ifndef HC_UCX_H
#define HC_UCX_H

#include <stdint.h>
#include <sys/types.h>
#include <ucp/api/ucp.h>

#include "transport/transport.h"

#define HC_UCX_MAGIC 0x58435568u /* "hUCX": the address blob's and control messages' */
#define HC_UCX_SEQ_BITS 40
#define HC_UCX_RANK_BITS 23
#define HC_UCX_MAX_RANKS (1 << HC_UCX_RANK_BITS)
#define HC_UCX_SEQ_MASK ((UINT64_C(1) << HC_UCX_SEQ_BITS) - 1)
#define HC_UCX_CTRL (UINT64_C(1) << 63)
#define HC_UCX_TAG_HELLO 1u
#define HC_UCX_TAG_BYE 2u
#define HC_UCX_DONE UINT64_C(1)
#define HC_UCX_CHECK_MS 10         /* same-host peers' pids, this often */
#define HC_UCX_CLOSE_S 1.0         /* fini's flush of the endpoints, at most */
#define HC_UCX_CLOSE_PENDING_S 0.1 /* ... when requests were still pending */
#define HC_UCX_DRAIN_MAX 64        /* worker progress rounds that take in what a dead peer sent */
#define HC_UCX_ARM_TRIES 8         /* progress rounds before the worker's fd is armed */
#define HC_UCX_EAGER_MAX ((size_t)16 << 10) /* sends up to this complete without the receiver */
#define HC_UCX_DRAIN_BYTES 1024 /* unexpected messages taken in at fini, up to this size */
#define HC_UCX_DRAIN_MSGS 4096  /* ... and up to this many */

/* The address blob: this header, then the UCP worker address, whose length
 * it says (UCX parses an address with no length of its own). */
typedef struct hc_ucx_blob {
    uint32_t magic;
    uint16_t major, minor; /* the UCX library's version */
    uint32_t addr_len;     /* bytes of the worker address that follow */
    uint32_t pad;
} hc_ucx_blob_t;

typedef struct hc_ucx_hello {
    uint32_t magic;
    uint32_t rank;
    uint8_t  tag[16]; /* MAC under the key over magic, rank and the receiver's nonce */
} hc_ucx_hello_t;

typedef struct hc_ucx_bye {
    uint32_t magic;
    uint32_t rank;
    uint64_t sent; /* messages completely sent on the endpoint before the bye */
} hc_ucx_bye_t;

/* A control send or receive; the UCX request is released by whoever sees it done. */
typedef struct hc_ucx_ctl {
    void        *req; /* while UCX holds one */
    hc_tl_ep_t  *ep;  /* marked ready when it completes; NULL: none */
    int          done;
    ucs_status_t status;
    size_t       length;
} hc_ucx_ctl_t;

enum { HC_UCX_PEER_OK = 0, HC_UCX_PEER_DEAD, HC_UCX_PEER_CLOSED };

struct hc_tl_ep {
    hc_tl_ctx_t   *ctx;
    int            peer;
    pid_t          peer_pid; /* > 0: same host, its pid is checked */
    hcomm_status_t status;
    ucp_ep_h       uep;
    int            err_peer;  /* created with UCP_ERR_HANDLING_MODE_PEER */
    int            gone;      /* HC_UCX_PEER_*: noticed dead or closed */
    ucs_status_t   ucx_error; /* what UCX's error callback said */
    uint64_t       peer_sent; /* HC_UCX_PEER_CLOSED: what the bye said */
    int            ready;     /* on ctx->ready: something to reap */
    int            bye_sent;
    uint64_t       tx_seq, rx_seq;   /* next sequence numbers */
    uint64_t       tx_done, rx_done; /* requests handed back, in order */
    hc_tl_req_t   *sq_head, *sq_tail;
    hc_tl_req_t   *rq_head, *rq_tail;
    hc_ucx_ctl_t   hello_tx, bye_tx, bye_rx;
    hc_ucx_hello_t hello;
    hc_ucx_bye_t   bye_out, bye_in;
};

/* The higher rank of a pair, waiting for the lower one's hello. */
typedef struct hc_ucx_pend {
    double         since; /* the first connect call */
    hc_ucx_ctl_t   rx;
    hc_ucx_hello_t hello;
} hc_ucx_pend_t;

/* Bounce buffers for sink receives, kept for reuse by power-of-two size. */
#define HC_UCX_BOUNCE_MIN_SHIFT 12             /* the smallest class: 4 KiB */
#define HC_UCX_BOUNCE_CLASSES 15               /* up to 64 MiB; the last holds any bigger size */
#define HC_UCX_BOUNCE_KEEP ((size_t)128 << 20) /* bytes kept free at most */
typedef struct hc_ucx_bounce {
    void  *free[HC_UCX_BOUNCE_CLASSES];
    size_t kept;
    void  *grave; /* buffers UCX may still write to: freed after the worker */
} hc_ucx_bounce_t;

struct hc_tl_ctx {
    int             rank, nranks;
    uint8_t         cookie[16]; /* the key: never sent */
    uint8_t         nonce[16];  /* ours: hellos to us are MACs over it */
    hc_tl_timeout_t timeout;
    uint64_t        host_hash;
    ucp_context_h   uctx;
    ucp_worker_h    worker;
    int             efd;     /* the worker's event fd, -1 without one */
    int             shm_tls; /* UCX has shared-memory transports here */
    uint8_t        *blob;
    size_t          blob_len;
    hc_tl_ep_t    **eps;  /* by rank */
    hc_ucx_pend_t **pend; /* by rank */
    hc_tl_ep_t    **list; /* every endpoint */
    int             nlist;
    hc_tl_ep_t    **ready; /* endpoints with completions or news to reap */
    int             nready;
    uint64_t        next_check_ms;
    unsigned        tick;
    hc_ucx_bounce_t bounce;
};

/* The UCX functions used, called through hc_ucx_api (ucx_dl.c loads them). */
/* (clang-format would staircase the list) */
/* clang-format off */
#define HC_UCX_API(X)                                                                              \
    X(ucp_get_version) X(ucp_config_read) X(ucp_config_modify) X(ucp_config_release)               \
    X(ucp_init_version) X(ucp_cleanup) X(ucp_worker_create) X(ucp_worker_destroy)                  \
    X(ucp_worker_query) X(ucp_worker_release_address) X(ucp_worker_get_efd) X(ucp_worker_arm)      \
    X(ucp_worker_signal) X(ucp_worker_progress) X(ucp_ep_create) X(ucp_ep_close_nbx)               \
    X(ucp_ep_flush_nbx) X(ucp_tag_send_nbx) X(ucp_tag_recv_nbx) X(ucp_tag_probe_nb)                \
    X(ucp_tag_msg_recv_nbx) X(ucp_request_check_status) X(ucp_request_cancel)                      \
    X(ucp_request_free) X(ucs_status_string)
/* clang-format on */

typedef struct hc_ucx_api {
#define HC_UCX_API_PTR_(f) __typeof__(f) *f;
    HC_UCX_API(HC_UCX_API_PTR_)
#undef HC_UCX_API_PTR_
} hc_ucx_api_t;

extern hc_ucx_api_t hc_ucx_api;

/* Loads UCX once: HCOMM_ERR_UNSUPPORTED (logged at info) where it cannot. */
hcomm_status_t hc_ucx_load(void);

static inline uint64_t hc_ucx_tag(int rank, uint64_t seq)
{
    return (uint64_t)rank << HC_UCX_SEQ_BITS | (seq & HC_UCX_SEQ_MASK);
}

static inline uint64_t hc_ucx_ctl_tag(int rank, unsigned kind)
{
    return HC_UCX_CTRL | (uint64_t)rank << HC_UCX_SEQ_BITS | kind;
}

/* The status UCX completed a request with (priv[2]). */
static inline ucs_status_t hc_ucx_req_ucs(const hc_tl_req_t *req)
{
    return (ucs_status_t)(int32_t)(uint32_t)(req->priv[2] >> 32);
}

static inline void hc_ucx_mark_ready(hc_tl_ep_t *ep)
{
    if (!ep->ready) {
        ep->ready                         = 1;
        ep->ctx->ready[ep->ctx->nready++] = ep;
    }
}

/* ucx_ctl.c: control messages */
void hc_ucx_ctl_send(hc_tl_ep_t *ep, hc_ucx_ctl_t *ctl, const void *buf, size_t len, unsigned kind);
void hc_ucx_ctl_recv(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep, hc_ucx_ctl_t *ctl, void *buf, size_t len,
                     int peer, unsigned kind);
/* Releases a control operation's request, cancelling a receive still pending. */
void hc_ucx_ctl_release(hc_tl_ctx_t *ctx, hc_ucx_ctl_t *ctl);
/* Sends the bye once: messages completely sent so far, nothing more after. */
void hc_ucx_bye_send(hc_tl_ep_t *ep);
/* Takes in a bye that arrived; 1 if one did. */
int hc_ucx_bye_check(hc_tl_ep_t *ep);

/* ucx_conn.c */
/* Whether addr is a ucx blob this rank can use (the same UCX major version). */
int            hc_ucx_blob_ok(const hc_tl_ctx_t *ctx, const void *addr, size_t len);
hcomm_status_t hc_ucx_connect(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer, const void *addr,
                              size_t len, hc_tl_ep_t **ep_p);
/* Notes same-host peers whose process is gone; returns how many newly. */
int hc_ucx_check_pids(hc_tl_ctx_t *ctx);

/* ucx_req.c */
hcomm_status_t hc_ucx_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req);
hcomm_status_t hc_ucx_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req);
hcomm_status_t hc_ucx_ep_status(hc_tl_ep_t *ep);
/* Abandons every queued request (fini): UCX forgets them. */
void hc_ucx_ep_abandon(hc_tl_ep_t *ep);
/* Fails the endpoint: every queued request completes with st once UCX is
 * done with it (at once, or from progress); returns how many did now. */
int hc_ucx_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st);
/* A failed endpoint's requests that UCX finished since: handed back; how many. */
int hc_ucx_ep_reap_failed(hc_tl_ep_t *ep);
/* Sends completed in order, including those UCX finished but not yet reaped. */
uint64_t hc_ucx_ep_sent(const hc_tl_ep_t *ep);

/* ucx_progress.c */
int hc_ucx_progress(hc_tl_ctx_t *ctx);

/* ucx_buf.c */
void *hc_ucx_bounce_get(hc_tl_ctx_t *ctx, size_t len);
void  hc_ucx_bounce_put(hc_tl_ctx_t *ctx, void *buf);
void  hc_ucx_bounce_bury(hc_tl_ctx_t *ctx, void *buf);
void  hc_ucx_bounce_free_all(hc_tl_ctx_t *ctx);

/* ucx_close.c: at fini, takes in the peers' news, says bye, abandons the
 * requests, flushes and closes every endpoint, bounded in time */
void hc_ucx_close_eps(hc_tl_ctx_t *ctx);
/* Receives the small messages nobody will (a late bye, a refused peer's), so
 * that the worker's destruction finds none and does not warn. */
void hc_ucx_drain(hc_tl_ctx_t *ctx);

#endif
