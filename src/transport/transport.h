/* transport.h - the interface every transport implements (one folder each).
 *
 * A transport moves messages between two ranks over an endpoint. Messages on one
 * endpoint and direction arrive in the order they were sent, and the receiver
 * posts its receives in that same order: there are no tags. Every message carries
 * a small header with its length; a receive whose length differs from the
 * message's fails with HCOMM_ERR_PROTOCOL. Transports know nothing of collectives.
 *
 * Completion is by polling: a request's status is HCOMM_IN_PROGRESS until
 * progress() completes it with HCOMM_SUCCESS or an error. progress() never
 * blocks. A peer that dies or closes makes every pending and later request on its
 * endpoint fail with HCOMM_ERR_REMOTE, and ep_status() report it.
 */
#ifndef HC_TRANSPORT_H
#define HC_TRANSPORT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "base/params.h"
#include "hcomm.h"

typedef struct hc_tl_ctx hc_tl_ctx_t; /* one per communicator and transport */
typedef struct hc_tl_ep  hc_tl_ep_t;  /* one per peer */

#define HC_HOSTNAME_MAX 64
#define HC_TL_ADDR_MAX  1024 /* bytes of an address blob (UCP worker addresses are large) */

/* What every rank publishes about itself at init (gathered by the bootstrap). */
typedef struct hc_peer_info {
    char     hostname[HC_HOSTNAME_MAX];
    uint64_t host_hash; /* hostname + boot id: equal means same kernel, same /dev/shm */
    int32_t  pid;
    int32_t  rank;
    uint8_t  nonce[16]; /* fresh per communicator: hellos to this rank are MACs over it */
} hc_peer_info_t;

typedef struct hc_tl_params {
    int                   rank, nranks;
    uint8_t               cookie[16];  /* the communicator's secret; unique per communicator */
    const char           *bind_ip;     /* numeric address to listen on (the bootstrap's) */
    double                timeout;     /* seconds, for connection set-up waits */
    /* NULL, or the communicator's timeout, which hcomm_comm_set_timeout may
     * change after init (a torch process group's): waits read it each check */
    const double         *live_timeout;
    const hc_peer_info_t *self;
    const hc_params_t    *params;
    /* The user named no transport (HCOMM_TRANSPORT auto, HCOMM_NET at its
     * default, no provider or UCX_TLS chosen): a library-backed transport
     * opens only on hardware that shm and tcp do not drive (RDMA, EFA, ...);
     * over tcp or shared memory it would only be a slower tcp or shm. */
    int fabric_only;
} hc_tl_params_t;

/* A context's bound on connection set-up: fixed at init, or the
 * communicator's own when it lent one (hc_tl_params_t.live_timeout). */
typedef struct hc_tl_timeout {
    double        fixed;
    const double *live;
} hc_tl_timeout_t;

static inline hc_tl_timeout_t hc_tl_timeout_init(const hc_tl_params_t *p, const hc_params_t *prm)
{
    return (hc_tl_timeout_t){.fixed = p->timeout > 0 ? p->timeout : prm->timeout,
                             .live  = p->live_timeout};
}

/* Seconds now: the communicator's setter writes under its lock, and
 * transports run under it too. */
static inline double hc_tl_timeout(const hc_tl_timeout_t *t)
{
    return t->live != NULL && *t->live > 0 ? *t->live : t->fixed;
}

/* Called with each contiguous piece of an incoming message, in order, as the
 * transport gets it (off = the piece's byte offset in the message). Lets the
 * caller reduce straight out of the transport's buffers. */
typedef void (*hc_tl_sink_fn_t)(void *arg, size_t off, const void *data, size_t len);

