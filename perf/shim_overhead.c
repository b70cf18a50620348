/*
 * shim_overhead.c - what libnccl.so.2 adds to a call, measured inside one
 * process pair on one communicator, so that neither where mpirun placed the
 * ranks nor which communicator got which resources counts: each rank makes an
 * NCCL communicator (the shim), takes the hcomm communicator it is
 * (hcomm_nccl.h), and times blocks of allreduces through one API and then the
 * other, ROUNDS times per size, keeping the fastest block of each.
 *   mpirun -np 2 perf/shim_overhead [-b 8] [-e 64M] [-f 8] [-n 200] [-r 9] [-c]
 * Prints per size: hcomm (us), shim (us), the ratio of those fastest blocks,
 * and the median over rounds of each round's own shim / hcomm ratio (which a
 * lucky block of one API cannot sway).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hcomm.h"
#include "hcomm_nccl.h"
#include "nccl.h"
#include "perf_size.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Mean microseconds of n allreduces of count floats through one API. */
static int control; /* -c: both columns through hcomm, to show the noise floor */

static double block_us(int shim, ncclComm_t nc, hcomm_comm_t hc, float *s, float *r,
                       size_t count, int n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        int ok = shim && !control
                     ? ncclAllReduce(s, r, count, ncclFloat32, ncclSum, nc, NULL) == ncclSuccess
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
    int               n = 200, rounds = 9, rank, nranks, c, bad = 0;
    ncclUniqueId      nid;
    ncclComm_t        nc;
    hcomm_comm_t      hc;

    while ((c = getopt(argc, argv, "b:e:f:n:r:c")) != -1) {
        switch (c) {
        case 'b': bad |= perf_parse_size(optarg, &minb); break;
        case 'e': bad |= perf_parse_size(optarg, &maxb); break;
        case 'f': bad |= perf_parse_size(optarg, &factor); break;
        case 'n': n = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 'c': control = 1; break;
        default: fprintf(stderr, "usage: shim_overhead [-b B] [-e B] [-f F] [-n N] [-r R] [-c]\n"); return 2;
        }
    }
    if (bad || minb < 4 || maxb < minb || factor < 2 || n < 1 || rounds < 1)
        return 2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0 && ncclGetUniqueId(&nid) != ncclSuccess)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Bcast(&nid, sizeof(nid), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (ncclCommInitRank(&nc, nranks, nid, rank) != ncclSuccess ||
        hcomm_comm_from_nccl(nc, &hc) != HCOMM_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 2);
    float *s = calloc(1, maxb), *r = calloc(1, maxb);
    if (s == NULL || r == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 0)
        printf("# shim_overhead%s: %d ranks, allreduce float32, blocks of %d, fastest of %d "
               "alternating rounds\n#%11s %12s %12s %12s %12s\n",
               control ? " (control: hcomm in both columns)" : "", nranks, n, rounds, "size(B)",
               "hcomm(us)", "shim(us)", "shim/hcomm", "median");
    double *ratio = calloc((size_t)rounds, sizeof(*ratio));
    if (ratio == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t b = minb; b <= maxb; b *= factor) {
        double best[2] = {1e30, 1e30};
        for (int k = 0; k < 2; k++) /* warm both */
            block_us(k, nc, hc, s, r, b / 4, n / 10 + 1);
        for (int round = 0; round < rounds; round++) {
            double t[2];
            for (int k = 0; k < 2; k++) {
                int w = (k + round) % 2; /* each API goes first every other round */
                t[w]  = block_us(w, nc, hc, s, r, b / 4, n);
                best[w] = t[w] < best[w] ? t[w] : best[w];
            }
            ratio[round] = t[1] / t[0];
        }
        qsort(ratio, (size_t)rounds, sizeof(*ratio), cmp_double);
        if (rank == 0)
            printf(" %11zu %12.3f %12.3f %12.3f %12.3f\n", b, best[0], best[1], best[1] / best[0],
                   ratio[rounds / 2]);
        if (b > maxb / factor)
            break;
    }
    free(ratio);
    ncclCommDestroy(nc); /* and hc with it */
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
