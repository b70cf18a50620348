/* ofi.h - internals of the ofi transport (libfabric), shared by its files.
 *
 * One reliable-datagram endpoint (FI_EP_RDM) per context; peers are entries
 * of its address vector. Messages are tagged sends: the tag carries a kind,
 * the sender's rank and a per-peer, per-direction sequence number, and every
 * receive is posted with the exact tag of the message it expects, so that
 * matching follows the order receives were posted in, whatever order the
 * provider delivers in. A message is cut into chunks (one tagged send each,
 * of the next sequence number), so that large messages stay within the
 * provider's limits and a sink receive can stage through bounded buffers;
 * every chunk carries the message's length as remote CQ data, which is how
 * a receive of another length notices. Requests complete in posting order:
 * a chunk the provider finished early waits in its request until the ones
 * before it are done.
 *
 * No receive uses an ignore mask: libfabric 1.17's shm matches a message
 * that arrived before its receive against the mask some earlier receive
 * left in the entry (smr_match_tagged). So control messages (hello, bye,
 * nack, credit) share one tag, carry their sender's rank inside, and have a
 * pool of receives of their own. The lower rank of a pair says hello (with
 * its MAC under the cookie) when it connects, before any data; the higher one's connect
 * returns once that hello came.
 *
 * Flow control: a receiver gives credit for the chunks it posted receives
 * for, plus a small window; a sender posts no chunk beyond its credit. So a
 * peer's unexpected messages stay few: libfabric's shm takes no message,
 * from any peer, once its room for unexpected ones is full.
 */
#ifndef HC_TL_OFI_H
#define HC_TL_OFI_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transport/transport.h"

#define HC_OFI_API FI_VERSION(1, 10)
#define HC_OFI_MAGIC 0x68636f66u /* "hcof" */
#define HC_OFI_VERSION 1u
#define HC_OFI_PROV_MAX 32                  /* bytes of a provider name in the address blob */
#define HC_OFI_ADDR_HDR 64                  /* the blob's header; the endpoint name follows */
#define HC_OFI_CHUNK ((size_t)1 << 20)      /* large messages travel in chunks of this */
#define HC_OFI_EAGER_MAX ((size_t)64 << 10) /* up to this, in inject-size pieces ... */
#define HC_OFI_PIECE_MIN 1024u              /* ... where the inject size is at least this */
#define HC_OFI_SINK_SLOTS 4                 /* staging buffers per endpoint, for sinks */
#define HC_OFI_NCTL_RX 16                   /* control receives kept posted */
#define HC_OFI_WINDOW 16     /* chunks a sender may have beyond the receives posted for them */
#define HC_OFI_CREDIT_STEP 4 /* a receiver tells of its new receives this many chunks at once */
#define HC_OFI_CQ_BATCH 32
#define HC_OFI_CHECK_MS 10  /* same-host peers: kill(pid, 0) this often */
#define HC_OFI_GRACE_S 0.2  /* a gone peer's data still in flight: idle time allowed */
#define HC_OFI_FLUSH_S 0.05 /* fini: progress this long at most to send the byes */
#define HC_OFI_LINGER_S 1.0 /* fini: wait this long at most for the peers to take them */
#define HC_OFI_MRC_SIZE 32  /* registration cache entries */

/* Tag: kind (2 bits) | sender rank (22) | sequence (40). */
#define HC_OFI_KIND_SHIFT 62
#define HC_OFI_KIND_DATA 0ull
#define HC_OFI_KIND_CTL 1ull
#define HC_OFI_RANK_SHIFT 40
#define HC_OFI_RANK_MAX (1 << 22)
#define HC_OFI_SEQ_MASK ((1ull << HC_OFI_RANK_SHIFT) - 1)
#define HC_OFI_TAG_CTL (HC_OFI_KIND_CTL << HC_OFI_KIND_SHIFT)

static inline uint64_t hc_ofi_tag(uint64_t kind, int rank, uint64_t seq)
{
    return kind << HC_OFI_KIND_SHIFT | (uint64_t)rank << HC_OFI_RANK_SHIFT |
           (seq & HC_OFI_SEQ_MASK);
}

/* How a sender cuts its messages; published in its address blob. */
typedef struct hc_ofi_cut {
    uint32_t piece; /* small messages: pieces of this (its inject size); 0: none */
    uint64_t chunk; /* the rest: chunks of this */
} hc_ofi_cut_t;

