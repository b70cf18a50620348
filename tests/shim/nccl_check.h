/* nccl_check.h - what the files of nccl_check share: the rank, the failure
 * count, the check macros and the checks each file runs (nccl_check.c). */
#ifndef NCCL_CHECK_H
#define NCCL_CHECK_H

#include <stdio.h>

#include "hcomm_nccl.h"
#include "nccl.h"

extern int rank, nranks, failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " [last error: %s]\n", ncclGetLastError(NULL));                        \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)
#define NCCLOK(call)                                                                               \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        CHECK(r_ == ncclSuccess, "%s -> %s", #call, ncclGetErrorString(r_));                       \
    } while (0)

/* Collectives (nccl_check_coll.c): every collective x dtype x op of n
 * elements against serial references, a send/recv ring, PreMulSum, calls on
 * CUDA streams. */
void check_collectives(ncclComm_t comm, size_t n);
void check_ring(ncclComm_t comm, size_t n);
void check_premul(ncclComm_t comm);
void check_streams(ncclComm_t comm);

/* Communicators and errors (nccl_check_comm.c). */
void check_split(ncclComm_t comm);
void check_shrink(ncclComm_t comm);
void check_bridge(ncclComm_t comm);
void check_revoke(ncclComm_t comm);
void check_group_errors(ncclComm_t comm);
void check_errors(ncclComm_t comm);
/* NCCL_CHECK_DEAD_RANK: the last rank exits after init, the others shrink it
 * away; the process's exit status. */
int run_dead_rank(ncclComm_t comm);

#endif
