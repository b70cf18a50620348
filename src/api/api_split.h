/* api_split.h - what the NCCL shim asks of hcomm_comm_shrink before it
 * commits to one (api_split.c). */
#ifndef HC_API_SPLIT_H
#define HC_API_SPLIT_H

#include "hcomm.h"

/* Whether hcomm_comm_shrink would take these arguments from this rank: the
 * list, the call outside a group, this rank not excluded. Logs and returns
 * why not; HCOMM_SUCCESS. Nothing is sent. */
hcomm_status_t hc_comm_shrink_check(hcomm_comm_t comm, const int *exclude, int nexclude,
                                    hcomm_comm_t *newcomm);

#endif
