/* nccl_check.c - checks hcomm's libnccl.so.2 through the NCCL API only: every
 * collective x dtype x op against serial references, send/recv rings in a
 * group, PreMulSum, split, shrink, error paths, and hcomm calls on the
 * communicator behind an NCCL one (hcomm_nccl.h). Run under hcomm-run: rank and size
 * come from HCOMM_RANK / HCOMM_NRANKS; rank 0 publishes the ncclUniqueId in
 * the file named by NCCL_CHECK_ID_FILE. Built with NCCL_CHECK_MPI (as
 * nccl_check_mpi) it runs under mpirun instead: rank and size from MPI, the id
 * sent with MPI_Bcast, MPI used for nothing else. Also checks that every NCCL
 * name is bound straight to hcomm's implementation in libhcomm. Built with
 * NCCL_CHECK_CUDA (as nccl_check_cuda, linked to CUDA) it also runs calls on
 * CUDA streams where a GPU is usable, and says SKIP where none is. The
 * checks are in nccl_check_coll.c (collectives) and nccl_check_comm.c
 * (communicators, errors); this file runs them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT, dladdr */
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_check.h"
#ifdef NCCL_CHECK_MPI
#include <mpi.h>
#endif

int rank, nranks, failures;

#ifdef NCCL_CHECK_MPI
static int get_id(ncclUniqueId *id)
{
    int ok = rank != 0 || ncclGetUniqueId(id) == ncclSuccess;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (ok)
        MPI_Bcast(id, sizeof(*id), MPI_BYTE, 0, MPI_COMM_WORLD);
    return ok ? 0 : -1;
}
#else
/* The id in the file at path: made and written there when mine, else read. */
static int id_file(ncclUniqueId *id, const char *path, int mine)
{
    if (mine) {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (ncclGetUniqueId(id) != ncclSuccess || f == NULL || fwrite(id, sizeof(*id), 1, f) != 1 ||
            fclose(f) != 0 || rename(tmp, path) != 0)
            return -1;
        return 0;
    }
    for (int tries = 0; tries < 3000; tries++) { /* 30 s */
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            size_t got = fread(id, sizeof(*id), 1, f);
            fclose(f);
            if (got == 1)
                return 0;
        }
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    fprintf(stderr, "rank %d: no unique id in %s after 30 s\n", rank, path);
    return -1;
}

static int get_id(ncclUniqueId *id)
{
    const char *path = getenv("NCCL_CHECK_ID_FILE");
    if (path == NULL) {
        fprintf(stderr, "NCCL_CHECK_ID_FILE not set\n");
        return -1;
    }
    return id_file(id, path, rank == 0);
}

/* NCCL_CHECK_SCALABLE=S: ncclCommInitRankScalable with an id from every rank
 * (each calls ncclGetUniqueId, as NCCL asks), an allreduce, then S seconds
 * idle (run_shim.sh: past HCOMM_TIMEOUT, for the roots of the ids not used). */
static int run_scalable(double idle)
{
    const char *path = getenv("NCCL_CHECK_ID_FILE");
    ncclUniqueId *ids = calloc((size_t)nranks, sizeof(*ids));
    ncclComm_t comm = NULL;
    char name[4200];
    int v = 1, sum = 0;
    if (path == NULL || ids == NULL) {
        free(ids);
        return 1;
    }
    for (int r = 0; r < nranks; r++) {
        snprintf(name, sizeof(name), "%s.%d", path, r);
        if (id_file(&ids[r], name, r == rank) != 0) {
            free(ids);
            return 1;
        }
    }
    NCCLOK(ncclCommInitRankScalable(&comm, nranks, rank, nranks, ids, NULL));
    free(ids);
    if (comm == NULL)
        return 1;
    NCCLOK(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, NULL));
    CHECK(sum == nranks, "allreduce on a scalable-init communicator gave %d", sum);
    nanosleep(&(struct timespec){(time_t)idle, (long)((idle - (time_t)idle) * 1e9)}, NULL);
    NCCLOK(ncclCommDestroy(comm));
    printf("rank %d/%d: scalable %s (%d failures)\n", rank, nranks, failures ? "FAIL" : "PASS",
           failures);
    return failures ? 1 : 0;
}
#endif

