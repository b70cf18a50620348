/*
 * shim_overhead.c - what libnccl.so.2 adds to a call, measured inside one
 * process pair so that where mpirun placed the ranks cancels out: each rank
 * holds an NCCL communicator (the shim) and an hcomm communicator over the
 * same ranks, and times blocks of allreduces through one and then the other,
 * ROUNDS times per size, keeping the fastest block of each.
 *   mpirun -np 2 perf/shim_overhead [-b 8] [-e 64M] [-f 8] [-n 200] [-r 9]
 * Prints per size: hcomm (us), shim (us), shim / hcomm.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hcomm.h"
#include "nccl.h"

static size_t parse_size(const char *s)
{
    char  *end;
    size_t v = strtoull(s, &end, 10);
    return *end == 'K' ? v << 10 : *end == 'M' ? v << 20 : v;
}

/* Mean microseconds of n allreduces of count floats through one API. */
static double block_us(int shim, ncclComm_t nc, hcomm_comm_t hc, float *s, float *r,
                       size_t count, int n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        int ok = shim ? ncclAllReduce(s, r, count, ncclFloat32, ncclSum, nc, NULL) == ncclSuccess
                      : hcomm_allreduce(s, r, count, HCOMM_FLOAT32, HCOMM_SUM, hc, NULL) ==
                            HCOMM_SUCCESS;
        if (!ok)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double us = (MPI_Wtime() - t0) / n * 1e6, max;
    MPI_Allreduce(&us, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

int main(int argc, char **argv)
{
    size_t            minb = 8, maxb = 64 << 20, factor = 8;
    int               n = 200, rounds = 9, rank, nranks, c;
    ncclUniqueId      nid;
    hcomm_unique_id_t hid;
    ncclComm_t        nc;
    hcomm_comm_t      hc;

    while ((c = getopt(argc, argv, "b:e:f:n:r:")) != -1) {
        switch (c) {
        case 'b': minb = parse_size(optarg); break;
        case 'e': maxb = parse_size(optarg); break;
        case 'f': factor = parse_size(optarg); break;
        case 'n': n = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        default: fprintf(stderr, "usage: shim_overhead [-b B] [-e B] [-f F] [-n N] [-r R]\n"); return 2;
        }
    }
    if (minb < 4 || maxb < minb || factor < 2 || n < 1 || rounds < 1)
        return 2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0 && (ncclGetUniqueId(&nid) != ncclSuccess || hcomm_get_unique_id(&hid) != 0))
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Bcast(&nid, sizeof(nid), MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&hid, sizeof(hid), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (ncclCommInitRank(&nc, nranks, nid, rank) != ncclSuccess ||
        hcomm_comm_init(&hc, nranks, &hid, rank) != HCOMM_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 2);
    float *s = calloc(1, maxb), *r = calloc(1, maxb);
    if (s == NULL || r == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 0)
        printf("# shim_overhead: %d ranks, allreduce float32, blocks of %d, fastest of %d "
               "alternating rounds\n#%11s %12s %12s %12s\n", nranks, n, rounds, "size(B)",
               "hcomm(us)", "shim(us)", "shim/hcomm");
    for (size_t b = minb; b <= maxb; b *= factor) {
        double best[2] = {1e30, 1e30};
        for (int k = 0; k < 2; k++) /* warm both */
            block_us(k, nc, hc, s, r, b / 4, n / 10 + 1);
        for (int round = 0; round < rounds; round++)
            for (int k = 0; k < 2; k++) {
                double t = block_us((k + round) % 2, nc, hc, s, r, b / 4, n);
                int    w = (k + round) % 2;
                best[w]  = t < best[w] ? t : best[w];
            }
        if (rank == 0)
            printf(" %11zu %12.3f %12.3f %12.3f\n", b, best[0], best[1], best[1] / best[0]);
        if (b > maxb / factor)
            break;
    }
    ncclCommDestroy(nc);
    hcomm_comm_destroy(hc);
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