static inline size_t hc_ofi_chunk_len(const hc_ofi_cut_t *c, size_t len)
{
    return c->piece != 0 && len <= HC_OFI_EAGER_MAX ? c->piece : c->chunk;
}

static inline uint32_t hc_ofi_nchunks(const hc_ofi_cut_t *c, size_t len)
{
    size_t k = hc_ofi_chunk_len(c, len);
    return len == 0 ? 1u : (uint32_t)((len + k - 1) / k);
}

/* Control messages, one struct for every kind. */
enum {
    HC_OFI_CTL_HELLO = 1,
    HC_OFI_CTL_BYE,
    HC_OFI_CTL_NACK,
    HC_OFI_CTL_CREDIT,
    HC_OFI_CTL_BYE_ACK
};

typedef struct hc_ofi_ctl {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    int32_t  rank; /* the sender */
    uint32_t pad;
    uint64_t limit; /* BYE: the first of its messages to us the sender did not finish;
                     * CREDIT: the first sequence number we may not send yet */
    uint64_t taken; /* BYE: the first of our messages to it the sender did not take */
    uint8_t  tag[16]; /* MAC of the fields above under the key: the key stays home */
} hc_ofi_ctl_t;

/* ---- registration cache (ofi_mr.c) ---- */

typedef struct hc_ofi_mr {
    uintptr_t      base, end; /* the registered range, page-aligned */
    struct fid_mr *mr;
    void          *desc;
    uint64_t       used; /* LRU stamp */
    int            refs; /* operations in flight that use it */
    int            temp; /* outside the cache (full of busy entries): freed at the last put */
    int            keep; /* hcomm's own memory: kept registered while idle */
} hc_ofi_mr_t;

typedef struct hc_ofi_mrc {
    int                on; /* the provider wants local buffers registered */
    struct fid_domain *domain;
    struct fid_ep     *ep;   /* FI_MR_ENDPOINT: regions are bound to it */
    uint64_t           mode; /* the domain's mr_mode */
    uint64_t           key, clock;
    int                n;
    hc_ofi_mr_t        ent[HC_OFI_MRC_SIZE];
    uint64_t           regs, hits; /* counters, for tests */
} hc_ofi_mrc_t;

/* *mr: a registration covering [buf, buf+len), held until hc_ofi_mr_put; NULL
 * when the provider needs none. keep: the memory is hcomm's own and stays
 * mapped while the context lives, so its registration outlives its uses; a
 * user's buffer's goes with its last use (ofi_mr.c says why). */
hcomm_status_t hc_ofi_mr_get(hc_ofi_mrc_t *c, const void *buf, size_t len, int keep,
                             hc_ofi_mr_t **mr);
void           hc_ofi_mr_put(hc_ofi_mrc_t *c, hc_ofi_mr_t *mr);
void           hc_ofi_mr_fini(hc_ofi_mrc_t *c);

static inline void *hc_ofi_mr_desc(const hc_ofi_mr_t *mr)
{
    return mr != NULL ? mr->desc : NULL;
}

/* ---- operations handed to the provider ---- */

enum { HC_OFI_OP_SEND = 1, HC_OFI_OP_RECV, HC_OFI_OP_SINK, HC_OFI_OP_CTL_RX, HC_OFI_OP_CTL_TX };

typedef struct hc_ofi_op {
    struct fi_context2 fctx;        /* first: the provider's scratch, and our op_context */
    struct hc_ofi_op  *prev, *next; /* the endpoint's live list, or the free list */
    hc_tl_req_t       *req;         /* NULL once forgotten (fini) */
    hc_tl_ep_t        *ep;          /* NULL for control operations */
    hc_ofi_mr_t       *mr;
    uint32_t           chunk;
    uint8_t            kind;
    int8_t             slot; /* sink: the staging buffer */
    size_t             len;  /* the chunk's expected bytes */
    fi_addr_t          to;   /* a control send's destination */
    hc_ofi_ctl_t       ctl;  /* control operations' message */
} hc_ofi_op_t;

typedef struct hc_ofi_ctlq {
    fi_addr_t    to;
    hc_ofi_ctl_t msg;
} hc_ofi_ctlq_t;

/* ---- endpoints and the context ---- */

