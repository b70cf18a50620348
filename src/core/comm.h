/* comm.h - the communicator: ranks, transports and endpoints, the plans, the
 * queue of requests, the schedule cache and the scratch buffer. Private to
 * core/ and the API floor above it; streams, compression and MoE use
 * core/handles.h instead. */
#ifndef HC_CORE_COMM_H
#define HC_CORE_COMM_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "algorithms/algo.h"
#include "bootstrap/bootstrap.h"
#include "core/handles.h"
#include "core/health.h"
#include "core/request.h"
#include "topology/plan.h"
#include "transport/transport.h"

/* thread-locals read on every call: no __tls_get_addr from the shared library */
#define HC_TLS_FAST __attribute__((tls_model("initial-exec")))
#define HC_SCHED_CACHE_MAX 64
#define HC_REQ_FREE_MAX    8 /* spare requests: enough for a window of nonblocking calls */
#define HC_GROUP_CACHE_MAX 4 /* fused group schedules kept (comm_cache.c) */
#define HC_GROUP_KEY_MAX 8   /* calls of the largest group whose fused schedule is kept */

/* A group's fused schedule, by its calls' schedules in fused order: each
 * one the cache's, so equal pointers mean equal schedules while the cache
 * keeps them (any eviction from the cache empties this one). */
typedef struct hc_group_cache_entry {
    hc_sched_t *member[HC_GROUP_KEY_MAX];
    size_t      nmember;
    hc_sched_t *merged;
    uint64_t    last_use;
} hc_group_cache_entry_t;

typedef struct hc_sched_cache_entry {
    hc_coll_args_t args;
    hc_algo_t      algo;
    const char    *algo_setting; /* HCOMM_ALGO it was selected under */
    size_t         chunk_bytes;
    hc_sched_t    *sched;
    uint64_t       last_use;
} hc_sched_cache_entry_t;

/* What a split or shrunk child inherits from its parent (hc_comm_create). */
typedef struct hc_comm_parent {
    const uint64_t     *host_ids; /* [child's nranks]: each rank's host identity */
    const hc_cluster_t *model;    /* the parent's cluster model, or NULL */
} hc_comm_parent_t;

