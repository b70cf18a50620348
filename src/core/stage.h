/* stage.h - buffers of other memory kinds (device/device.h) through host
 * memory: a collective whose buffers are not host memory runs on host copies
 * of them; its input is copied in when it starts, its output out when it
 * ends, before the caller can see it done. Whole buffers, one copy each way;
 * copies chunk by chunk against the transfers are the next step. */
#ifndef HC_CORE_STAGE_H
#define HC_CORE_STAGE_H

#include <stddef.h>

#include "algorithms/algo.h"

typedef struct hc_stage {
    char       *host;   /* the host copies, one block */
    const void *dev_in; /* copied into host_in at the start; NULL: nothing */
    void       *host_in;
    size_t      in_bytes;
    void       *dev_out; /* host_out is copied here at the end; NULL: nothing */
    const void *host_out;
    size_t      out_bytes;
} hc_stage_t;

/* The stage args' buffers need on rank of nranks, with *sendbuf and *recvbuf
 * turned into its host copies; *out NULL when both are host memory (one load
 * each). HCOMM_ERR_UNSUPPORTED for alltoallv, HCOMM_ERR_NO_MEMORY; logged. */
hcomm_status_t hc_stage_begin(const hc_coll_args_t *a, int rank, int nranks, const void **sendbuf,
                              void **recvbuf, hc_stage_t **out);

hcomm_status_t hc_stage_in(const hc_stage_t *s);
hcomm_status_t hc_stage_out(const hc_stage_t *s);
void           hc_stage_free(hc_stage_t *s);

#endif
