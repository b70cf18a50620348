/* handles.h - communicators and requests as the floors above core (streams,
 * compression, MoE) use them: by handle, without their insides, which hold
 * transports. Each function takes the communicator's lock where it needs it,
 * so any thread may call it. */
#ifndef HC_CORE_HANDLES_H
#define HC_CORE_HANDLES_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"

/* Whether comm is a live communicator (not NULL, destroyed or foreign). A
 * thread that found the same communicator live, with no communicator made or
 * destroyed since (the registry's generation), needs no search: inline, as
 * every call asks. */
extern unsigned long         hc_registry_gen __attribute__((visibility("hidden"))); /* __atomic_* */
extern __thread hcomm_comm_t hc_registry_last
    __attribute__((visibility("hidden"), tls_model("initial-exec")));
extern __thread unsigned long hc_registry_last_gen
    __attribute__((visibility("hidden"), tls_model("initial-exec")));
int hc_comm_is_live_search(hcomm_comm_t comm);

static inline int hc_comm_is_live(hcomm_comm_t comm)
{
    if (comm != NULL && comm == hc_registry_last &&
        __atomic_load_n(&hc_registry_gen, __ATOMIC_SEQ_CST) == hc_registry_last_gen)
        return 1;
    return hc_comm_is_live_search(comm);
}
/* Validates comm for a new operation: live, not failed. Logs (naming what)
 * and returns why not. */
hcomm_status_t hc_comm_check(hcomm_comm_t comm, const char *what);
/* rank and size of a live communicator. */
int hc_comm_rank(hcomm_comm_t comm);
int hc_comm_nranks(hcomm_comm_t comm);
/* A number no other communicator of this process had or will have: state
 * tied to comm (compression) tells it from one created at comm's freed
 * address. */
uint64_t hc_comm_serial(hcomm_comm_t comm);
/* Records status as comm's error (the first one sticks) and closes its
 * transports, so that its peers get an error at once instead of waiting. */
void hc_comm_set_failed(hcomm_comm_t comm, hcomm_status_t status);
/* For the calling thread from now on: where a wait would yield the CPU, it
 * naps instead. For threads that progress in the background (a stream's): a
 * yielding thread still takes its share of a core from the compute beside it
 * (a DDP backward pass). */
void hc_comm_idle_nap_thread(void);

/* A request queued for a stream waits behind a closed gate until the stream
 * reaches it; the stream holds it (its task, and its last-request slot), and
 * the last hold dropped recycles it unless the user has it. Communicator
 * destroy waits for these holds, not for the user's.
 * hc_request_give_user: a hold of the stream's becomes the user's
 * (hcomm_stream_last_request): one more request of the user's, which
 * hcomm_wait/hcomm_test end, and which outlives its communicator as any. */
void            hc_request_open_gate(hcomm_request_t req);
void            hc_request_hold(hcomm_request_t req);
void            hc_request_drop(hcomm_request_t req);
void            hc_request_give_user(hcomm_request_t req);
hcomm_status_t  hc_request_status(hcomm_request_t req); /* HCOMM_IN_PROGRESS until done */
hcomm_comm_t    hc_request_comm(hcomm_request_t req);
/* Progresses req's communicator until req is done (it fails after
 * HCOMM_TIMEOUT without progress); its status. */
hcomm_status_t  hc_request_wait(hcomm_request_t req);
/* The same for n requests of one or several communicators that may depend on
 * each other, progressed together; their statuses stay in them. */
void            hc_requests_wait(hcomm_request_t const *reqs, size_t n);

#endif
