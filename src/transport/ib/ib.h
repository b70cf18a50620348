/* ib.h - internals of the ib transport (RDMA on libibverbs), shared by its
 * files. The device-free parts have headers of their own: ib_hca.h (the
 * HCOMM_IB_HCA filter), ib_speed.h (port codes), ib_wire.h (what goes on the
 * wire), ib_flow.h (credits, slots, chunks), ib_rcache.h (the registration
 * cache); tests/unit/test_ib.c tests them without a device.
 *
 * NOT YET RUN ON HARDWARE. This file and every verbs-calling file of the
 * folder (ib_dev.c ib_rail.c ib_qp.c ib_ep.c ib_conn.c ib_handshake.c
 * ib_ctx.c ib_tx.c ib_rx.c ib_cq.c) were built and linked against rdma-core
 * 44 on a machine without an RDMA device (no InfiniBand support in its
 * kernel: ibv_get_device_list fails with ENOSYS), where init only ever took
 * the HCOMM_ERR_UNSUPPORTED way: no device has been opened, no QP created,
 * connected or used, no MR registered, no CQ polled, no side channel dialed.
 * The conformance suite (tests/transport, variant "ib") is their test, on a
 * host with an active port (or rxe/siw soft-RoCE: HCOMM_IB_HCA=rxe0).
 *
 * Design (as NCCL's IB transport and Gloo's ibverbs pair):
 *
 * Rails. Every active port that HCOMM_IB_HCA lets through is a rail (up to
 * HC_IB_MAX_RAILS), with its own device context, protection domain and
 * completion queue. A pair uses min(both ranks' rails) of them, rail i with
 * rail i, one reliable-connected QP per rail.
 *
 * Connecting. Each context listens on a TCP side channel; its address blob
 * (ib_wire.h) names it and the rails. The lower rank acts: connect creates
 * the endpoint's QPs (INIT, receives posted), dials the higher rank's side
 * channel and sends HELLO (its QPs, PSNs, receive slots, credit words,
 * cookie), and returns the endpoint. The higher rank's connect returns
 * HCOMM_IN_PROGRESS until that HELLO is there; then it checks the cookie,
 * creates its QPs, takes them to RTR and RTS, sends REPLY and returns its
 * endpoint, which sends nothing until the lower rank's READY byte. The lower
 * rank's progress reads REPLY, takes its QPs to RTR and RTS and sends READY.
 * Neither connect waits for the peer. The side channel stays open: its
 * hang-up is how a dead peer is noticed (RC retries alone take seconds).
 *
 * Data. Rail 0 carries every small message: an RDMA write with immediate
 * data into the peer's next receive slot (HC_IB_NSLOTS of HC_IB_SLOT_BYTES),
 * from a registered staging slot, under credits (ib_flow.h). The receiver
 * hands a slot's bytes to the receive buffer or to the sink, frees the slot,
 * and reports the freed count by an RDMA write into the sender's credit
 * words. A larger message sends an RTS in a slot instead: its address and
 * per-rail rkeys (the user's buffer registered through the cache on every
 * rail). The receiver, when its receive for it is next, RDMA-reads it in
 * HC_IB_CHUNK chunks, chunk j on rail j % nrails, straight into the receive
 * buffer (registered through the cache), or into a staging ring whose chunks
 * go to the sink in order; then reports the read done through the credit
 * words, and the sender's request completes. Messages are matched in
 * arrival order; one rendezvous read at a time per endpoint.
 *
 * Known limits: the registration cache cannot see user memory being freed
 * and mapped again at the same address (ib_rcache.h): nothing calls its
 * invalidate() for user buffers yet (it needs a memory hook, an explicit
 * deregistration call in the API, or ODP registrations), so it keeps no
 * unused registration (HC_IB_RCACHE_ENTRIES 0): each rendezvous message
 * registers and deregisters its buffers, correct but slow; no wait_fds (the
 * transport is polled; a completion channel would give one); asynchronous
 * events (port down) are not read: a dead link shows as retries exhausted;
 * device memory (GPUDirect) is not offered (caps: host memory only).
 */
#ifndef HC_TL_IB_H
#define HC_TL_IB_H

