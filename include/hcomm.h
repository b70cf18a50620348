/*
 * hcomm.h - the public API of hcomm, a collective-communication library for
 * distributed training on heterogeneous clusters.
 *
 * Conventions: every function returns an hcomm_status_t (0 = success, negative
 * = failure) unless stated; output parameters are written only on success.
 * Calls on one communicator must come from one thread at a time.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef HCOMM_H
#define HCOMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCOMM_VERSION_MAJOR 0
#define HCOMM_VERSION_MINOR 1
#define HCOMM_VERSION_PATCH 0
/** Version as one integer: major * 10000 + minor * 100 + patch. */
#define HCOMM_VERSION_CODE \
    (HCOMM_VERSION_MAJOR * 10000 + HCOMM_VERSION_MINOR * 100 + HCOMM_VERSION_PATCH)

/*
 * Status codes, grouped: 0 success, 1 in progress, -1..-19 argument errors,
 * -20..-39 system errors, -40..-59 peer and remote errors, -60.. timeouts.
 * X(name, value, description)
 */
#define HCOMM_STATUS_MAP(X)                                                                        \
    X(HCOMM_SUCCESS, 0, "success")                                                                 \
    X(HCOMM_IN_PROGRESS, 1, "operation in progress")                                               \
    X(HCOMM_ERR_INVALID_ARG, -1, "invalid argument")                                               \
    X(HCOMM_ERR_NULL_BUFFER, -2, "NULL buffer with a non-zero count")                              \
    X(HCOMM_ERR_INVALID_DTYPE, -3, "invalid datatype")                                             \
    X(HCOMM_ERR_INVALID_OP, -4, "invalid reduction operation")                                     \
    X(HCOMM_ERR_INVALID_RANK, -5, "invalid root, peer or rank")                                    \
    X(HCOMM_ERR_OVERFLOW, -6, "byte size overflows")                                               \
    X(HCOMM_ERR_INVALID_COMM, -7, "invalid, destroyed or aborted communicator")                    \
    X(HCOMM_ERR_INVALID_USAGE, -8, "invalid usage")                                                \
    X(HCOMM_ERR_UNSUPPORTED, -9, "not supported in this build or configuration")                   \
    X(HCOMM_ERR_NO_MEMORY, -20, "out of memory")                                                   \
    X(HCOMM_ERR_SYSTEM, -21, "system call failed")                                                 \
    X(HCOMM_ERR_IO, -22, "input/output error")                                                     \
    X(HCOMM_ERR_REMOTE, -40, "a peer failed or closed its connection")                             \
    X(HCOMM_ERR_UNREACHABLE, -41, "peer unreachable")                                              \
    X(HCOMM_ERR_AUTH, -42, "authentication failed: wrong job secret (cookie)")                     \
    X(HCOMM_ERR_ABORTED, -43, "communicator aborted")                                              \
    X(HCOMM_ERR_PROTOCOL, -44, "protocol error: unexpected message")                               \
    X(HCOMM_ERR_REVOKED, -45, "communicator revoked (hcomm_comm_revoke)")                          \
    X(HCOMM_ERR_TIMEOUT, -60, "timed out")

typedef enum {
#define HCOMM_STATUS_ENUM_(name, value, desc) name = value,
    HCOMM_STATUS_MAP(HCOMM_STATUS_ENUM_)
#undef HCOMM_STATUS_ENUM_
} hcomm_status_t;

/** A static string describing a status code ("unknown status" when unknown). */
const char *hcomm_status_str(hcomm_status_t status);

/** The name of a status code, e.g. "HCOMM_ERR_TIMEOUT". */
const char *hcomm_status_name(hcomm_status_t status);

/** The library's version (HCOMM_VERSION_CODE of the built library). */
int hcomm_version(void);

/** The library's version as a string, e.g. "0.1.0". */
const char *hcomm_version_str(void);

/** Prints every HCOMM_* environment variable the library reads: its current
 * value, its default and what it does (hcomm-perf --params). */
void hcomm_params_print(FILE *out);

/* Datatypes and reductions have NCCL's values (ncclDataType_t, ncclRedOp_t),
 * so that hcomm's libnccl.so.2 passes NCCL's through unchanged. */
