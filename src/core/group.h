/* group.h - hcomm_group_start/end's state on the calling thread, and the
 * fusion of a group's calls on one communicator into one request (one
 * schedule, so the executor orders every peer's messages consistently). The
 * public calls, which also hand a group to its stream, are api/api_group.c. */
#ifndef HC_CORE_GROUP_H
#define HC_CORE_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/algo.h"
#include "hcomm.h"

/* One call queued in a group. */
typedef struct hc_group_call {
    hcomm_comm_t   comm;
    hc_coll_args_t args;
    const void    *sendbuf;
    void          *recvbuf;
    hcomm_stream_t stream;
    uint64_t       serial; /* comm's (hc_comm_serial): not one made at its address since */
} hc_group_call_t;

/* Whether the calling thread is inside a group: inline, every call asks. */
extern __thread int hc_group_depth __attribute__((visibility("hidden"), tls_model("initial-exec")));
static inline int   hc_group_active(void)
{
    return hc_group_depth > 0;
}
/* A call refused inside a group fails the whole group, as in NCCL: its end
 * runs none of the calls and returns the first refusal (call: its name). */
void           hc_group_refuse(hcomm_status_t st, const char *call);
hcomm_status_t hc_group_refused(const char **call);
/* Counts the outermost groups started on the calling thread: what a call
 * queued in a group keeps alive lasts until the epoch changes. */
unsigned long hc_group_epoch(void);
/* A start; an end: 1 when it closed the outermost group (whose calls are
 * then to be issued), 0 when a group is still open, -1 (logged) when none was. */
void          hc_group_enter(void);
int           hc_group_leave(void);

hcomm_status_t hc_group_add(hcomm_comm_t comm, const hc_coll_args_t *args, const void *sendbuf,
                            void *recvbuf, hcomm_stream_t stream);
/* The calls the group queued, until hc_group_reset. */
const hc_group_call_t *hc_group_calls(size_t *n);
/* Drops the queued calls whose communicator was destroyed or aborted since
 * (a new one may live at its address); how many. */
size_t                 hc_group_drop_stale(void);
void                   hc_group_reset(void);

/* Fuses comm's calls of the group into one request and queues it on comm
 * (gated: for a stream); comm's lock held. */
hcomm_status_t hc_group_issue_comm(hcomm_comm_t comm, int gated, hcomm_request_t *req_p);

#endif
