/*
 * nccl_perf.c - allreduce timed through the NCCL API (libnccl.so.2, hcomm's
 * drop-in) under mpirun, the way nccl-tests times it; built again with
 * -DNCCL_PERF_DIRECT as nccl_perf_direct, the same loop on hcomm's own API, so
 * that perf/shim_bench.sh measures what the shim alone costs. Host buffers,
 * NULL stream. Prints "size time_us" per size (out of place, float32 sum,
 * time averaged over the ranks).
 *   mpirun -np 2 perf/nccl_perf [-b 8] [-e 64M] [-f 8] [-n 20] [-w 3]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_size.h"

#ifdef NCCL_PERF_DIRECT
#include "hcomm.h"
typedef hcomm_unique_id_t perf_id_t;
typedef hcomm_comm_t      perf_comm_t;
#define PERF_API "hcomm"
#define get_id(id) (hcomm_get_unique_id(id) == HCOMM_SUCCESS)
#define comm_init(c, n, id, r) (hcomm_comm_init(c, n, &(id), r) == HCOMM_SUCCESS)
#define allreduce(s, r, n, c) \
    (hcomm_allreduce(s, r, n, HCOMM_FLOAT32, HCOMM_SUM, c, NULL) == HCOMM_SUCCESS)
#define comm_destroy(c) hcomm_comm_destroy(c)
#else
#include "nccl.h"
typedef ncclUniqueId perf_id_t;
typedef ncclComm_t   perf_comm_t;
#define PERF_API "nccl"
#define get_id(id) (ncclGetUniqueId(id) == ncclSuccess)
#define comm_init(c, n, id, r) (ncclCommInitRank(c, n, id, r) == ncclSuccess)
#define allreduce(s, r, n, c) (ncclAllReduce(s, r, n, ncclFloat32, ncclSum, c, NULL) == ncclSuccess)
#define comm_destroy(c) ncclCommDestroy(c)
#endif

int main(int argc, char **argv)
{
    size_t       minb = 8, maxb = 64 << 20, factor = 8;
    int          iters = 20, warmup = 3, rank, nranks, c, bad = 0;
    perf_id_t    id;
    perf_comm_t  comm;

    while ((c = getopt(argc, argv, "b:e:f:n:w:")) != -1) {
        switch (c) {
        case 'b': bad |= perf_parse_size(optarg, &minb); break;
        case 'e': bad |= perf_parse_size(optarg, &maxb); break;
        case 'f': bad |= perf_parse_size(optarg, &factor); break;
        case 'n': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        default: fprintf(stderr, "usage: nccl_perf [-b B] [-e B] [-f F] [-n N] [-w W]\n"); return 2;
        }
    }
    if (bad || minb < 4 || maxb < minb || factor < 2 || iters < 1 || warmup < 0) {
        fprintf(stderr, "nccl_perf: bad sizes or counts\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0 && !get_id(&id))
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (!comm_init(&comm, nranks, id, rank)) {
        fprintf(stderr, "nccl_perf: communicator init failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *s = malloc(maxb), *r = malloc(maxb);
    if (s == NULL || r == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(s, 0, maxb);
    memset(r, 0, maxb);
    if (rank == 0)
        printf("# nccl_perf (%s API) allreduce float32 sum, %d ranks, out of place; "
               "size(B) time(us)\n", PERF_API, nranks);
    for (size_t b = minb; b <= maxb; b *= factor) {
        size_t count = b / sizeof(float);
        for (int i = 0; i < warmup; i++)
            (void)allreduce(s, r, count, comm);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            if (!allreduce(s, r, count, comm))
                MPI_Abort(MPI_COMM_WORLD, 1);
        double us = (MPI_Wtime() - t0) / iters * 1e6, sum;
        MPI_Allreduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%12zu %12.2f\n", b, sum / nranks);
        if (b > maxb / factor)
            break;
    }
    comm_destroy(comm);
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
