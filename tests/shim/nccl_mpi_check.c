/*
 * nccl_mpi_check - an NCCL program as users write one under mpirun: MPI gives
 * rank and size, rank 0's ncclUniqueId goes out with MPI_Bcast, and the
 * collectives then run through libnccl.so.2 (hcomm) with MPI for bootstrap
 * only. Checks an allreduce, a broadcast and an allgather exactly.
 * Exit: 0 all passed, 1 a check failed, 2 set-up failure.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"

#define N 4099

int main(int argc, char **argv)
{
    int          rank, nranks, bad = 0;
    ncclUniqueId id;
    ncclComm_t   comm;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *x = malloc(N * sizeof(float)), *all = malloc((size_t)nranks * N * sizeof(float));
    for (int i = 0; i < N; i++)
        x[i] = (float)(rank + 1) + (float)(i % 13);
    bad += ncclAllReduce(x, x, N, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess;
    for (int i = 0; i < N; i++)
        bad += x[i] != (float)(nranks * (nranks + 1) / 2) + (float)nranks * (float)(i % 13);
    for (int i = 0; i < N; i++)
        x[i] = rank == 1 % nranks ? (float)i : -1.0f;
    bad += ncclBroadcast(x, x, N, ncclFloat32, 1 % nranks, comm, NULL) != ncclSuccess;
    for (int i = 0; i < N; i++)
        bad += x[i] != (float)i;
    for (int i = 0; i < N; i++)
        x[i] = (float)(rank * N + i);
    bad += ncclAllGather(x, all, N, ncclFloat32, comm, NULL) != ncclSuccess;
    for (int i = 0; i < nranks * N; i++)
        bad += all[i] != (float)i;
    ncclCommDestroy(comm);
    printf("nccl_mpi_check rank %d of %d: %d wrong\n", rank, nranks, bad);
    free(x);
    free(all);
    MPI_Finalize();
    return bad != 0;
}
