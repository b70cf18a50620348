/*
 * hcomm_stream.h - streams, events and host functions: overlap communication
 * with compute the way CUDA programs do (docs/streams.md).
 *
 * A stream is an ordered queue of work run by a thread of its own: collectives
 * and point-to-point calls given the stream, host functions, event records and
 * event waits, each starting when the one before it has finished. Different
 * streams run concurrently. An operation on a communicator additionally starts
 * only after the operations issued before it on that communicator (any
 * stream, or none), so every rank must issue them in the same order, exactly
 * as with blocking calls.
 */
#ifndef HCOMM_STREAM_H
#define HCOMM_STREAM_H

#include "hcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hcomm_event *hcomm_event_t;
typedef void (*hcomm_host_fn_t)(void *arg);

/** Creates a stream and starts its thread. */
hcomm_status_t hcomm_stream_create(hcomm_stream_t *stream);

/*
 * A stream whose work is also ordered with a CUDA stream (a cudaStream_t,
 * passed as void *): each operation, host function or event on it starts after
 * the work queued on the CUDA stream before it, and the CUDA stream's later
 * work waits until it has finished (a host function on the CUDA stream
 * brackets it). Buffers are host memory (pinned for speed). Each wait is
 * bounded by HCOMM_TIMEOUT: work the CUDA stream has not reached by then
 * fails, and work still running then lets the CUDA stream go on and fails
 * the stream (HCOMM_ERR_TIMEOUT). Only in builds where configure found CUDA;
 * elsewhere HCOMM_ERR_UNSUPPORTED.
 */
hcomm_status_t hcomm_stream_create_cuda(void *cuda_stream, hcomm_stream_t *stream);

/*
 * Waits for the work queued on the stream (at most HCOMM_TIMEOUT without any
 * of it finishing), then stops its thread and frees it. Returns the stream's
 * error, as hcomm_stream_synchronize would. Any later call with the handle
 * (or one never created) gets HCOMM_ERR_INVALID_ARG; the same holds for events.
 * A launch racing the destroy on another thread is either run before the
 * stream goes or refused. From a host function on the stream itself:
 * HCOMM_ERR_INVALID_USAGE (it would wait for itself), as for synchronize.
 */
hcomm_status_t hcomm_stream_destroy(hcomm_stream_t stream);

/*
 * Waits until everything queued on the stream before this call has finished;
 * returns the first error any of its work had since the stream was created
 * (sticky, as in CUDA), HCOMM_SUCCESS otherwise, or HCOMM_ERR_TIMEOUT when no
 * queued work finished for HCOMM_TIMEOUT. From a host function on the stream
 * itself: HCOMM_ERR_INVALID_USAGE.
 */
hcomm_status_t hcomm_stream_synchronize(hcomm_stream_t stream);

/** HCOMM_SUCCESS when all queued work has finished, HCOMM_IN_PROGRESS while
 * some is pending, or the stream's first error. Never blocks. */
hcomm_status_t hcomm_stream_query(hcomm_stream_t stream);

/*
 * A request for the last communication operation queued on the stream, to
 * hcomm_test / hcomm_wait like a nonblocking call's: its status is that
 * operation's own. HCOMM_ERR_INVALID_USAGE if the stream has none, or its last
 * one was already requested. The request is the caller's as a nonblocking
 * call's is: the communicator's destroy does not wait for it, and a wait or
 * test after the destroy still ends it (leaving it unwaited leaks it).
 */
hcomm_status_t hcomm_stream_last_request(hcomm_stream_t stream, hcomm_request_t *req);

/** Queues fn(arg), run on the stream's thread in stream order (a program's
 * own compute, in CUDA's cudaLaunchHostFunc manner). fn must not block on work
 * queued after it on the same stream. */
hcomm_status_t hcomm_launch_host_func(hcomm_stream_t stream, hcomm_host_fn_t fn, void *arg);

hcomm_status_t hcomm_event_create(hcomm_event_t *event);
/** Frees an event; work waiting for it still sees it complete when recorded. */
hcomm_status_t hcomm_event_destroy(hcomm_event_t event);

/** Captures the stream's work queued so far: the event completes when it has run. */
hcomm_status_t hcomm_event_record(hcomm_event_t event, hcomm_stream_t stream);

/** Work queued on stream after this call waits until the event's last record
 * (as of this call) completes; an event never recorded is complete. A wait
 * longer than HCOMM_TIMEOUT fails the stream (HCOMM_ERR_TIMEOUT), and the
 * operations queued behind it by then fail their communicators instead of
 * running on buffers that may not be ready; host functions still run. */
hcomm_status_t hcomm_stream_wait_event(hcomm_stream_t stream, hcomm_event_t event);

/** HCOMM_SUCCESS if the last record completed, HCOMM_IN_PROGRESS if not. */
hcomm_status_t hcomm_event_query(hcomm_event_t event);

/** Waits for the last record (at most HCOMM_TIMEOUT): HCOMM_SUCCESS or HCOMM_ERR_TIMEOUT. */
hcomm_status_t hcomm_event_synchronize(hcomm_event_t event);

#ifdef __cplusplus
}
#endif
#endif /* HCOMM_STREAM_H */