typedef enum {
    HCOMM_INT8 = 0,
    HCOMM_UINT8,
    HCOMM_INT32,
    HCOMM_UINT32,
    HCOMM_INT64,
    HCOMM_UINT64,
    HCOMM_FLOAT16, /* IEEE 754 binary16 */
    HCOMM_FLOAT32,
    HCOMM_FLOAT64,
    HCOMM_BFLOAT16, /* bfloat16: the top 16 bits of a float32 */
    HCOMM_DTYPE_COUNT
} hcomm_dtype_t;

/*
 * Reductions. Integer sum and prod wrap (unsigned arithmetic); float16 and
 * bfloat16 accumulate in float32 and round to nearest even; avg is sum / nranks
 * (integers truncate toward zero, as NCCL).
 */
typedef enum {
    HCOMM_SUM = 0,
    HCOMM_PROD,
    HCOMM_MAX,
    HCOMM_MIN,
    HCOMM_AVG,
    HCOMM_OP_COUNT
} hcomm_op_t;

/** Size in bytes of one element of dtype; 0 for an invalid dtype. */
size_t hcomm_dtype_size(hcomm_dtype_t dtype);

/** The name of a datatype ("float32", ...) or of an op ("sum", ...); NULL if invalid. */
const char *hcomm_dtype_name(hcomm_dtype_t dtype);
const char *hcomm_op_name(hcomm_op_t op);

typedef struct hcomm_comm *hcomm_comm_t;
typedef struct hcomm_request *hcomm_request_t;
/** An ordered queue of work run by its own thread (hcomm_stream.h); NULL = the
 * caller's thread, blocking. */
typedef struct hcomm_stream *hcomm_stream_t;

#define HCOMM_UNIQUE_ID_BYTES 128
/** Opaque: the root's address and a random 128-bit cookie. Copy it by value. */
typedef struct {
    char internal[HCOMM_UNIQUE_ID_BYTES];
} hcomm_unique_id_t;

/** hcomm_comm_split color for ranks that join no new communicator. */
#define HCOMM_SPLIT_NOCOLOR (-1)

/*
 * Creates a unique id on the calling process, which becomes the rendezvous root:
 * it listens (HCOMM_SOCKET_IFNAME selects the interface) until every rank of the
 * communicator made from this id has joined, or HCOMM_TIMEOUT passes. Send the id
 * to every rank (by any means) and call hcomm_comm_init on each. An id serves
 * one communicator: an init with an id whose root has ended (it served one, or
 * its process is gone) fails at once with HCOMM_ERR_REMOTE.
 */
hcomm_status_t hcomm_get_unique_id(hcomm_unique_id_t *id);

/*
 * Creates a communicator of nranks ranks; collective over all of them, each
 * passing its own rank in [0, nranks). Blocks until all have joined and are
 * connected, or HCOMM_TIMEOUT passes (HCOMM_ERR_TIMEOUT).
 */
hcomm_status_t hcomm_comm_init(hcomm_comm_t *comm, int nranks, const hcomm_unique_id_t *id,
                               int rank);

/*
 * Creates a communicator from the environment: HCOMM_RANK, HCOMM_NRANKS and
 * HCOMM_ROOT=host:port (set by hcomm-run). Rank and size fall back to the
 * variables of Open MPI (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/SIZE) and
 * Slurm (SLURM_PROCID/NTASKS). Rank 0 listens at HCOMM_ROOT. HCOMM_COOKIE (32 hex
 * digits) is the cookie; without it one is derived from HCOMM_ROOT, which keeps
 * unrelated jobs apart but is no secret.
 */
hcomm_status_t hcomm_comm_init_env(hcomm_comm_t *comm);

/*
 * Destroys a communicator after its pending operations complete (or fail);
 * frees everything it holds. Passing NULL returns HCOMM_ERR_INVALID_COMM.
 * Requests of its nonblocking calls not yet ended stay valid (as in MPI):
 * hcomm_wait or hcomm_test returns their status and frees them; so do those
 * hcomm_stream_last_request handed out, and destroy does not wait for them.
 * Not allowed inside a group (HCOMM_ERR_INVALID_USAGE, as in NCCL: the
 * group's queued calls may name comm); end the group first. Work queued on a
 * stream that has not reached it within the communicator's timeout makes it
 * return HCOMM_ERR_TIMEOUT and leaves comm as it was (the queued work runs
 * when the stream reaches it): destroy or abort it again once it moved.
 */