#include <infiniband/verbs.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "base/sock.h"
#include "transport/ib/ib_flow.h"
#include "transport/ib/ib_nic.h"
#include "transport/ib/ib_rcache.h"
#include "transport/ib/ib_wire.h"
#include "transport/transport.h"

#define HC_IB_NSLOTS 32             /* receive slots per endpoint */
#define HC_IB_SLOT_BYTES (16 << 10) /* eager messages up to this; larger: rendezvous */
#define HC_IB_CHUNK (512 << 10)     /* rendezvous read chunk */
#define HC_IB_READS 8               /* reads in flight per QP */
#define HC_IB_STAGE_CHUNKS 8        /* sink staging ring: 4 MiB, per endpoint, lazily */
#define HC_IB_RNDV_MAX 16           /* rendezvous sends in flight per endpoint */
#define HC_IB_SQ_DEPTH (HC_IB_NSLOTS + HC_IB_READS + 8)
#define HC_IB_CQ_PER_EP (HC_IB_NSLOTS + HC_IB_SQ_DEPTH)
#define HC_IB_RC_TIMEOUT 18 /* 4.096 us << 18: about 1 s per retry */
#define HC_IB_RC_RETRY 7
/* Unused registrations the cache keeps: none, until something tells it
 * when user memory is freed (Known limits); a registration is still shared
 * by the requests using it at once. 256 would keep the last 256. */
#define HC_IB_RCACHE_ENTRIES 0
#define HC_IB_RCACHE_BYTES ((size_t)16 << 30)
#define HC_IB_CHECK_NS 10000000ull /* side channel liveness poll period */
#define HC_IB_READY 0x5a           /* the lower rank's READY byte */
#define HC_IB_WHY 256

/* An active port that discovery found (ib_dev.c). */
typedef struct hc_ib_port {
    hc_ib_nic_t nic;
    uint8_t     gid[16];
    int         gid_index; /* -1: none (InfiniBand without GRH) */
    uint16_t    lid;
    uint8_t     mtu; /* active_mtu */
    uint32_t    max_msg;
} hc_ib_port_t;

typedef struct hc_ib_rail {
    hc_ib_port_t        port;
    struct ibv_context *vctx;
    struct ibv_pd      *pd;
    struct ibv_cq      *cq;
    int                 cq_cap, cq_used; /* entries, and what the endpoints may need */
    int                 max_cqe;
    uint8_t             rd_atom, rd_dest; /* max_rd_atomic / max_dest_rd_atomic */
    hc_ib_rcache_t      rcache;           /* user buffers, registered on this rail */
} hc_ib_rail_t;

/* An accepted side channel whose HELLO is arriving (rank < 0) or waits for
 * the connect() of its rank. */
/* Side-channel connections not yet proven: few, and brief, so that strangers
 * cost the ranks nothing (as the tcp transport's, docs/security.md). */
#define HC_IB_MAX_PENDING 64
#define HC_IB_HELLO_TIMEOUT 2.0

typedef struct hc_ib_pend {
    int     fd, rank;
    double  deadline; /* to send a proven HELLO (HC_IB_HELLO_TIMEOUT) */
    size_t  got;
    uint8_t buf[HC_IB_CONN_MAX];
    char    from[HC_SOCK_ADDRSTRLEN];
} hc_ib_pend_t;

enum {
    HC_IB_EP_DIALED,   /* lower rank: HELLO sent, REPLY awaited */
    HC_IB_EP_ANSWERED, /* higher rank: REPLY sent, READY awaited */
    HC_IB_EP_UP,
};

/* A rendezvous send whose RTS went out. */
typedef struct hc_ib_rndv {
    hc_tl_req_t  *req;
    hc_ib_mreg_t *mreg[HC_IB_MAX_RAILS];
} hc_ib_rndv_t;

/* The rendezvous message being read (req NULL: none). */
typedef struct hc_ib_read {
    hc_tl_req_t  *req;
    hc_ib_rts_t   rts;
    uint64_t      nchunks, next, done, delivered;
    int           inflight[HC_IB_MAX_RAILS];
    hc_ib_mreg_t *mreg[HC_IB_MAX_RAILS]; /* the receive buffer's (none for a sink) */
    uint8_t       staged[HC_IB_STAGE_CHUNKS];
} hc_ib_read_t;

