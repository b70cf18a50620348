/* comm.h - the communicator: ranks, transports and endpoints, the queue of
 * operations, the schedule cache and the scratch buffer. */
#ifndef HC_CORE_COMM_H
#define HC_CORE_COMM_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "algorithms/algo.h"
#include "bootstrap/bootstrap.h"
#include "core/exec.h"
#include "topology/plan.h"
#include "transport/transport.h"

#define HC_TL_MAX          2
/* thread-locals read on every call: no __tls_get_addr from the shared library */
#define HC_TLS_FAST __attribute__((tls_model("initial-exec")))
#define HC_SCHED_CACHE_MAX 64
#define HC_OP_FREE_MAX     8 /* spare ops: enough for a window of nonblocking calls */

typedef struct hc_sched_cache_entry {
    hc_coll_args_t args;
    hc_algo_t      algo;
    const char    *algo_setting; /* HCOMM_ALGO it was selected under */
    size_t         chunk_bytes;
    hc_sched_t    *sched;
    uint64_t       last_use;
} hc_sched_cache_entry_t;

struct hcomm_comm {
    int                 rank, nranks;
    /* owned by an API front end whose handle is this communicator itself (the
     * NCCL shim, src/shim/nccl), so that its calls reach it without a load */
    void               *frontend;
    uint32_t            frontend_state;
    uint8_t             cookie[16];
    hc_bootstrap_t     *bs;
    hc_peer_info_t     *peers;                /* nranks entries */
    const hc_tl_ops_t  *tl_ops[HC_TL_MAX];
    hc_tl_ctx_t        *tl_ctx[HC_TL_MAX];
    int                 ntl;
    uint8_t             tl_used[HC_TL_MAX];
    uint8_t             tl_active[HC_TL_MAX]; /* transports with endpoints: progressed */
    int                 nactive;
    hc_tl_ep_t        **eps;                  /* per peer; NULL for self */
    uint8_t            *ep_tl;                /* per peer: index into tl_ops */
    hcomm_status_t      error;                /* first failure; sticky */
    hc_op_t            *op_head, *op_tail;    /* issued, not yet finished; head runs */
    hc_op_t            *op_free;              /* finished ops kept for reuse (list) */
    int                 nfree;
    hc_sched_cache_entry_t cache[HC_SCHED_CACHE_MAX];
    int                 ncache;
    hc_algo_t           cal_algo;           /* forced while calibrating, else HC_ALGO_AUTO */
    int                 cache_mru;          /* checked first: loops repeat one call */
    uint64_t            cache_clock;
    void               *scratch;
    size_t              scratch_size;
    double              timeout;
    int                 spin;        /* idle polls before yielding the CPU */
    hc_cluster_t       *cluster;     /* the cluster model (comm_topo.c) */
    hc_rings_t          rings;
    hc_tree_t           trees[2];
    hc_hier_t           hier;
    const uint64_t     *host_ids;    /* during init only: identities inherited from a parent */
    unsigned long       moved;       /* bumped whenever an op posts or finishes a step */
    uint64_t            bytes_sent;  /* payload handed to transports (hcomm_comm_bytes_sent) */
    /* streams: once an op has gone to a stream (threaded = 1, set by the issuing
     * thread before any stream thread sees the comm), every access to the queue
     * and the executor holds lock; until then the comm stays lock-free */
    pthread_mutex_t     lock;        /* recursive */
    int                 threaded;
    int                 held;        /* ops a stream still holds (destroy waits) */
};

/* Gives the CPU away for a moment: sleeps in poll() on what the transports
 * wait for (at most 1 ms: a shared-memory peer cannot wake it), or yields
 * when a transport can only be polled. */
void hc_comm_idle(hcomm_comm_t comm);

/* A wait loop's back-off: spin while anything moves, give the CPU away after
 * comm->spin idle polls (at once when ranks outnumber CPUs). */
typedef struct hc_backoff {
    unsigned long seen;
    int           idle;
} hc_backoff_t;

static inline void hc_backoff(hcomm_comm_t comm, hc_backoff_t *b)
{
    if (comm->moved != b->seen) {
        b->seen = comm->moved;
        b->idle = 0;
    } else if (++b->idle > comm->spin) {
        hc_comm_idle(comm);
    }
}

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

/* Live-communicator registry: lets every API call tell a destroyed or foreign
 * pointer from a live one without touching freed memory. */
int  hc_comm_is_live(hcomm_comm_t comm);
/* Validates comm for a new operation: live, not failed. Logs and returns why not. */
hcomm_status_t hc_comm_check(hcomm_comm_t comm, const char *what);