hcomm_status_t hcomm_comm_destroy(hcomm_comm_t comm);

/*
 * Aborts a communicator: pending operations fail with HCOMM_ERR_ABORTED, the
 * connections close (peers see HCOMM_ERR_REMOTE) and the communicator is freed.
 * Allowed inside a group: the group's calls queued on comm are dropped, and
 * hcomm_group_end returns HCOMM_ERR_INVALID_COMM.
 */
hcomm_status_t hcomm_comm_abort(hcomm_comm_t comm);

/** Rank of the caller and number of ranks in comm. */
hcomm_status_t hcomm_comm_rank(hcomm_comm_t comm, int *rank);
hcomm_status_t hcomm_comm_size(hcomm_comm_t comm, int *nranks);

/**
 * The first error a communicator has seen (HCOMM_SUCCESS if none): once an
 * operation fails, later operations on it fail too; destroy or abort it.
 */
hcomm_status_t hcomm_comm_get_error(hcomm_comm_t comm);

/*
 * Sets comm's timeout: how many seconds (> 0, finite) one of its operations may
 * wait without progress before it fails with HCOMM_ERR_TIMEOUT, a connection
 * its transports make on first use included. The default is
 * HCOMM_TIMEOUT, which also bounds init. Local to the calling rank; operations
 * already running see the new value at their next progress check.
 */
hcomm_status_t hcomm_comm_set_timeout(hcomm_comm_t comm, double seconds);

/*
 * Grows a communicator by new processes: a new communicator of nranks ranks
 * in which comm's ranks keep their numbers and the new processes take ranks
 * size(comm) .. nranks - 1 (as NCCL's ncclCommGrow). One process makes id
 * with hcomm_get_unique_id (it becomes the rendezvous root) and sends it to
 * every member of comm (hcomm_broadcast over comm will do) and to every new
 * process (any means: it carries the job's new secret). Members call
 * hcomm_comm_grow(comm, nranks, &id, -1, &newcomm), new processes
 * hcomm_comm_grow(NULL, nranks, &id, rank, &newcomm). Collective over all
 * nranks, bounded by HCOMM_TIMEOUT; comm stays as it was (destroy it once
 * done with it).
 */
hcomm_status_t hcomm_comm_grow(hcomm_comm_t comm, int nranks, const hcomm_unique_id_t *id, int rank,
                               hcomm_comm_t *newcomm);

/*
 * Revokes comm on every rank: each operation of comm pending or blocked on any
 * rank, in any thread (streams included), returns HCOMM_ERR_REVOKED promptly
 * (within milliseconds where its rank is in hcomm), and so does every later
 * call on it; the communicator is then failed (hcomm_comm_get_error) and can
 * only be shrunk (hcomm_comm_shrink), destroyed or aborted. The other ranks learn it over the watch
 * channel (HCOMM_WATCH; without it, only this rank is revoked, logged); a
 * rank that is gone is not waited for. Call it from any thread, on any rank,
 * as often as wanted.
 */
hcomm_status_t hcomm_comm_revoke(hcomm_comm_t comm);

/*
 * Reports where comm is on this rank: its last operations (number, collective,
 * size, algorithm, state, the ranks a running one waits for) as warn lines,
 * and, when HCOMM_TRACE_DIR is set, its flight recorder file there
 * (docs/resilience.md). Local; works on a failed communicator too.
 */
hcomm_status_t hcomm_comm_dump_state(hcomm_comm_t comm);

#define HCOMM_HEALTH_MAX 8