struct hcomm_comm {
    int                 rank, nranks;
    uint64_t            serial; /* hc_comm_serial */
    /* owned by an API front end whose handle is this communicator itself (the
     * NCCL shim, src/shim/nccl), so that its calls reach it without a load */
    void               *frontend;
    uint32_t            frontend_state;
    uint8_t             cookie[16];
    hc_bootstrap_t     *bs;
    hc_peer_info_t     *peers;                /* nranks entries */
    /* transports, by their index in hc_tl_table (comm_transports.c) */
    const hc_tl_ops_t  *tl_ops[HC_TL_TABLE_MAX]; /* NULL: not open */
    hc_tl_ctx_t        *tl_ctx[HC_TL_TABLE_MAX];
    uint8_t             tl_active[HC_TL_TABLE_MAX]; /* connecting or connected: progressed */
    int                 nactive;
    int                 pollable; /* every transport a peer uses can be slept on */
    /* per peer: its transport, its address there, its endpoint once connected */
    uint8_t            *ep_tl;
    uint32_t           *addr_off, *addr_len; /* into addrs */
    uint8_t            *addrs;
    hc_tl_ep_t        **eps;         /* NULL until the first schedule that uses the pair */
    double                 *conn_wait;   /* [peer]: waiting for its side of the pair since */
    double                  conn_asked;  /* when a waited-for peer's watch was last asked */
    int                 nconnected;
    hcomm_status_t      error;                /* first failure; sticky */
    int                    shrunk_failed; /* a shrink of it after its failure succeeded here */
    int                 revoked;              /* hcomm_comm_revoke here or on a peer: an atomic; the
                                               * progress that sees it fails the comm */
    hcomm_request_t     req_head, req_tail;   /* issued, not yet finished; head runs */
    hcomm_request_t     req_free;             /* finished requests kept for reuse (list) */
    hcomm_request_t         user_reqs; /* handed to the user, not yet ended (request.h) */
    int                 nfree;
    hc_sched_cache_entry_t cache[HC_SCHED_CACHE_MAX];
    int                 ncache;
    hc_algo_t           timing;             /* timed by calibration, else HC_ALGO_AUTO */
    int                 cache_mru;          /* checked first: loops repeat one call */
    uint64_t            cache_clock;
    hc_group_cache_entry_t  group_cache[HC_GROUP_CACHE_MAX];
    int                     ngroup_cache;
    void               *scratch;
    size_t              scratch_size;
    void               *stage_spare; /* the largest host copy block freed (stage.c) */
    size_t              stage_spare_size;
    int                 stage_spare_pinned;
    void               *stage_retired; /* pinned blocks given up, unpinned at destroy (stage.c) */
    double              timeout;
    int                 spin;        /* idle polls before yielding the CPU */
    hc_plans_t          plans;       /* the cluster model and plans (comm_topo.c) */
    const hc_comm_parent_t *parent; /* during init only: what a split child inherits, or NULL */
    unsigned long          moved;       /* bumped whenever a request posts or finishes a step
                                         * (under the lock; read without it: relaxed atomics) */
    uint64_t            bytes_sent;  /* payload handed to transports (hcomm_comm_bytes_sent) */
    /* operations (core/ops.h): numbered at issue, the last ones ended kept in a
     * ring; a trace file's buffer when HCOMM_TRACE_FILE is set */
    uint64_t         ops_seq;  /* the last operation's number */
    uint64_t         ops_cseq; /* the last collective's number (op_rec.h) */
    int              ops_uncounted; /* 1: init's own: not numbered as a collective */
    hc_ops_pub_t     ops_pub;       /* for other threads: where this comm is (op_rec.h) */
    hc_op_rec_t     *ops_ring; /* ended operations at seq & ops_mask */
    uint32_t          ops_mask;
    uint8_t          ops_clock; /* what operations are stamped with, no profiler on */
    uint64_t         ops_coarse; /* the executor's last coarse clock reading (ns) */
    struct hc_trace *trace;
    struct hc_watch *watch;    /* peers ask it where this rank is (core/watch.h) */
    int              dump_req; /* a dump signal asked for a report (core/flight.h) */
    char            *verdict;  /* who a timed-out operation waited for (core/verdict.h) */
    hc_arrival_t      arrivals[HC_ARRIVALS]; /* when it entered its last collectives */
    hc_link_stat_t   *links;                 /* [nranks]: throughput of what each peer sent here */
    struct hc_health *health;                /* rank 0's slow-rank test (core/health.h) */
    struct hc_shrink *shrink; /* while this rank coordinates a shrink (watch_shrink.c) */
    /* streams: once a request has gone to a stream (threaded = 1, set by the
     * issuing thread before any stream thread sees the comm), every access to
     * the queue and the executor holds lock; until then the comm stays lock-free */
    pthread_mutex_t     lock;        /* recursive */
    int                 threaded;
    int                 held; /* an atomic: requests a stream still holds, and a revoke
                               * still telling the peers (destroy waits for both) */
};

/* Gives the CPU away for a moment: sleeps in poll() on what the transports
 * wait for (at most 1 ms: a shared-memory peer cannot wake it); when a
 * transport can only be polled, yields, or, in a thread that asked for naps
 * (hc_comm_idle_nap_thread), naps once the wait is long. rounds: idle calls
 * in a row, 1 for the first. */
void hc_comm_idle(hcomm_comm_t comm, int rounds);

/* A wait loop's back-off: spin while anything moves, give the CPU away after
 * comm->spin idle polls (at once when ranks outnumber CPUs). */
typedef struct hc_backoff {
    unsigned long seen;
    int           idle;
} hc_backoff_t;

static inline void hc_backoff(hcomm_comm_t comm, hc_backoff_t *b)
{
    unsigned long moved = __atomic_load_n(&comm->moved, __ATOMIC_RELAXED);
    if (moved != b->seen) {
        b->seen = moved;
        b->idle = 0;
    } else if (b->idle >= comm->spin) {
        if (b->idle < INT_MAX)
            b->idle++;
        hc_comm_idle(comm, b->idle - comm->spin);
    } else {
        b->idle++;
    }
}

