/* tcp.h - internals of the tcp transport, shared by its files.
 *
 * Wire: each connection starts with a hello (magic, rank, socket index, socket
 * count, stripe threshold, and a MAC of those under the job key over the
 * receiver's nonce: proof of the secret, which stays home) from the lower rank
 * to the higher one. Then
 * each message is an 8-byte little-endian length and the payload. Socket 0 of an
 * endpoint carries every header and every payload that is not striped. A striped
 * payload (len >= stripe_min, nsocks > 1) is cut into chunks of hc_tcp_chunk()
 * bytes; chunk j travels on socket j % nsocks, so socket 0 carries the header and
 * then chunks 0, n, 2n, ... Both sides compute the cut from the length, and one
 * message per direction is in flight at a time, so every socket stays in step.
 */
#ifndef HC_TL_TCP_H
#define HC_TL_TCP_H

#include <endian.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "base/auth.h"
#include "base/clock.h"
#include "base/sock.h"
#include "transport/transport.h"

#define HC_TCP_MAGIC       0x68637470u /* "hctp" */
#define HC_TCP_VERSION 2u
#define HC_TCP_HELLO_FIELDS 32 /* the hello's fields; its MAC follows */
#define HC_TCP_HELLO_BYTES (HC_TCP_HELLO_FIELDS + HC_AUTH_MAC_BYTES)
#define HC_TCP_MAX_PENDING 64    /* accepted connections not yet proven */
#define HC_TCP_HELLO_TIMEOUT 2.0 /* seconds a connection has to prove itself */
#define HC_TCP_HDR_BYTES   8
#define HC_TCP_MAX_SOCKS   64
#define HC_TCP_SOCKBUF     (4 << 20)    /* SO_SNDBUF/SO_RCVBUF asked for */
#define HC_TCP_BOUNCE      (64 << 10)   /* per-ep read-ahead of socket 0 */
#define HC_TCP_STAGE       (256 << 10)  /* per-ep staging for sink receives */
#define HC_TCP_DIRECT_MIN  (16 << 10)   /* reads at least this big skip the bounce */
#define HC_TCP_IOV         64           /* messages gathered in one sendmsg */
#define HC_TCP_CHECK_NS    10000000ull  /* idle liveness poll period */

typedef struct hc_tcp_dial hc_tcp_dial_t; /* tcp_dial.c */

/* An accepted connection: its hello is still arriving (rank < 0), or it waits
 * for the connect() of its rank to claim it. */
typedef struct hc_tcp_conn {
    int     fd;
    int     rank, idx;
    double  deadline; /* to prove itself */
    size_t  got;
    uint8_t hello[HC_TCP_HELLO_BYTES];
    char    from[HC_SOCK_ADDRSTRLEN];
} hc_tcp_conn_t;

typedef struct hc_tcp_sock {
    int    fd;
    size_t tx_done; /* bytes of the current striped message sent on this socket */
    size_t rx_done; /* ... and received */
} hc_tcp_sock_t;

struct hc_tl_ep {
    hc_tl_ctx_t   *ctx;
    int            peer;
    int            nsocks;
    hcomm_status_t status;
    hc_tl_req_t   *tx_head, *tx_tail;
    hc_tl_req_t   *rx_head, *rx_tail;
    uint8_t       *bounce; /* bytes read ahead from socket 0: [b_rpos, b_wpos) */
    size_t         b_rpos, b_wpos;
    uint8_t       *stage;  /* sink staging, allocated at the first sink receive */
    hc_tcp_sock_t  sock[];
};

struct hc_tl_ctx {
    int              rank, nranks, nsocks;
    uint8_t                 cookie[16]; /* the key */
    uint8_t                 nonce[16];  /* ours: hellos to us are MACs over it */
    hc_tl_timeout_t         timeout;
    size_t           stripe_min;
    int              sockbuf; /* 0: leave the kernel's autotuning alone */
    int              listen_fd;
    struct sockaddr_storage addr;
    socklen_t        addrlen;
    hc_tl_ep_t     **eps; /* connected endpoints, in connect order */
    int              neps, eps_cap;
    hc_tl_ep_t     **by_rank; /* nranks entries */
    int            **claimed; /* by rank: sockets of a lower rank that arrived, -1 not yet */
    double          *since;   /* by rank: first connect call still waiting for the peer */
    hc_tcp_dial_t         **dials; /* by rank: a higher rank's sockets still connecting, or NULL */
    int                     ndials;
    hc_tcp_conn_t   *conns;   /* accepted, not yet claimed */
    int              nconns, conns_cap;
    unsigned long           refused; /* connections refused: the first is logged */
    int                     told_nofd; /* out of descriptors at accept: said once */
    struct pollfd   *pfds;
    size_t           pfds_cap;
    uint64_t         next_check_ns;
};