/* Which ranks and links are slow, as rank 0 last judged them (docs/resilience.md). */
typedef struct hcomm_health {
    int evaluated;         /* 1: a verdict over the window below; 0: none (not
                            * rank 0, fewer than 3 ranks, HCOMM_HEALTH=0, or
                            * too few collectives yet) */
    uint64_t window_first; /* the collectives (#) it looked at */
    uint64_t window_last;
    int      ncollectives; /* of them, those every rank reported */
    double   interval_ms;  /* mean time between collectives there */
    int      nslow;        /* ranks named slow, most extreme first */
    int      slow_rank[HCOMM_HEALTH_MAX];
    double   slow_late_ms[HCOMM_HEALTH_MAX]; /* mean time it entered after the median rank */
    double   slow_score[HCOMM_HEALTH_MAX];   /* Grubbs' G / G_crit at detection */
    /* Slow links: throughput measured by the receiver, tcp links only
     * (docs/resilience.md); tested once 3 links of a class have a measure. */
    int    nlinks; /* links judged in the last evaluation */
    int    nslow_links;
    int    slow_link_src[HCOMM_HEALTH_MAX];         /* the sending rank */
    int    slow_link_dst[HCOMM_HEALTH_MAX];         /* the receiving rank */
    double slow_link_gbps[HCOMM_HEALTH_MAX];        /* its throughput, GB/s */
    double slow_link_median_gbps[HCOMM_HEALTH_MAX]; /* its class's median */
    double slow_link_score[HCOMM_HEALTH_MAX];
} hcomm_health_t;

/*
 * The last slow-rank and slow-link verdict into *health. Rank 0 judges, every
 * HCOMM_HEALTH_PERIOD seconds, when comm has 3 ranks or more; other ranks
 * get evaluated = 0.
 */
hcomm_status_t hcomm_comm_get_health(hcomm_comm_t comm, hcomm_health_t *health);

/** Payload bytes this rank has handed to transports on comm since its
 * creation (copies to itself excluded): what compression saves shows here. */
hcomm_status_t hcomm_comm_bytes_sent(hcomm_comm_t comm, uint64_t *bytes);

/*
 * Splits comm: ranks passing the same color form a new communicator, ordered by
 * key then by rank in comm. color HCOMM_SPLIT_NOCOLOR gives *newcomm = NULL.
 * Collective over comm.
 */
hcomm_status_t hcomm_comm_split(hcomm_comm_t comm, int color, int key, hcomm_comm_t *newcomm);

/*
 * Shrinks comm: every rank not in exclude[0..nexclude) joins a new communicator,
 * keeping its order; the excluded ranks do not call (they may be gone). A
 * caller listed in exclude gets HCOMM_ERR_INVALID_USAGE.
 * On a healthy comm the survivors talk over comm. On a comm that failed (a
 * peer died, an operation timed out, hcomm_comm_revoke; what is still in flight
 * has failed with it), they agree over the watch channel (HCOMM_WATCH) on who
 * is alive: a rank that refuses or hangs up is dead, one that stays silent
 * for 4 x HCOMM_WATCH_TIMEOUT too, and one that dies during the agreement
 * does not hang it; the dead need not be listed. At most comm's timeout. The
 * new communicator has the ranks alive, in their order (docs/resilience.md).
 * A failed comm is shrunk once: a second time gives HCOMM_ERR_INVALID_USAGE
 * (shrink the communicator the first gave).
 */
hcomm_status_t hcomm_comm_shrink(hcomm_comm_t comm, const int *exclude, int nexclude,
                                 hcomm_comm_t *newcomm);

/*
 * Collectives. count is in elements of dtype. Every call with stream == NULL
 * blocks until the operation completed on the caller's side (the caller's
 * buffers may be reused). With a stream (hcomm_stream.h) the call returns once
 * the operation is queued: it runs when the stream's earlier work is done, and
 * the buffers belong to it until then. Operations on one communicator start in
 * the order they were issued, whatever their streams. Inside
 * hcomm_group_start/end a call only queues the operation.
 *
 * In place: recvbuf == sendbuf for allreduce, broadcast, reduce and alltoall;
 * sendbuf == recvbuf + rank * count * size for allgather;
 * recvbuf == sendbuf + rank * recvcount * size for reduce_scatter.
 * Otherwise the two buffers must not share a byte (a buffer the rank does not
 * use, broadcast's sendbuf or reduce's recvbuf off the root, is not checked):
 * buffers that overlap without being in place get HCOMM_ERR_INVALID_ARG.
 */

