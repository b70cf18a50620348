/* stage.h - buffers of other memory kinds (device/device.h) through host
 * memory: a collective, or a group's calls, whose buffers are not host
 * memory runs on host copies of them. Its input is copied in from its start,
 * HC_STAGE_CHUNK bytes per progress call, and a step waits only for the part
 * it touches (hc_stage_ready), so the first transfers go while the rest comes
 * in; its output is copied out whole at the end, before the caller can see it
 * done. */
#ifndef HC_CORE_STAGE_H
#define HC_CORE_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/algo.h"
#include "device/device.h"

/* Input copied in per progress call: a step on its first chunk can go after
 * one chunk's copy rather than the whole buffer's. */
#define HC_STAGE_CHUNK ((size_t)1 << 20)

/* One buffer's part and its host copy. */
typedef struct hc_stage_seg {
    char  *dev; /* the caller's */
    char  *host;
    size_t bytes;
} hc_stage_seg_t;

typedef struct hc_stage {
    char       *host; /* the host copies, one block of size bytes */
    size_t      size;
    int         pinned;    /* host is pinned for a device (hc_mem_host_pin) */
    const void *user_send; /* the caller's buffers (one call), for the profiler hooks */
    void       *user_recv;
    /* the input: segments copied in, in order, to one run of the block from
     * host_in, in_done bytes of in_bytes so far */
    char           *host_in;
    size_t          in_bytes;
    size_t          in_done;
    int             nin, nout;
    hc_stage_seg_t *in, *out; /* out: copied out at the end */
    hc_stage_seg_t  seg[];
} hc_stage_t;

struct hcomm_comm;

/* The stage n calls' buffers need on c's rank (args[i] with sendbufs[i] and
 * recvbufs[i]), with each buffer turned into its host copy; *out NULL when
 * all are host memory. HCOMM_ERR_UNSUPPORTED for alltoallv,
 * HCOMM_ERR_NO_MEMORY; logged. */
hcomm_status_t hc_stage_begin_calls(struct hcomm_comm *c, size_t n,
                                    const hc_coll_args_t *const *args, const void **sendbufs,
                                    void **recvbufs, hc_stage_t **out);

/* The stage args' buffers need on c's rank, with *sendbuf and *recvbuf
 * turned into its host copies; *out NULL when both are host memory (two
 * loads in a process without other kinds: inline). HCOMM_ERR_UNSUPPORTED for
 * alltoallv, HCOMM_ERR_NO_MEMORY; logged. */
static inline hcomm_status_t hc_stage_begin(struct hcomm_comm *c, const hc_coll_args_t *a,
                                            const void **sendbuf, void **recvbuf, hc_stage_t **out)
{
    *out = NULL;
    if (!hc_mem_maybe_other())
        return HCOMM_SUCCESS;
    return hc_stage_begin_calls(c, 1, &a, sendbuf, recvbuf, out);
}

/* Copies the input's next chunk in; HCOMM_SUCCESS also when all is in. */
hcomm_status_t hc_stage_in_next(hc_stage_t *s);

/* Whether [p, p + len) may be read or written now: none of it lies in the
 * part of the input's host copy not yet copied in. */
static inline int hc_stage_ready(const hc_stage_t *s, const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)s->host_in, hi = lo + s->in_bytes;
    if (s->in_done == s->in_bytes || len == 0 || a + len <= lo || a >= hi)
        return 1;
    return (a + len < hi ? a + len : hi) <= lo + s->in_done;
}

hcomm_status_t hc_stage_out(const hc_stage_t *s);
/* Frees s; its host block is kept as c's spare when it is the largest yet
 * (the next call of that size then touches no new pages); c NULL: freed. */
void hc_stage_free(struct hcomm_comm *c, hc_stage_t *s);
/* Frees c's spare block and the pinned blocks it gave up (hc_comm_free,
 * once its streams' work is done). */
void hc_stage_spare_free(struct hcomm_comm *c);

#endif