/* tcp_ep.c: the ops on endpoints */
hcomm_status_t hc_tcp_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req);
hcomm_status_t hc_tcp_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req);
int            hc_tcp_progress(hc_tl_ctx_t *ctx);
int            hc_tcp_wait_fds(hc_tl_ctx_t *ctx, struct pollfd *pfds, int max);
hcomm_status_t hc_tcp_ep_status(hc_tl_ep_t *ep);

/* tcp_ctx.c: room for n entries in the context's poll array */
hcomm_status_t hc_tcp_pfds_reserve(hc_tl_ctx_t *ctx, size_t n);
/* tcp_dial.c: the active side, for a peer above this rank, without waiting:
 * the first call starts connecting its nsocks sockets, each call moves them
 * on (connect, then hello); fds gets them once all said hello (HCOMM_SUCCESS),
 * HCOMM_IN_PROGRESS before, else the failure (logged, the sockets closed; a
 * refusal is HCOMM_ERR_REMOTE). drop closes a pending dial; dial_fds lists
 * its sockets still connecting or saying hello, for wait_fds (-1: over max). */
hcomm_status_t hc_tcp_hello_encode(const hc_tl_ctx_t *ctx, int idx, const uint8_t *peer_nonce,
                                   uint8_t *out);
hcomm_status_t hc_tcp_dial_step(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer,
                                const struct sockaddr *sa, socklen_t salen, int *fds);
void           hc_tcp_dial_drop(hc_tl_ctx_t *ctx, int peer);
int            hc_tcp_dial_fds(const hc_tl_ctx_t *ctx, struct pollfd *pfds, int max);
/* tcp_accept.c: the passive side, for a peer below this rank, without
 * waiting: fds gets its nsocks sockets once all arrived (HCOMM_SUCCESS),
 * HCOMM_IN_PROGRESS before (the ones that did are kept, claimed); unclaim
 * closes what a peer had claimed. */
hcomm_status_t hc_tcp_accept_peer(hc_tl_ctx_t *ctx, int peer, int *fds);
/* Checks c's complete hello (tests/fuzz/fuzz_tcp_hello.c feeds it). Returns 1
 * if it names a lower rank's socket (c->rank, c->idx set), 0 if the connection
 * is to be refused (*why says why, or NULL: logged), or an error status for a
 * configuration that differs between the two ranks. */
int            hc_tcp_hello_check(hc_tl_ctx_t *ctx, hc_tcp_conn_t *c, const char **why);
void           hc_tcp_unclaim(hc_tl_ctx_t *ctx, int peer);
/* tcp_ep.c */
hcomm_status_t hc_tcp_ep_create(hc_tl_ctx_t *ctx, int peer, const int *fds, hc_tl_ep_t **ep_p);
void           hc_tcp_ep_destroy(hc_tl_ep_t *ep);
int            hc_tcp_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st, int err, const char *what);
/* tcp_tx.c / tcp_rx.c: move what the sockets take; return requests completed */
int            hc_tcp_tx_progress(hc_tl_ep_t *ep);
int            hc_tcp_rx_progress(hc_tl_ep_t *ep);
int            hc_tcp_rx_fill_bounce(hc_tl_ep_t *ep);

/* Striped: chunk size for a message of len bytes over n sockets. */
static inline size_t hc_tcp_chunk(size_t len, int n)
{
    size_t c = (len + (size_t)n - 1) / (size_t)n;
    c        = (c + 4095) & ~(size_t)4095;
    if (c < (64u << 10))
        c = 64u << 10;
    if (c > (1u << 20))
        c = 1u << 20;
    return c;
}

static inline void hc_tcp_put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof(v));
}

static inline uint64_t hc_tcp_get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return le64toh(v);
}

static inline int hc_tcp_striped(const hc_tl_ep_t *ep, size_t len)
{
    return ep->nsocks > 1 && len > 0 && len >= ep->ctx->stripe_min;
}

/* Where byte b of socket s's share of a striped message lies: its message
 * offset, and how many bytes follow it in the same chunk (0: share done). */
static inline size_t hc_tcp_share_pos(size_t len, int n, int s, size_t b, size_t *avail)
{
    size_t c = hc_tcp_chunk(len, n);
    size_t j = (size_t)s + (b / c) * (size_t)n;
    size_t o = j * c + b % c;
    size_t end = (j + 1) * c < len ? (j + 1) * c : len;
    *avail     = o < end ? end - o : 0;
    return o;
}

/* Points iov at up to max pieces of socket s's share, from share byte b on. */
static inline int hc_tcp_share_iov(size_t len, int n, int s, size_t b, const void *base,
                                   struct iovec *iov, int max)
{
    int k = 0;
    while (k < max) {
        size_t avail;
        size_t o = hc_tcp_share_pos(len, n, s, b, &avail);
        if (avail == 0)
            break;
        iov[k].iov_base = (uint8_t *)(uintptr_t)base + o;
        iov[k].iov_len  = avail;
        b += avail;
        k++;
    }
    return k;
}

#endif