/* The cached (or newly built) schedule for args on comm; *owned_p = 1 when the
 * caller owns it (the cache was full and busy). */
hcomm_status_t hc_comm_get_sched(hcomm_comm_t comm, const hc_coll_args_t *args,
                                 hc_sched_t **sched_p, int *owned_p);
/* Destroys every cached schedule (no op may still hold one). */
void hc_comm_cache_clear(hcomm_comm_t comm);

/* The algorithm for args on comm (comm_select.c): HCOMM_ALGO, then the tuning
 * file, then the size rule inside one node or the cost model across nodes;
 * *chunk gets the chunk size to build with. */
hc_algo_t hc_comm_select(hcomm_comm_t comm, const hc_coll_args_t *args, const hc_params_t *p,
                         size_t *chunk);
/* The algorithm the cost model's algorithm cost_algo (hc_cost_algo_t) stands for. */
hc_algo_t hc_comm_algo_of_cost(int cost_algo);
/* Builds args' schedule with algo, on comm's plans where the algorithm follows one. */
hcomm_status_t hc_comm_build(hcomm_comm_t comm, const hc_coll_args_t *args, hc_algo_t algo,
                             size_t chunk, hc_sched_t **s);

/* Operations: allocate (reusing the comm's spare), queue, progress, wait, recycle. */
hc_op_t       *hc_comm_op_alloc(hcomm_comm_t comm);
void           hc_comm_op_recycle(hcomm_comm_t comm, hc_op_t *op);
void           hc_comm_enqueue(hcomm_comm_t comm, hc_op_t *op);
hcomm_status_t hc_comm_progress(hcomm_comm_t comm);
/* The same, with comm's lock already held (one hold per spin, not two). */
hcomm_status_t hc_comm_progress_locked(hcomm_comm_t comm);
hcomm_status_t hc_comm_wait_op(hc_op_t *op);
/* Progresses ops, of one or several communicators that may depend on each
 * other, together until every one has finished (each fails after HCOMM_TIMEOUT
 * without progress); their statuses are left in the ops. */
void           hc_comm_wait_ops(hc_op_t *const *ops, size_t nops);
void           hc_comm_drain(hcomm_comm_t comm);

/* Creates a communicator (hcomm_comm_init's work). host_ids, when not NULL,
 * gives each new rank's host identity as its parent communicator saw it (split):
 * the child keeps the parent's nodes, virtual ones included. */
hcomm_status_t hc_comm_create(hcomm_comm_t *comm_p, int nranks, const hcomm_unique_id_t *id,
                              int rank, const uint64_t *host_ids);

/* Issues one collective described by args (validated) on comm: on stream when
 * it is non-NULL, else nonblocking when req is non-NULL, else blocking. */
hcomm_status_t hc_coll_issue(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                             void *recvbuf, hcomm_request_t *req, hcomm_stream_t stream);

/* An op handed to a stream: queued on its comm behind a closed gate, which the
 * stream opens when its earlier work is done; hc_op_drop releases one holder
 * (the stream, or a user request) and recycles the op after the last. */
void hc_comm_make_threaded(hcomm_comm_t comm);
void hc_op_open_gate(hc_op_t *op);
void hc_op_drop(hc_op_t *op);

/* Topology (comm_topo.c): builds comm->cluster from every rank's discovery, or
 * loads HCOMM_TOPO_FILE, then the plans; when the model's nodes split a host
 * (virtual nodes), marks peers[] so that transports treat them as remote. */
hcomm_status_t hc_comm_topo_setup(hcomm_comm_t comm, const hc_rank_topo_t *all,
                                  hc_peer_info_t *peers, int inherited);
void           hc_comm_topo_free(hcomm_comm_t comm);
/* Measures the cross-node link into comm->cluster when ranks span nodes and no
 * topology file gave the costs (HCOMM_CALIBRATE); collective. */
hcomm_status_t hc_comm_calibrate(hcomm_comm_t comm);

/* Groups (group.c). */
int            hc_group_active(void);
/* Counts the outermost groups started on the calling thread: what a call
 * queued in a group keeps alive lasts until the epoch changes. */
unsigned long  hc_group_epoch(void);
hcomm_status_t hc_group_add(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                            void *recvbuf, hcomm_stream_t stream);

/* Makes sure comm->scratch holds at least size bytes. */
hcomm_status_t hc_comm_reserve_scratch(hcomm_comm_t comm, size_t size);

/* Records the communicator's first error and shuts its transports down, so that no
 * late message can write into a buffer the caller got back. */
void hc_comm_fail(hcomm_comm_t comm, hcomm_status_t status);

#endif