typedef struct hc_tl_req {
    int                status;   /* HCOMM_IN_PROGRESS while pending */
    /* set by isend/irecv; owned by the transport until completion */
    struct hc_tl_req  *next;
    hc_tl_ep_t        *ep;
    const void        *sbuf;     /* isend: source */
    void              *rbuf;     /* irecv: destination, when sink is NULL */
    hc_tl_sink_fn_t    sink;
    void              *sink_arg;
    size_t             len;      /* bytes of the message */
    size_t             done;     /* bytes moved so far */
    /* Set at completion of a receive the transport timed (tcp): timed_bytes
     * of it arrived over timed_ns while the receiver was waiting for them,
     * for the link-throughput test (core/health.h); bytes that were already
     * there when it looked say nothing of the link. 0: not timed. */
    uint64_t           timed_ns;
    size_t             timed_bytes;
    uint64_t           priv[4];  /* transport scratch */
} hc_tl_req_t;

#define HC_TL_TIMED_MIN 65536 /* bytes timed, at least, for a measure */

/* The checks every isend (sink NULL) and irecv make before their own: an
 * endpoint and a request, and a buffer (or, receiving, a sink) for len > 0. */
static inline hcomm_status_t hc_tl_msg_args(const hc_tl_ep_t *ep, const void *buf, size_t len,
                                            hc_tl_sink_fn_t sink, const hc_tl_req_t *req)
{
    if (ep == NULL || req == NULL)
        return HCOMM_ERR_INVALID_ARG;
    if (buf == NULL && sink == NULL && len > 0)
        return HCOMM_ERR_NULL_BUFFER;
    return HCOMM_SUCCESS;
}

/* Resets a request for a new message of len bytes on ep (isend/irecv use it). */
static inline void hc_tl_req_init(hc_tl_req_t *req, hc_tl_ep_t *ep, size_t len)
{
    req->status   = HCOMM_IN_PROGRESS;
    req->next     = NULL;
    req->ep       = ep;
    req->sbuf     = NULL;
    req->rbuf     = NULL;
    req->sink     = NULL;
    req->sink_arg = NULL;
    req->len      = len;
    req->done     = 0;
    req->timed_ns    = 0;
    req->timed_bytes = 0;
    req->priv[0]  = 0;
}

enum {
    HC_TL_CAP_HOST_MEM = 1u << 0, /* moves host memory */
};

