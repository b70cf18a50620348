/* shm.h - internal structures of the shared-memory transport.
 *
 * Each pair of local ranks (lo < hi) shares one POSIX shared-memory segment:
 * a header page, then the lo->hi ring, then the hi->lo ring. lo creates it, hi
 * maps it and unlinks its name at once, so nothing stays in /dev/shm once both
 * hold it. Messages are a 64-byte header and the payload padded to 64 bytes; a
 * large message may instead carry a descriptor that the receiver resolves with
 * process_vm_readv (one copy) and acknowledges through the ring's ack counter.
 *
 * Before a message of at most HC_SHM_HOT_BYTES, a sender past the ring's first
 * HC_SHM_HOT_BYTES whose receiver has read far enough writes a rewind header
 * and goes on at the ring's start, where the receiver follows it: a stream of
 * small messages keeps to a few warm pages and lines instead of walking the
 * whole ring. (A page's first touch in a process costs a fault,
 * and under a paravirtual hypervisor such as PVM 2-6 us more even after
 * MAP_POPULATE: walking a 1 MiB ring made the first ~500 2 KiB allreduces
 * 10x slower; perf/RESULTS.md.) Those pages are touched at connect; the first
 * message past them touches the rest of the ring at once (hc_shm_ring_warm),
 * so the ring's first lap costs one slow call, not hundreds of slow ones.
 */
#ifndef HC_SHM_H
#define HC_SHM_H

#include <stdint.h>
#include <sys/types.h>

#include "transport/shm/shm_ring.h"
#include "transport/transport.h"

#define HC_SHM_SEG_READY 0x68636f6d6d534d31ull /* "hcommSM1" */
#define HC_SHM_HDR_BYTES 4096u                 /* header page before the rings */
#define HC_SHM_MSG_MAGIC 0x6d736721u
#define HC_SHM_MSG_CMA 1u    /* header is a descriptor: read the payload from addr */
#define HC_SHM_MSG_INLINE 2u /* the payload sits in the header's line (small messages) */
#define HC_SHM_MSG_REWIND 4u /* no message: the next one is at the ring's start */
#define HC_SHM_MSG_WHOLE 8u  /* the payload follows, all written before the header */
#define HC_SHM_INLINE_MAX 40u
#define HC_SHM_NAME_MAX 64
#define HC_SHM_NAME_NONCE 6                /* bytes of the lower rank's nonce in a segment's name */
#define HC_SHM_CMA_PIECE ((size_t)1 << 20) /* bytes per process_vm_readv */
#define HC_SHM_CMA_SINK_PIECE ((size_t)128 << 10) /* sink reads: stay in L2 for the reduce */
#define HC_SHM_CMA_BUDGET (4 * HC_SHM_CMA_PIECE)  /* per endpoint and progress call */
#define HC_SHM_CHUNK_MAX ((uint64_t)128 << 10)    /* publish head/tail this often */
#define HC_SHM_CHECK_MS 50                        /* peer liveness check period */
#define HC_SHM_HOT_BYTES ((uint64_t)16 << 10)     /* small messages keep to the ring's start */
#define HC_SHM_WHOLE_MAX HC_SHM_HOT_BYTES         /* padded payloads sent whole */
#define HC_SHM_UNSTACK_MS 100                     /* at most one move off a shared CPU per this */
#define HC_SHM_STACKED_NS 500000u                 /* seen stacked this long before a move */
#define HC_SHM_UNSTACK_RECHECK_MS 10              /* after the kernel said a peer is elsewhere */

/* The segment header; side 0 is the lower rank. */
typedef struct hc_shm_seg {
    _Atomic uint64_t  magic;   /* HC_SHM_SEG_READY, written last by the creator */
    uint8_t           tag[32]; /* MAC of the name and creator under the job key */
    uint64_t          ring_bytes;
    int32_t           pid[2];
    uint64_t          probe_addr[2]; /* a known 8-byte value in each side's memory */
    uint64_t          probe_val[2];
    _Atomic uint32_t  attached;  /* hi mapped the segment and unlinked its name */
    _Atomic uint32_t  closed[2]; /* that side finished with the segment */
    _Atomic int32_t   cpu[2];    /* the CPU that side last polled on, + 1 (shm_cpu.c) */
    _Atomic int32_t   tid[2];    /* the thread that polled there */
    hc_shm_ring_ctl_t ctl[2];    /* [0]: lo->hi, [1]: hi->lo */
} hc_shm_seg_t;

_Static_assert(sizeof(hc_shm_seg_t) <= HC_SHM_HDR_BYTES, "segment header too large");

/* One message header in the ring: a whole cache line, so payloads stay aligned. */
typedef struct hc_shm_msg {
    uint64_t stamp; /* its ring position ^ the ring's key, stored last (shm_ring.h) */
    uint64_t len;
    uint32_t magic;
    uint32_t flags;
    union {
        uint64_t addr;                   /* HC_SHM_MSG_CMA: the sender's buffer */
        uint8_t  inl[HC_SHM_INLINE_MAX]; /* HC_SHM_MSG_INLINE: the payload */
    };
} hc_shm_msg_t;

