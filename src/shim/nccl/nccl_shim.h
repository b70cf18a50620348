/* nccl_shim.h - what the files of the NCCL shim share: the communicator
 * wrapper, error recording and the NCCL -> hcomm mappings. */
#ifndef HC_SHIM_NCCL_H
#define HC_SHIM_NCCL_H

#include "hcomm.h"
#include "nccl/nccl.h"

#define HC_NCCL_COMM_MAGIC 0x6e63636cu /* "nccl": catches stale or foreign handles */
#define HC_NCCL_MAX_PREMUL 64

/* One ncclRedOpCreatePreMulSum operator: sum after scaling by *scalar. */
typedef struct {
    int used;
    ncclDataType_t dtype;
    ncclScalarResidence_t residence;
    const void *scalar_ptr; /* read at each collective (ncclScalarDevice) */
    double scalar;          /* read once (ncclScalarHostImmediate) */
} hc_nccl_premul_t;

struct ncclComm {
    unsigned magic;
    hcomm_comm_t hc;
    int rank;
    int nranks;
    int revoked;
    hc_nccl_premul_t premul[HC_NCCL_MAX_PREMUL];
};

/* Records msg as the thread's last error and logs it; returns res. */
ncclResult_t hc_nccl_fail(ncclResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Maps an hcomm status, recording what failed in `what` when it is an error. */
ncclResult_t hc_nccl_status(hcomm_status_t st, const char *what);
/* Validates a communicator handle (not revoked). */
ncclResult_t hc_nccl_check_comm(ncclComm_t comm, const char *what);
ncclResult_t hc_nccl_dtype(ncclDataType_t dt, hcomm_dtype_t *out);
ncclResult_t hc_nccl_check_stream(cudaStream_t stream, const char *what);
/* Shim-level group depth of the calling thread (for temporary buffers). */
int hc_nccl_group_depth(void);
/* Frees the calling thread's temporaries once its outermost group ended. */
void hc_nccl_temps_release(void);

#endif