/** recvbuf[i] = op over ranks of sendbuf[i], on every rank. */
hcomm_status_t hcomm_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                               hcomm_dtype_t dtype, hcomm_op_t op, hcomm_comm_t comm,
                               hcomm_stream_t stream);

/** Copies root's sendbuf into every rank's recvbuf (sendbuf is read on root only). */
hcomm_status_t hcomm_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                               hcomm_dtype_t dtype, int root, hcomm_comm_t comm,
                               hcomm_stream_t stream);

/** Like allreduce, but only root's recvbuf receives the result (recvbuf may be NULL elsewhere). */
hcomm_status_t hcomm_reduce(const void *sendbuf, void *recvbuf, size_t count,
                            hcomm_dtype_t dtype, hcomm_op_t op, int root, hcomm_comm_t comm,
                            hcomm_stream_t stream);

/** recvbuf (nranks * sendcount elements) gets rank r's sendbuf at offset r * sendcount. */
hcomm_status_t hcomm_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                               hcomm_dtype_t dtype, hcomm_comm_t comm, hcomm_stream_t stream);

/** sendbuf has nranks * recvcount elements; rank r gets block r of the reduction. */
hcomm_status_t hcomm_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                    hcomm_dtype_t dtype, hcomm_op_t op, hcomm_comm_t comm,
                                    hcomm_stream_t stream);

/** Block p (count elements) of sendbuf goes to rank p, into block r of its recvbuf. */
hcomm_status_t hcomm_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                              hcomm_dtype_t dtype, hcomm_comm_t comm, hcomm_stream_t stream);

/*
 * sendcounts[p] elements at element sdispls[p] of sendbuf go to rank p, which
 * receives them at element rdispls[r] of its recvbuf; recvcounts[p] must be
 * what p sends this rank (as in MPI). Arrays of nranks entries, read before
 * the call returns; no in-place: recvbuf != sendbuf, the span of the
 * blocks received may not overlap the span of the blocks sent, and no two
 * blocks received may share an element (HCOMM_ERR_INVALID_ARG); not inside a
 * group. A pair with a count of 0 still exchanges an empty message, so that a
 * count the two sides disagree on fails the receiver (HCOMM_ERR_PROTOCOL).
 */
hcomm_status_t hcomm_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                               void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                               hcomm_dtype_t dtype, hcomm_comm_t comm, hcomm_stream_t stream);

/*
 * alltoallv where only the senders know the counts: they are exchanged first,
 * then rank p's block lands in recvbuf packed in rank order, and recvcounts[p]
 * (filled) says how many elements came from p. recv_capacity: elements recvbuf
 * holds; if more would arrive on any rank, no data moves and every rank
 * returns an error (HCOMM_ERR_OVERFLOW where it lacked room, HCOMM_ERR_REMOTE
 * elsewhere). Blocking only (stream NULL).
 */
hcomm_status_t hcomm_alltoallv_dynamic(const void *sendbuf, const size_t *sendcounts,
                                       const size_t *sdispls, void *recvbuf, size_t recv_capacity,
                                       size_t *recvcounts, hcomm_dtype_t dtype, hcomm_comm_t comm,
                                       hcomm_stream_t stream);

/*
 * Point to point. The n-th send from a to b matches the n-th recv at b from a;
 * counts must agree (a count of 0 is an empty message, as in NCCL and MPI:
 * it too needs its match, and a receive of another count fails with
 * HCOMM_ERR_PROTOCOL). Up to 65 nonblocking sends and receives of host memory
 * issued one after another (hcomm_isend, hcomm_irecv, nothing else between
 * them on the communicator) run together: an exchange of isends then irecvs
 * completes, as in MPI. Otherwise operations run one at a time, in issue
 * order: a blocking send and recv that depend on each other (exchanges,
 * rings), or more calls than that, or device buffers, go inside one group.
 */
hcomm_status_t hcomm_send(const void *sendbuf, size_t count, hcomm_dtype_t dtype, int peer,
                          hcomm_comm_t comm, hcomm_stream_t stream);
hcomm_status_t hcomm_recv(void *recvbuf, size_t count, hcomm_dtype_t dtype, int peer,
                          hcomm_comm_t comm, hcomm_stream_t stream);

