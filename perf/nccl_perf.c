/*
 * nccl_perf.c - allreduce timed through the NCCL API (libnccl.so.2, hcomm's
 * drop-in) under mpirun, the way nccl-tests times it, to compare with
 * hcomm-perf on the same ranks (perf/shim_bench.sh). Host buffers, NULL
 * stream. Prints "size time_us" per size (out of place, float32 sum, time
 * averaged over the ranks).
 *   mpirun -np 2 perf/nccl_perf [-b 8] [-e 64M] [-f 8] [-n 20] [-w 3]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"

static size_t parse_size(const char *s)
{
    char  *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    else if (*end == 'G' || *end == 'g')
        v <<= 30;
    return v;
}

int main(int argc, char **argv)
{
    size_t       minb = 8, maxb = 64 << 20, factor = 8;
    int          iters = 20, warmup = 3, rank, nranks, c;
    ncclUniqueId id;
    ncclComm_t   comm;

    while ((c = getopt(argc, argv, "b:e:f:n:w:")) != -1) {
        switch (c) {
        case 'b': minb = parse_size(optarg); break;
        case 'e': maxb = parse_size(optarg); break;
        case 'f': factor = parse_size(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        default: fprintf(stderr, "usage: nccl_perf [-b B] [-e B] [-f F] [-n N] [-w W]\n"); return 2;
        }
    }
    if (minb < 4 || maxb < minb || factor < 2 || iters < 1 || warmup < 0) {
        fprintf(stderr, "nccl_perf: bad sizes or counts\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
        fprintf(stderr, "nccl_perf: ncclCommInitRank: %s\n", ncclGetLastError(NULL));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *s = malloc(maxb), *r = malloc(maxb);
    if (s == NULL || r == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(s, 0, maxb);
    memset(r, 0, maxb);
    if (rank == 0)
        printf("# nccl_perf allreduce float32 sum, %d ranks, out of place; size(B) time(us)\n",
               nranks);
    for (size_t b = minb; b <= maxb; b *= factor) {
        size_t count = b / sizeof(float);
        for (int i = 0; i < warmup; i++)
            ncclAllReduce(s, r, count, ncclFloat32, ncclSum, comm, NULL);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            if (ncclAllReduce(s, r, count, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
                MPI_Abort(MPI_COMM_WORLD, 1);
        double us = (MPI_Wtime() - t0) / iters * 1e6, sum;
        MPI_Allreduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%12zu %12.2f\n", b, sum / nranks);
        if (b > maxb / factor)
            break;
    }
    ncclCommDestroy(comm);
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