/* Request scratch: priv[0] the first chunk's sequence number, priv[1] chunks
 * posted, priv[2] chunks done, priv[3] a failure seen by one of its chunks. */
#define HC_OFI_SEQ(r) ((r)->priv[0])
#define HC_OFI_POSTED(r) ((r)->priv[1])
#define HC_OFI_DONE(r) ((r)->priv[2])
#define HC_OFI_ERR(r) ((r)->priv[3])

struct hc_tl_ep {
    hc_tl_ctx_t   *ctx;
    int            peer;
    fi_addr_t      addr;
    hcomm_status_t status;
    hcomm_status_t pend_fail;      /* a failure seen while posting or completing: progress fails */
    pid_t          pid;            /* same host: watched with kill(pid, 0); 0: not watched */
    hc_ofi_cut_t   cut;            /* how the peer cuts its messages */
    uint64_t       tx_seq, rx_seq; /* the next message's first sequence number */
    uint64_t       rx_grant;       /* the credit last given to the peer */
    /* in posting order; *_post: the first request with chunks not yet posted */
    hc_tl_req_t *tx_head, *tx_tail, *tx_post;
    hc_tl_req_t *rx_head, *rx_tail, *rx_post;
    hc_ofi_op_t *live;   /* operations the provider holds */
    hc_ofi_op_t *parked; /* sink chunks that arrived before their turn */
    uint8_t     *slot[HC_OFI_SINK_SLOTS];
    unsigned     slot_busy;
    int          hello_out;  /* sends wait until our hello went (lower rank) */
    int          gone;       /* the peer said bye or died; receives drain */
    int          bye_wait;   /* fini: our bye not acknowledged yet */
    uint64_t     limit;      /* gone: no message from this sequence number on comes */
    uint64_t     taken;      /* gone: our messages below this sequence number arrived */
    double       quiet;      /* gone: when data last moved */
    char         region[48]; /* shm: the peer's /dev/shm name, removed once its pid is gone */
};

struct hc_tl_ctx {
    int                rank, nranks;
    uint8_t            cookie[16];
    hc_tl_timeout_t    timeout;
    uint64_t           host_hash;
    struct fi_info    *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq     *cq;
    struct fid_av     *av;
    struct fid_ep     *ep;
    int                wait_fd; /* the CQ's wait fd; -1: the provider has none */
    char               prov[HC_OFI_PROV_MAX];
    uint8_t            name[HC_TL_ADDR_MAX];
    size_t             namelen;
    hc_ofi_cut_t       cut;
    size_t             inject;
    uint64_t           data_mask;      /* the bits of a length that remote CQ data carries */
    size_t             tx_cap, rx_cap; /* operations with completions in flight, at most */
    size_t             tx_live, rx_live;
    hc_ofi_mrc_t       mrc;
    hc_tl_ep_t       **by_rank;
    uint8_t           *hello; /* by rank: HC_OFI_HELLO_* */
    uint64_t          *bye;   /* by rank: a bye before connect, its limit + 1 */
    uint64_t          *grant; /* by rank: we may send chunks below this sequence number */
    double            *since; /* by rank: first connect call still waiting for the peer */
    hc_tl_ep_t       **eps;
    int                neps;
    hc_ofi_op_t       *free_ops;
    void             **blocks; /* op allocations */
    int                nblocks;
    hc_ofi_op_t       *ctl_idle; /* control receives the provider had no room for */
    hc_ofi_ctlq_t     *ctlq;     /* control messages the provider had no room for */
    int                nctlq, ctlq_cap;
    uint64_t           next_check_ms;
};

enum { HC_OFI_HELLO_NONE = 0, HC_OFI_HELLO_OK, HC_OFI_HELLO_BAD, HC_OFI_HELLO_NACKED };

/* ofi_open.c: picks the provider and opens fabric, domain, CQ, AV, endpoint */
/* Opens the first provider named by want (HCOMM_OFI_PROVIDER; "" any) that
 * offers what the transport needs; hw_only leaves out the providers over
 * tcp, udp or shared memory (hc_tl_params_t.fabric_only). */
/* The libfabric functions that are not inline calls through a fid's ops,
 * called through hc_ofi_lib (ofi_dl.c loads them at the first init). */
#define HC_OFI_LIB(X) X(fi_getinfo) X(fi_freeinfo) X(fi_dupinfo) X(fi_fabric) X(fi_strerror) X(fi_version)