/* Each NCCL name and its pncclXxx twin resolve to hcomm_nccl_Xxx in libhcomm:
 * a call goes straight into hcomm, with no wrapper in libnccl.so.2 between
 * (src/shim/nccl/nccl_names.c). A wrapper would give libnccl's address. */
static void check_binding(void)
{
    static const char *const names[] = {
#define HC_NCCL_API(name) #name,
#include "shim/nccl/nccl_api.def"
#undef HC_NCCL_API
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char nccl[64], pnccl[64], impl[64];
        snprintf(nccl, sizeof(nccl), "nccl%s", names[i]);
        snprintf(pnccl, sizeof(pnccl), "pnccl%s", names[i]);
        snprintf(impl, sizeof(impl), "hcomm_nccl_%s", names[i]);
        void   *f = dlsym(RTLD_DEFAULT, nccl), *p = dlsym(RTLD_DEFAULT, pnccl);
        void   *h = dlsym(RTLD_DEFAULT, impl);
        Dl_info info;
        CHECK(f != NULL && f == p && f == h, "%s at %p, %s at %p, %s at %p", nccl, f, pnccl, p,
              impl, h);
        CHECK(f != NULL && dladdr(f, &info) != 0 && info.dli_fname != NULL &&
                  strstr(info.dli_fname, "libhcomm.so") != NULL,
              "%s lives in %s, not libhcomm", nccl, f && info.dli_fname ? info.dli_fname : "?");
    }
}

static int run_checks(void)
{
    int version = 0;
    NCCLOK(ncclGetVersion(&version));
    CHECK(version / 10000 == 2 && version % 10000 / 100 == 28, "version %d", version);
    if (rank == 0)
        check_binding();
    ncclUniqueId id;
    if (get_id(&id) != 0)
        return 1;
    ncclComm_t comm = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.minCTAs = 4; /* ignored, with an info line */
    ncclResult_t res = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
    if (res != ncclSuccess) {
        fprintf(stderr, "rank %d: init: %s: %s\n", rank, ncclGetErrorString(res), ncclGetLastError(NULL));
        return 1;
    }
    if (getenv("NCCL_CHECK_DEAD_RANK") != NULL && nranks > 1)
        return run_dead_rank(comm);
    int c = 0, u = -1;
    NCCLOK(ncclCommCount(comm, &c));
    NCCLOK(ncclCommUserRank(comm, &u));
    CHECK(c == nranks && u == rank, "count %d rank %d", c, u);
    static const size_t counts[] = {1, 37, 1031};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
        check_collectives(comm, counts[k]);
    check_ring(comm, 1031);
    check_premul(comm);
    check_split(comm);
    check_streams(comm);
    check_shrink(comm);
    check_bridge(comm);
    check_revoke(comm);
    check_group_errors(comm);
    check_errors(comm);
    NCCLOK(ncclCommFinalize(comm));
    NCCLOK(ncclCommDestroy(comm));
    printf("rank %d/%d: %s (%d failures)\n", rank, nranks, failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
#ifdef NCCL_CHECK_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int rc = run_checks();
    MPI_Finalize();
    return rc;
#else
    (void)argc;
    (void)argv;
    const char *r = getenv("HCOMM_RANK"), *n = getenv("HCOMM_NRANKS");
    rank   = r ? atoi(r) : 0;
    nranks = n ? atoi(n) : 1;
    if (getenv("NCCL_CHECK_SCALABLE") != NULL)
        return run_scalable(atof(getenv("NCCL_CHECK_SCALABLE")));
    return run_checks();
#endif
}
