/*
 * hcomm_profiler.h - profiler hooks: callbacks at the start and at the end of
 * every operation of every communicator in the process, for a framework's
 * profiler or a tool. hcomm's libnccl.so.2 loads NCCL profiler plugins through
 * them (docs/nccl.md); HCOMM_TRACE_FILE writes a Chrome trace without them
 * (docs/resilience.md).
 *
 * An operation is one call (a collective, a send, a receive, a barrier), or a
 * group (hcomm_group_start/end) fused into one request on a communicator. Each
 * communicator numbers its operations 1, 2, ... in issue order, so the same
 * operation has the same number on every rank. On one communicator operations
 * start in issue order and end in issue order, mostly one after another; but
 * sends and receives right behind a running send or receive start beside it
 * (op_start of the next before op_end of the one ahead), so a profiler keeps
 * an operation's state in its op_data, not in one place per communicator.
 *
 * Callbacks run on the thread that progresses the operation (the caller's for
 * a blocking call; whoever tests or waits for a nonblocking one; a stream's
 * thread for a call on a stream), with the communicator's lock held when it
 * has one. They must be quick and must not call hcomm on that communicator.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef HCOMM_PROFILER_H
#define HCOMM_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What one call does. */
typedef struct hcomm_prof_call {
    /* "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter",
     * "alltoall", "alltoallv", "send", "recv", "barrier"; "group" for a group */
    const char *collective;
    /* "ring", "rd", "tree", ... (hcomm-topo lists them); "fused" for a group */
    const char *algorithm;
    /* elements as the call gives them; a group: its calls */
    size_t        count;
    hcomm_dtype_t dtype;
    /* count x the datatype's size; a group: the sum over its calls */
    size_t bytes;
    /* send, recv: the peer; broadcast, reduce: the root; else -1 */
    int         peer;
    const void *sendbuf;
    void       *recvbuf;
} hcomm_prof_call_t;

/** An operation as the callbacks see it; valid during the callback only. */
typedef struct hcomm_prof_op {
    /* sizeof(hcomm_prof_op_t) in the library: later versions may add fields */
    size_t       size;
    hcomm_comm_t comm;
    int          rank, nranks;
    /* 1, 2, ... per communicator, in issue order */
    uint64_t          seq;
    hcomm_prof_call_t call;
    /* a group's calls, when a profiler was registered as it was issued: ncalls
     * of them; NULL otherwise. A single call: ncalls 1, calls == &call. */
    size_t                   ncalls;
    const hcomm_prof_call_t *calls;
    /* op_end: how it ended; op_start: HCOMM_IN_PROGRESS */
    hcomm_status_t status;
    /* CLOCK_MONOTONIC ns: issued (queued), started, ended; 0 where not reached
     * (an operation that fails before it starts gets op_start and op_end at
     * its end, without start_ns) */
    uint64_t issue_ns, start_ns, end_ns;
    /* op_end: payload bytes this rank handed to transports for it */
    uint64_t bytes_sent;
} hcomm_prof_op_t;

typedef struct hcomm_profiler {
    /* op_start may set *op_data; op_end gets it back for the same operation.
     * Either may be NULL. */
    void (*op_start)(void *user, const hcomm_prof_op_t *op, void **op_data);
    void (*op_end)(void *user, const hcomm_prof_op_t *op, void *op_data);
    void *user;
} hcomm_profiler_t;

/** How many profilers may be registered at once. */
#define HCOMM_PROFILERS_MAX 4

/*
 * Registers prof's callbacks (copied) for every operation that starts from now
 * on; *id (1..HCOMM_PROFILERS_MAX) names the registration. Thread-safe.
 * HCOMM_ERR_INVALID_ARG for NULL arguments or no callback;
 * HCOMM_ERR_NO_MEMORY when HCOMM_PROFILERS_MAX are registered.
 */
hcomm_status_t hcomm_profiler_register(const hcomm_profiler_t *prof, int *id);

/*
 * Unregisters id: no callback of it starts after this returns, and none runs
 * then either (it waits, at most 10 s, for those running on other threads:
 * HCOMM_ERR_TIMEOUT past that). Called from one of id's own callbacks it does
 * not wait for that one. An operation whose op_start id saw gets no op_end
 * from it. Thread-safe. HCOMM_ERR_INVALID_ARG for an id not registered.
 */
hcomm_status_t hcomm_profiler_unregister(int id);

#ifdef __cplusplus
}
#endif

#endif
