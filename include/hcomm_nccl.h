/*
 * hcomm_nccl.h - reaching hcomm from a communicator made by hcomm's
 * libnccl.so.2, so that one program can mix NCCL calls with hcomm's own
 * (compressed allreduce, MoE dispatch, streams) on the same ranks and
 * connections. Link with -lnccl (hcomm's) and -lhcomm.
 */
#ifndef HCOMM_NCCL_H
#define HCOMM_NCCL_H

#include "hcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ncclComm;

/*
 * Sets *hc to the hcomm communicator that an NCCL communicator of hcomm's
 * libnccl.so.2 is (the same object). It stays owned by the NCCL side:
 * ncclCommDestroy destroys it; do not destroy it yourself.
 * HCOMM_ERR_INVALID_COMM for NULL or a handle this library did not make (a
 * destroyed one is undefined).
 */
hcomm_status_t hcomm_comm_from_nccl(struct ncclComm *comm, hcomm_comm_t *hc);

#ifdef __cplusplus
}
#endif

#endif