_Static_assert(sizeof(hc_shm_msg_t) == HC_SHM_LINE, "message header is one line");

enum { HC_SHM_PEER_OK = 0, HC_SHM_PEER_DEAD, HC_SHM_PEER_CLOSED };

struct hc_tl_ep {
    hc_tl_ctx_t   *ctx;
    int            peer;
    int            side; /* 0: this rank is the lower of the pair */
    pid_t          peer_pid;
    int            peer_pidfd; /* tells a dead peer from a live one, zombies too; -1: none */
    hcomm_status_t status;
    int            peer_gone;     /* HC_SHM_PEER_*: noticed dead or closed */
    int            created;       /* this rank created the segment */
    int            peer_mapped;   /* the peer mapped it: sends may complete */
    int            probe_pending; /* lo: hi's probe address not tested yet */
    char           name[HC_SHM_NAME_MAX];
    hc_shm_seg_t  *seg;
    size_t         map_bytes;
    hc_shm_ring_t  tx, rx;
    uint64_t       chunk; /* bytes copied between head/tail updates */

    /* sends: [sq_head, sq_cur) are written and await completion in order;
     * sq_cur is being written. priv[0] of a descriptor send is its ack number. */
    hc_tl_req_t *sq_head, *sq_cur, *sq_tail;
    int          tx_hdr_done;
    uint64_t     tx_off;   /* padded payload bytes of sq_cur written */
    uint64_t     cma_sent; /* descriptors sent */
    uint64_t     acks;     /* cached ctl->acks of the tx ring */

    hc_tl_req_t *rq_head, *rq_tail;
    int          rx_hdr_done;
    hc_shm_msg_t rx_msg;
    uint64_t     rx_off;
    uint64_t     rx_acks; /* descriptors fully read */

    uint64_t n_cma_tx, n_cma_rx; /* counters for tests and debugging */
    uint64_t n_rewind;
};

/* A rank of this host (shm_reachable); a lower one makes the pair's segment. */
typedef struct hc_shm_lower {
    int     local;
    int32_t pid;
    uint8_t nonce[HC_SHM_NAME_NONCE];
} hc_shm_lower_t;

struct hc_tl_ctx {
    int             rank, nranks;
    uint8_t         cookie[16];               /* the key: never written where others can read */
    char            public_name[17];          /* names the segments; tells nothing of the key */
    uint8_t         nonce[HC_SHM_NAME_NONCE]; /* this rank's, as its peers got it */
    hc_tl_timeout_t timeout;
    uint64_t        ring_bytes;
    uint64_t        chunk; /* most bytes copied between head/tail updates */
    size_t          cma_min;
    pid_t           pid;
    hc_tl_ep_t    **eps;   /* by peer rank */
    double         *since; /* by peer rank: first connect call still waiting for the peer */
    hc_shm_lower_t *lower; /* by peer rank: the ranks of this host */
    hc_tl_ep_t    **list;  /* connected endpoints */
    int             nlist;
    uint64_t        next_check_ms;
    unsigned        tick;   /* progress calls, to space out clock reads */
    uint64_t        probe;  /* peers read it to test process_vm_readv */
    uint8_t        *bounce; /* HC_SHM_CMA_PIECE bytes for single-copy sink receives */
    int             cma_logged;
    int             unstack;         /* HCOMM_SHM_UNSTACK (shm_cpu.c) */
    uint64_t        next_unstack_ms; /* no move before this coarse time */
    uint64_t        stacked_ns;      /* when first seen stacked (ns); 0: not stacked */
    uint64_t        n_unstack;       /* moves made, for tests */
    int             nlocal;          /* ranks of this host, once counted (0: not yet) */
};

/* shm_ctx.c: the name of the segment of ranks lo < hi, whose lo published
 * lo_nonce (hc_peer_info_t.nonce): "/hcomm-<public name>-<nonce>-<lo>-<hi>".
 * The public name keeps a job's segments under one prefix (hcomm-run sweeps
 * it); the nonce, fresh per communicator, keeps apart the segments of two
 * communicators with one key (hcomm_comm_init_env twice, or two jobs given
 * one HCOMM_COOKIE), which would otherwise take each other's as stale. */
void hc_shm_seg_name(const char *public_name, const uint8_t *lo_nonce, int lo, int hi,
                     char name[HC_SHM_NAME_MAX]);

/* shm_ctx.c: once the peer has published its probe address, tests whether
 * process_vm_readv can read it and tells the peer through cma_ok. */
void hc_shm_probe(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep);

/* shm_cpu.c: publishes this rank's CPU to its peers; the higher of two
 * ranks stacked on one CPU moves to a free one (HCOMM_SHM_UNSTACK). */
void hc_shm_cpu_check(hc_tl_ctx_t *ctx);

/* shm_ep.c */
hcomm_status_t hc_shm_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req);
hcomm_status_t hc_shm_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req);
int            hc_shm_progress(hc_tl_ctx_t *ctx);
hcomm_status_t hc_shm_ep_status(hc_tl_ep_t *ep);

#endif