/* hc_comm_check (handles.h) with its passing case inline, for the call path. */
static inline hcomm_status_t hc_comm_check_fast(hcomm_comm_t comm, const char *what)
{
    if (hc_comm_is_live(comm) && comm->error == HCOMM_SUCCESS &&
        !__atomic_load_n(&comm->revoked, __ATOMIC_RELAXED))
        return HCOMM_SUCCESS;
    return hc_comm_check(comm, what);
}

/* Takes a hold on comm (comm->held, which destroy waits for) if it is live,
 * in one step: a destroy in another thread cannot free it in between. */
int hc_comm_hold_if_live(hcomm_comm_t comm);

static inline void hc_comm_lock(hcomm_comm_t c)
{
    if (c->threaded)
        pthread_mutex_lock(&c->lock);
}

static inline void hc_comm_unlock(hcomm_comm_t c)
{
    if (c->threaded)
        pthread_mutex_unlock(&c->lock);
}

/* The cached (or newly selected and built) schedule for args on comm
 * (comm_cache.c); *owned_p = 1 when the caller owns it (the cache was full
 * and busy, or the call's shape is never cached). */
hcomm_status_t hc_comm_get_sched(hcomm_comm_t comm, const hc_coll_args_t *args,
                                 hc_sched_t **sched_p, int *owned_p);
/* Destroys every cached schedule (no request may still hold one). */
void           hc_comm_cache_clear(hcomm_comm_t comm);
/* The fused schedule kept for a group whose calls' schedules, in fused order,
 * are members[0..n), or NULL. */
hc_sched_t *hc_comm_group_sched_find(hcomm_comm_t comm, hc_sched_t *const *members, size_t n);
/* Keeps merged as that group's: 1 if the cache took it, 0 if the caller keeps
 * owning it (members not all cached, too many, or the cache full and busy). */
int hc_comm_group_sched_keep(hcomm_comm_t comm, hc_sched_t *const *members, size_t n,
                             hc_sched_t *merged);
/* Makes sure comm->scratch holds at least size bytes. */
hcomm_status_t hc_comm_reserve_scratch(hcomm_comm_t comm, size_t size);

/* The queue (comm_queue.c): add a prepared request at the tail (gated: behind
 * a closed gate, held once by the stream that will open it); progress the
 * head; wait until the queue is empty. */
void           hc_comm_enqueue(hcomm_comm_t comm, hcomm_request_t req, int gated);
hcomm_status_t hc_comm_progress(hcomm_comm_t comm);
/* The same, with comm's lock already held (one hold per spin, not two). */
hcomm_status_t hc_comm_progress_locked(hcomm_comm_t comm);
void           hc_comm_drain(hcomm_comm_t comm);

/* Issuing (issue.c). hc_coll_enqueue builds and queues a request for args
 * (validated) on comm, with comm's lock held; gated: behind a closed gate and
 * held once, for a stream. hc_coll_issue runs args: nonblocking when req is
 * non-NULL (*req gets the request), else to completion. */
hcomm_status_t hc_coll_enqueue(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                               void *recvbuf, int gated, hcomm_request_t *req_p);
hcomm_status_t hc_coll_issue(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                             void *recvbuf, hcomm_request_t *req);
/* Finishes a request the user holds (hcomm_test/hcomm_wait): its status;
 * recycles it, unless a stream's task still has it (which then does). */
hcomm_status_t hc_request_finish(hcomm_request_t req);
/* hcomm_wait and hcomm_test, first: HCOMM_ERR_INVALID_USAGE (logged, naming
 * what) when req is no longer the user's, i.e. a wait or test already ended
 * it and it waits for reuse (a stale copy of the handle). A request freed
 * since, or reused by a new call, cannot be told: undefined, as in MPI. */
hcomm_status_t hc_request_user_check(hcomm_request_t req, const char *what);
/* hcomm_wait and hcomm_test: 1 and *st when req outlived its communicator
 * (freed now), else 0. hc_comm_orphan_requests: at the end of a drained
 * communicator, its requests the user still holds are detached from it. */