typedef struct hc_tl_ops {
    const char *name; /* "shm", "tcp", "ofi", "ucx", "ib" */
    unsigned    caps;

    /* Creates the per-communicator context (listening socket, fabric
     * endpoint, ...). HCOMM_ERR_UNSUPPORTED, logged at info level, when the
     * transport has nothing to offer on this host (no device, no provider):
     * the communicator goes on without it. */
    hcomm_status_t (*init)(hc_tl_ctx_t **ctx_p, const hc_tl_params_t *p);
    /* Closes every endpoint and frees the context; pending requests are abandoned. */
    void (*fini)(hc_tl_ctx_t *ctx);
    /* Writes this rank's address blob (at most HC_TL_ADDR_MAX bytes) to buf. */
    hcomm_status_t (*address)(hc_tl_ctx_t *ctx, void *buf, size_t *len);
    /* Nonzero if self can reach peer with this transport, given both ranks'
     * info as the communicator settled it (virtual nodes change host_hash)
     * and the address blob peer published (same host for shm, the same
     * provider for ofi, ...). Both ranks of a pair get the same answer. */
    int (*reachable)(hc_tl_ctx_t *ctx, const hc_peer_info_t *self, const hc_peer_info_t *peer,
                     const void *addr, size_t len);
    /*
     * Connects to one peer, given its address blob and info, without ever
     * waiting for the peer. Connections are made lazily, when a schedule first
     * uses a pair, so either side may call first, or one long before the
     * other. For a peer above self it acts (creates, dials) and returns the
     * endpoint, or HCOMM_IN_PROGRESS while what it started goes on without
     * it (tcp: connects the kernel has not finished); for a peer below self
     * it returns the endpoint once the peer has acted, else HCOMM_IN_PROGRESS
     * (*ep_p untouched): the caller
     * progresses and calls again, and gets HCOMM_ERR_TIMEOUT (logged) once the
     * context's timeout has passed since its first call for that peer. A
     * transport whose connections need no action from the peer (an address
     * vector, UCP) returns the endpoint at once for every peer. A connection's
     * hello carries a MAC under the key (cookie) over the receiver's nonce
     * (hc_peer_info_t), never the key: one without it is refused and logged.
     */
    hcomm_status_t (*connect)(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer, const void *addr,
                              size_t len, hc_tl_ep_t **ep_p);
    /* Queue a message / a receive. Buffers stay the caller's to keep valid until
     * the request completes. Return an error (and leave req untouched) only when the
     * request cannot be queued, e.g. the endpoint already failed. */
    hcomm_status_t (*isend)(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req);
    hcomm_status_t (*irecv)(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req);
    /* Moves data and completes requests on every endpoint; never blocks. Also
     * notices peers that died (closed socket, vanished pid; ofi across hosts
     * only through operations the provider holds: docs/transports.md).
     * Returns the number of requests completed. */
    int (*progress)(hc_tl_ctx_t *ctx);
    /* HCOMM_SUCCESS, or why the endpoint failed; HCOMM_IN_PROGRESS while
     * the peer has not yet joined a connection this side made (shm: its
     * creator, before the peer maps the segment), so that the core can ask
     * whether the peer is still there. */
    hcomm_status_t (*ep_status)(hc_tl_ep_t *ep);
    /* Optional (NULL: the transport can only be polled): fills at most max
     * pollfds with what progress() waits for (POLLIN on sockets with receives
     * pending, POLLOUT with sends pending) so an idle rank can sleep in poll()
     * instead of spinning; returns how many, or -1 when more than max. */
    int (*wait_fds)(hc_tl_ctx_t *ctx, struct pollfd *pfds, int max);
} hc_tl_ops_t;

extern const hc_tl_ops_t hc_tl_shm_ops;
extern const hc_tl_ops_t hc_tl_tcp_ops;
#ifdef HC_HAVE_VERBS
extern const hc_tl_ops_t hc_tl_ib_ops;
#endif
#ifdef HC_HAVE_OFI
extern const hc_tl_ops_t hc_tl_ofi_ops;
#endif
#ifdef HC_HAVE_UCX
extern const hc_tl_ops_t hc_tl_ucx_ops;
#endif

/* Every transport this build has (transports.c), in a fixed order that every
 * rank shares; a new transport is one line there. */
#define HC_TL_TABLE_MAX 8
extern const hc_tl_ops_t *const hc_tl_table[];
int hc_tl_table_len(void);
/* The index of the transport named name[0..len) in hc_tl_table, or -1. */
int hc_tl_index(const char *name, size_t len);
/* HCOMM_TRANSPORT's value as an index: -1 for auto, -2 (logged) for a name
 * this build lacks. */
int hc_tl_forced(const char *name);
/* Whether this host has RDMA-class network hardware (an entry under
 * /sys/class/infiniband: InfiniBand, RoCE, EFA, Omni-Path; or /sys/class/cxi:
 * Slingshot). ofi and ucx look before they load their library where
 * fabric_only: loading libfabric's providers costs ~0.1 s a rank. */
int hc_tl_host_has_fabric(void);
/* hc_tl_params_t.fabric_only for these parameters: no HCOMM_TRANSPORT and
 * HCOMM_NET at its default. */
int hc_tl_fabric_only(const hc_params_t *prm);
/* The transport for a pair, from the transports usable for it (bit t: both
 * ranks opened hc_tl_table[t] and it reaches): the forced one if any; else
 * shm inside a host; else the first of net (a comma list, HCOMM_NET) that is
 * usable. -1: none. Both ranks of a pair compute the same. */
int hc_tl_choose(int forced, const char *net, uint32_t usable, int same_host);

#endif