typedef struct hc_ofi_lib {
#define HC_OFI_LIB_PTR_(f) __typeof__(f) *f;
    HC_OFI_LIB(HC_OFI_LIB_PTR_)
#undef HC_OFI_LIB_PTR_
} hc_ofi_lib_t;

extern hc_ofi_lib_t hc_ofi_lib;

/* Loads libfabric once: HCOMM_ERR_UNSUPPORTED (logged at info) where it cannot. */
hcomm_status_t hc_ofi_load(void);

hcomm_status_t hc_ofi_open(hc_tl_ctx_t *ctx, const char *want, const char *bind_ip, int hw_only);
void           hc_ofi_close_ep(hc_tl_ctx_t *ctx);
void           hc_ofi_close(hc_tl_ctx_t *ctx);
/* shm: the region a peer's endpoint name (of pid) stands for, in out ("" if none). */
void hc_ofi_region_name(const hc_tl_ctx_t *ctx, const uint8_t *name, size_t len, pid_t pid,
                        char *out, size_t outlen);
/* Removes a dead peer's region (a name from hc_ofi_region_name). */
void hc_ofi_region_reap(const char *region, int peer);

/* ofi_conn.c */
hcomm_status_t hc_ofi_connect(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer, const void *addr,
                              size_t len, hc_tl_ep_t **ep_p);
hcomm_status_t hc_ofi_ctl_post_rx(hc_tl_ctx_t *ctx, hc_ofi_op_t *op);
void           hc_ofi_ctl_recv(hc_tl_ctx_t *ctx, hc_ofi_op_t *op, size_t len);
hcomm_status_t hc_ofi_ctl_send(hc_tl_ctx_t *ctx, fi_addr_t to, int kind, uint64_t limit,
                               uint64_t taken);
void           hc_ofi_ctl_flush(hc_tl_ctx_t *ctx);
/* A control message to `to` failed with err (positive): fails its endpoint. */
void           hc_ofi_ctl_failed(hc_tl_ctx_t *ctx, fi_addr_t to, int kind, int err);
void           hc_ofi_say_bye(hc_tl_ctx_t *ctx);
/* Parses an address blob: the endpoint name and the peer's cut; 0 or -1. */
int hc_ofi_addr_parse(const hc_tl_ctx_t *ctx, const void *addr, size_t len, const uint8_t **name,
                      hc_ofi_cut_t *cut);

/* ofi_ep.c */
hcomm_status_t hc_ofi_ep_create(hc_tl_ctx_t *ctx, int peer, fi_addr_t addr, const hc_ofi_cut_t *cut,
                                pid_t pid, hc_tl_ep_t **ep_p);
void           hc_ofi_ep_destroy(hc_tl_ep_t *ep);
hcomm_status_t hc_ofi_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req);
hcomm_status_t hc_ofi_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req);
hcomm_status_t hc_ofi_ep_status(hc_tl_ep_t *ep);
int            hc_ofi_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st);
void           hc_ofi_ep_drop(hc_tl_ep_t *ep);
void           hc_ofi_ep_gone(hc_tl_ep_t *ep, uint64_t limit, uint64_t taken);
int            hc_ofi_ep_gone_step(hc_tl_ep_t *ep, double now);
void           hc_ofi_ep_post(hc_tl_ep_t *ep);
int            hc_ofi_ep_release(hc_tl_ep_t *ep);
uint64_t       hc_ofi_ep_tx_done_seq(const hc_tl_ep_t *ep);
uint64_t       hc_ofi_ep_rx_done_seq(const hc_tl_ep_t *ep);
void           hc_ofi_sink_done(hc_tl_ep_t *ep, hc_ofi_op_t *op);

/* ofi_ctx.c: the operation pool */
hc_ofi_op_t *hc_ofi_op_get(hc_tl_ctx_t *ctx);
void         hc_ofi_op_put(hc_tl_ctx_t *ctx, hc_ofi_op_t *op);
void         hc_ofi_op_unlink(hc_ofi_op_t *op);

/* ofi_cq.c */
int hc_ofi_progress(hc_tl_ctx_t *ctx);
int hc_ofi_wait_fds(hc_tl_ctx_t *ctx, struct pollfd *pfds, int max);

#endif
