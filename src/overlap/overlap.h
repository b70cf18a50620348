/* overlap.h - streams (stream.c) and events (event.c) as the floors above see
 * them: a collective issued on a stream is queued on its communicator behind
 * a closed gate (core/handles.h) and handed to the stream as a task, which
 * opens the gate when the stream reaches it and waits for the request on the
 * stream's thread. */
#ifndef HC_OVERLAP_H
#define HC_OVERLAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/handles.h"
#include "hcomm_stream.h"

typedef struct hc_stream_task hc_stream_task_t;

/* Logs and returns why stream cannot take work (NULL, destroyed or never
 * created: HCOMM_ERR_INVALID_ARG), or HCOMM_SUCCESS. Looks the handle up in
 * the registry of live streams; reads nothing through it. */
hcomm_status_t hc_stream_check(hcomm_stream_t stream, const char *what);
/* As hc_stream_check, for a call that will queue a task: on success the
 * stream is entered, and hcomm_stream_destroy waits (HCOMM_TIMEOUT at most)
 * until hc_stream_push, or hc_stream_leave when the call queues nothing after
 * all, leaves it. Between the two the caller may not wait for the stream. */
hcomm_status_t hc_stream_enter(hcomm_stream_t stream, const char *what);
void           hc_stream_leave(hcomm_stream_t stream);

/* A task for nreqs requests (a group's run together), allocated before they
 * are queued so that queuing them cannot fail half-way; NULL when out of memory. */
hc_stream_task_t *hc_stream_task_requests(size_t nreqs);
void              hc_stream_task_set_request(hc_stream_task_t *t, size_t i, hcomm_request_t req);
void              hc_stream_task_shrink(hc_stream_task_t *t, size_t nreqs); /* fewer filled */
void              hc_stream_task_free(hc_stream_task_t *t);              /* NULL allowed */

/* Queues a filled task (the caller entered the stream: hc_stream_enter) and
 * leaves the stream; the stream owns the task from here. */
void hc_stream_push(hcomm_stream_t stream, hc_stream_task_t *t);

/* Drops the holds streams keep on comm's requests for
 * hcomm_stream_last_request, so that destroying comm waits only for requests
 * still running (api/api_comm.c). */
void hc_stream_forget_comm(hcomm_comm_t comm);

/* hcomm_stream_synchronize's wait; *stuck: no queued work finished within
 * HCOMM_TIMEOUT (the thread may still be inside a task), which a task failed
 * with HCOMM_ERR_TIMEOUT does not set. */
hcomm_status_t hc_stream_sync(hcomm_stream_t stream, int *stuck);

/* How many of stream's tasks have failed, and the latest one's status (last
 * may be NULL); from any thread, a host function on the stream too. */
uint64_t hc_stream_failures(hcomm_stream_t stream, hcomm_status_t *last);

/* A host function whose failure (a status other than success) becomes the
 * stream's error: the library's own steps between collectives. When a CUDA
 * stream never reaches it, fn(arg, 1) still runs, in its turn, to release
 * what it holds (skip: do nothing else). */
hcomm_status_t hc_stream_launch_step(hcomm_stream_t stream, hcomm_status_t (*fn)(void *, int),
                                     void          *arg);

/* CUDA (stream_cuda.c, or stubs without CUDA): whether the runtime is there
 * (else *why says why not), and queuing fn(arg) as a host function on a
 * cudaStream_t: 0, or -1 (logged). */
int hc_stream_cuda_available(const char **why);
int hc_stream_cuda_bracket(void *cuda_stream, void (*fn)(void *), void *arg);
/* The CUDA stream's unique id (handles are reused after cudaStreamDestroy): 0,
 * or -1 with *why set to CUDA's reason. */
int hc_cuda_stream_id(void *cuda_stream, unsigned long long *id, const char **why);

/* Events, for the stream's thread (event.c). A record is one hcomm_event_record;
 * it completes on its own, so a wait depends on the exact record it captured. */
typedef struct hcomm_event  hc_event_t;
typedef struct hc_event_rec hc_event_rec_t;
/* As hc_stream_check, for an event the user holds (created, not destroyed). */
hcomm_status_t hc_event_check(hcomm_event_t ev, const char *what);
void hc_event_ref(hc_event_t *ev);
void hc_event_unref(hc_event_t *ev);
/* A new latest record, with a reference for the caller; NULL (logged) when out of memory. */
hc_event_rec_t *hc_event_new_record(hc_event_t *ev);
/* The latest record with a reference for the caller, or NULL: never recorded. */
hc_event_rec_t *hc_event_capture(hc_event_t *ev);
void hc_event_release(hc_event_t *ev, hc_event_rec_t *r);  /* drops the caller's reference */
void hc_event_complete(hc_event_t *ev, hc_event_rec_t *r); /* r has run; drops the reference */
/* Waits until r has run (NULL: at once), at most timeout seconds: 0, or -1 on timeout. */
int hc_event_wait(hc_event_t *ev, hc_event_rec_t *r, double timeout);

#endif