/** Returns once every rank of comm has called it. */
hcomm_status_t hcomm_barrier(hcomm_comm_t comm, hcomm_stream_t stream);

/*
 * Groups: between hcomm_group_start and hcomm_group_end, collective and point-to-
 * point calls on the calling thread are queued, then issued together by
 * hcomm_group_end as one operation per communicator, so that sends and receives
 * among them cannot deadlock. Groups nest; the outermost end issues. end returns
 * when every queued operation completed, with the first error any of them had.
 * Within a group the collectives go first, then the sends and receives, each
 * in call order: ranks may interleave the two differently, as NCCL allows.
 * Nonblocking (i*) calls are not allowed inside a group, nor is
 * hcomm_comm_destroy. A call refused inside a group (bad arguments, a
 * nonblocking call, alltoallv) fails the group, as in NCCL: the end runs none
 * of its calls and returns the first refusal. Calls queued on a communicator
 * destroyed or aborted before the end (on this thread or another) are
 * dropped; the end then returns HCOMM_ERR_INVALID_COMM and issues the others.
 */
hcomm_status_t hcomm_group_start(void);
hcomm_status_t hcomm_group_end(void);

/*
 * Nonblocking variants: same arguments, and *req receives a request to test or
 * wait on. The buffers belong to the operation until it completes. Operations
 * on one communicator run in the order they were issued, and each pair of
 * ranks matches its messages in that order, collectives and sends/receives
 * alike (as on one NCCL stream): ranks must issue them in one order. An MPI
 * program whose isend stays pending across a collective that its peer issues
 * before the matching irecv should give its point-to-point traffic a
 * communicator of its own (hcomm_comm_split). Progress happens inside
 * hcomm_test / hcomm_wait (and any other call on the same communicator).
 */
hcomm_status_t hcomm_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                hcomm_dtype_t dtype, hcomm_op_t op, hcomm_comm_t comm,
                                hcomm_request_t *req);
hcomm_status_t hcomm_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
                                hcomm_dtype_t dtype, int root, hcomm_comm_t comm,
                                hcomm_request_t *req);
hcomm_status_t hcomm_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                             hcomm_dtype_t dtype, hcomm_op_t op, int root, hcomm_comm_t comm,
                             hcomm_request_t *req);
hcomm_status_t hcomm_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                hcomm_dtype_t dtype, hcomm_comm_t comm, hcomm_request_t *req);
hcomm_status_t hcomm_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                     hcomm_dtype_t dtype, hcomm_op_t op, hcomm_comm_t comm,
                                     hcomm_request_t *req);
hcomm_status_t hcomm_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                               hcomm_dtype_t dtype, hcomm_comm_t comm, hcomm_request_t *req);
hcomm_status_t hcomm_isend(const void *sendbuf, size_t count, hcomm_dtype_t dtype, int peer,
                           hcomm_comm_t comm, hcomm_request_t *req);
hcomm_status_t hcomm_irecv(void *recvbuf, size_t count, hcomm_dtype_t dtype, int peer,
                           hcomm_comm_t comm, hcomm_request_t *req);
hcomm_status_t hcomm_ibarrier(hcomm_comm_t comm, hcomm_request_t *req);

/*
 * Tests a request without blocking. *done is set to 1 when the operation has
 * finished: the request is then freed, *req set to NULL, and the operation's
 * status returned. While pending, *done = 0 and HCOMM_IN_PROGRESS is returned.
 */
hcomm_status_t hcomm_test(hcomm_request_t *req, int *done);

/* Waits for a request (at most HCOMM_TIMEOUT without progress), frees it, sets
 * *req to NULL and returns the operation's status.
 * A request is ended once, by one wait or one test that finds it done. Ending
 * it again through a copy of the handle returns HCOMM_ERR_INVALID_USAGE while
 * the library keeps it for reuse; once it is freed or a later call reuses it,
 * the copy is undefined to use (as a freed MPI request). */
hcomm_status_t hcomm_wait(hcomm_request_t *req);

#ifdef __cplusplus
}
#endif
#endif /* HCOMM_H */