struct hc_tl_ep {
    hc_tl_ctx_t   *ctx;
    int            peer, nrails, state, gone;
    int            reserved; /* rails whose CQ counts this endpoint (cq_used) */
    uint32_t       id;       /* index in ctx->eps, in work request ids */
    hcomm_status_t status;
    int            fd; /* the side channel */
    size_t         hs_got;
    uint8_t        hs[HC_IB_CONN_MAX];
    struct ibv_qp *qp[HC_IB_MAX_RAILS];
    uint32_t       psn[HC_IB_MAX_RAILS];
    hc_ib_conn_t   remote;
    /* one registration on rail 0: credit words in and out, receive slots,
     * staging slots */
    uint8_t       *mem, *ctrl_in, *ctrl_out, *rx_slots, *tx_slots;
    size_t         mem_len;
    struct ibv_mr *mr;
    uint32_t       rx_imm[HC_IB_NSLOTS];
    hc_ib_txflow_t tx;
    hc_ib_rxring_t rx;
    hc_tl_req_t   *txq_head, *txq_tail;  /* sends not posted yet */
    hc_tl_req_t   *fly_head, *fly_tail;  /* slot writes posted, completion to come */
    hc_ib_rndv_t   rndv[HC_IB_RNDV_MAX]; /* rendezvous send seq at seq % HC_IB_RNDV_MAX */
    uint64_t       rndv_posted, rndv_cqes, rndv_fins, rndv_retired;
    hc_tl_req_t   *rxq_head, *rxq_tail;
    hc_ib_read_t   rd;
    uint64_t       reads_done;            /* rendezvous messages read, for the credit words */
    int            ctrl_busy;             /* a credit words write in flight */
    uint64_t       ctrl_freed, ctrl_done; /* what it carries / carried */
    uint8_t       *stage;
    struct ibv_mr *stage_mr[HC_IB_MAX_RAILS];
};

struct hc_tl_ctx {
    int            rank, nranks, nrails;
    uint8_t        cookie[16];
    hc_tl_timeout_t timeout;
    hc_ib_rail_t   rail[HC_IB_MAX_RAILS];
    hc_ib_addr_t   self;
    uint8_t        blob[HC_IB_ADDR_MAX];
    size_t         bloblen;
    int            listen_fd;
    hc_tl_ep_t   **eps; /* by id, in connect order */
    uint32_t       neps, eps_cap;
    hc_tl_ep_t   **by_rank;
    double        *since; /* by rank: first connect call still waiting for the peer */
    hc_ib_pend_t  *pend;
    int            npend, pend_cap;
    unsigned long  refused; /* side-channel connections refused: the first is logged */
    struct pollfd *pfds; /* the liveness poll's, and the endpoint of each */
    uint32_t      *pfd_ep;
    size_t         pfds_cap;
    uint64_t       next_check_ns;
};

/* ib_dev.c: the active ports that HCOMM_IB_HCA lets through, in device and
 * port order; how many there are (may exceed max), or -1 when hca does not
 * parse. why (wl bytes) says why none when it returns 0 or -1. */
int hc_ib_ports_scan(const char *hca, int gid_index, hc_ib_port_t *out, int max, char *why,
                     size_t wl);

/* ib_rail.c: a rail's device context, PD, CQ (room for nranks peers, up to
 * the device's limit) and registration cache; close undoes it. */
hcomm_status_t hc_ib_rail_open(hc_ib_rail_t *r, const hc_ib_port_t *port, int nranks);
void           hc_ib_rail_close(hc_ib_rail_t *r);
/* Room in the CQ for one more endpoint (growing it when it must). */
hcomm_status_t hc_ib_rail_reserve(hc_ib_rail_t *r);

/* ib_qp.c: QPs and work requests */
hcomm_status_t hc_ib_qp_create(hc_tl_ep_t *ep, int rail);
hcomm_status_t hc_ib_qp_connect(hc_tl_ep_t *ep, int rail); /* INIT -> RTR -> RTS (ep->remote) */
void           hc_ib_qp_error(hc_tl_ep_t *ep);             /* every QP to ERR */
int            hc_ib_post_recv(hc_tl_ep_t *ep, int n);
int            hc_ib_post_slot(hc_tl_ep_t *ep, uint32_t slot, uint32_t len, uint32_t imm);
int            hc_ib_post_ctrl(hc_tl_ep_t *ep);
int            hc_ib_post_read(hc_tl_ep_t *ep, int rail, uint64_t chunk, void *dst, uint32_t lkey,
                               uint64_t off, uint64_t len);