int  hc_request_orphan_end(hcomm_request_t req, hcomm_status_t *st);
void hc_comm_orphan_requests(hcomm_comm_t comm);
/* Locks become necessary: a stream is about to see comm. */
void           hc_comm_make_threaded(hcomm_comm_t comm);

/* Lifecycle (comm.c). hc_comm_create makes a communicator (hcomm_comm_init's
 * work); parent, when not NULL (split, shrink), gives each new rank's host
 * identity as its parent communicator saw it, so that the child keeps the
 * parent's nodes, virtual ones included, and the parent's model, whose link
 * costs (a topology file's, or measured) the child keeps. Ending one: drain,
 * unregister (no new calls), let streams drop their holds, wait for the held
 * requests, free. */
hcomm_status_t hc_comm_create(hcomm_comm_t *comm_p, int nranks, const hcomm_unique_id_t *id,
                              int rank, const hc_comm_parent_t *parent);
void           hc_comm_unregister(hcomm_comm_t comm);
/* A destroy that cannot go on gives the communicator back: 0, or -1 (out of
 * memory: it stays unreachable). */
int hc_comm_reregister(hcomm_comm_t comm);
/* Waits (at most HCOMM_TIMEOUT) until no stream holds a request of comm: 0,
 * or -1 (logged) if one still does. */
int            hc_comm_wait_released(hcomm_comm_t comm);
void           hc_comm_free(hcomm_comm_t comm);
/* Records the communicator's first error and shuts its transports down, so
 * that no late message can write into a buffer the caller got back; comm's
 * lock held (hc_comm_set_failed takes it). */
void           hc_comm_fail(hcomm_comm_t comm, hcomm_status_t status);
/* Starts a rendezvous root in this process, on comm's bootstrap interface,
 * for a communicator made from comm (split, shrink): its id. */
hcomm_status_t hc_comm_root_start(hcomm_comm_t comm, hcomm_unique_id_t *id);

/* Connections (comm_transports.c): the pair's endpoint, made on first use.
 * HCOMM_SUCCESS, HCOMM_IN_PROGRESS (the peer has not acted yet: call again
 * after progress), or an error (logged). Closing shuts every transport. */
hcomm_status_t hc_comm_connect(hcomm_comm_t comm, int peer);
void           hc_comm_tl_close(hcomm_comm_t comm);
/* A pair waits for the peer's side of it (tcp: its dial; shm: its mapping of
 * the segment), which never comes once the peer's communicator is gone while
 * its process lives (destroyed, or aborted after a failure of its own).
 * hc_comm_peer_left: after a second of waiting asks the peer's watch, at most
 * one ask a second per communicator and 0.1 s each (it runs in progress);
 * 1 when the peer refused the connection. The caller then looks at the pair once
 * more (the peer may have joined, sent all it had and left meanwhile), and if
 * the peer has still not joined fails it with hc_comm_peer_gone (logged;
 * HCOMM_ERR_REMOTE). */
int            hc_comm_peer_left(hcomm_comm_t comm, int peer);
/* The same ask for a caller that keeps its own wait: waited seconds so far. */
int            hc_comm_peer_left_after(hcomm_comm_t comm, int peer, double waited);
hcomm_status_t hc_comm_peer_gone(hcomm_comm_t comm, int peer);

/* Topology (comm_topo.c): builds comm->plans from every rank's discovery, or
 * loads HCOMM_TOPO_FILE; when the model's nodes split a host (virtual nodes),
 * marks peers[] so that transports treat them as remote. A child of
 * comm->parent builds from discovery (the file describes the parent) with
 * the parent's link costs. */
hcomm_status_t hc_comm_topo_setup(hcomm_comm_t comm, const hc_rank_topo_t *all,
                                  hc_peer_info_t *peers);
/* Measures the cross-node link into the cluster model when ranks span nodes
 * and no topology file gave the costs (HCOMM_CALIBRATE); collective. */
hcomm_status_t hc_comm_calibrate(hcomm_comm_t comm);

#endif