/* ib_ep.c: endpoints */
hcomm_status_t hc_ib_ep_create(hc_tl_ctx_t *ctx, int peer, int nrails, hc_tl_ep_t **ep_p);
void           hc_ib_ep_destroy(hc_tl_ep_t *ep);
/* This side's connection data. */
void hc_ib_ep_conn(const hc_tl_ep_t *ep, uint32_t kind, hc_ib_conn_t *c);
/* Fails the endpoint once: QPs to ERR, side channel closed (so the peer
 * notices), every pending request completed with st; returns how many.
 * what == NULL: the caller logged. */
int hc_ib_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st, const char *what);
/* The peer is gone (hang-up, or its QP stopped answering): messages that
 * arrived are still delivered; the endpoint fails once nothing more can. */
int            hc_ib_ep_gone(hc_tl_ep_t *ep);
int            hc_ib_ep_gone_check(hc_tl_ep_t *ep);
hcomm_status_t hc_ib_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req);
hcomm_status_t hc_ib_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                           void *sink_arg, hc_tl_req_t *req);
hcomm_status_t hc_ib_ep_status(hc_tl_ep_t *ep);
/* Completes the head of a request list with st. */
hc_tl_req_t *hc_ib_req_pop(hc_tl_req_t **head, hc_tl_req_t **tail);
void         hc_ib_req_push(hc_tl_req_t **head, hc_tl_req_t **tail, hc_tl_req_t *req);

/* ib_conn.c: the side channel */
hcomm_status_t hc_ib_listen(hc_tl_ctx_t *ctx, const char *ip);
/* lower rank: dial, send HELLO */
hcomm_status_t hc_ib_dial(hc_tl_ep_t *ep, const hc_ib_addr_t *peer);
/* higher rank, without waiting: the HELLO of peer once it is here
 * (HCOMM_SUCCESS, *fd_p and c set), HCOMM_IN_PROGRESS before. */
hcomm_status_t hc_ib_accept_peer(hc_tl_ctx_t *ctx, int peer, int *fd_p, hc_ib_conn_t *c);
/* higher rank: connect the QPs to c's and send REPLY */
hcomm_status_t hc_ib_answer(hc_tl_ep_t *ep, const hc_ib_conn_t *c);
/* reads what is there of a connection message (ib_conn.c) */
int hc_ib_conn_read(int fd, uint8_t *buf, size_t *got, size_t *total, char *why, size_t wl);
/* ib_handshake.c: moves a connecting endpoint on (reads REPLY or READY); completions */
int hc_ib_handshake(hc_tl_ep_t *ep);
/* ib_handshake.c: notices peers whose side channel hung up */
int  hc_ib_liveness(hc_tl_ctx_t *ctx);
void hc_ib_pend_close_all(hc_tl_ctx_t *ctx);

/* ib_tx.c / ib_rx.c: the data path of one endpoint; completions */
int  hc_ib_tx_progress(hc_tl_ep_t *ep);
int  hc_ib_tx_slot_done(hc_tl_ep_t *ep); /* a slot write's completion */
int  hc_ib_tx_credits(hc_tl_ep_t *ep);   /* reads the credit words */
int  hc_ib_ctrl_report(hc_tl_ep_t *ep);  /* writes them to the peer, when changed */
void hc_ib_tx_abandon(hc_tl_ep_t *ep, hcomm_status_t st, int *n);
int  hc_ib_rx_arrive(hc_tl_ep_t *ep, uint32_t imm);
int  hc_ib_rx_progress(hc_tl_ep_t *ep);
int  hc_ib_rx_read_done(hc_tl_ep_t *ep, int rail, uint32_t chunk);
void hc_ib_rx_abandon(hc_tl_ep_t *ep, hcomm_status_t st, int *n);

/* ib_cq.c */
int hc_ib_progress(hc_tl_ctx_t *ctx);
/* Polls every rail's CQ once through (used before a hang-up counts). */
int hc_ib_poll_all(hc_tl_ctx_t *ctx);

#endif
