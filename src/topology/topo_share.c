/* topo_share.c - one discovery per host. Every rank of a host starts init at
 * once; were each to run hwloc (which loads its plugins and their libraries
 * per process) the host's CPUs would spend most of init on it. The first rank
 * to create the shared-memory record discovers and publishes; the others wait
 * for it, bounded, and discover on their own when its writer is gone or slow.
 * The record is the same for any communicator of the host, so a reader that
 * finds an older communicator's record may use it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/proc.h"
#include "topology/topo_host.h"

#define TOPO_SHARE_READY 0x68636f74u  /* "hcot": the record below is complete */
#define TOPO_SHARE_FAILED 0x6863f00du /* its writer's discovery failed */

typedef struct topo_share_rec {
    uint32_t       state;  /* 0 while written, then READY or FAILED */
    int32_t        pid;    /* the writer */
    uint32_t       layout; /* sizeof(hc_topo_host_t): another build's differs */
    uint32_t       pad;
    hc_topo_host_t host;
} topo_share_rec_t;

static hcomm_status_t topo_share_publish(int fd, const char *name, hc_topo_host_t *host)
{
    topo_share_rec_t *rec = calloc(1, sizeof(*rec));
    hcomm_status_t    st  = HCOMM_ERR_NO_MEMORY;
    if (rec != NULL) {
        rec->pid    = (int32_t)getpid();
        rec->layout = (uint32_t)sizeof(hc_topo_host_t);
        /* the pid first: readers tell a writer that died from a slow one */
        if (pwrite(fd, rec, sizeof(*rec), 0) != (ssize_t)sizeof(*rec))
            hc_debug(TOPO, "%s: write: %s", name, strerror(errno));
        st = hc_topo_host_discover(&rec->host);
        if (st == HCOMM_SUCCESS)
            *host = rec->host;
        /* body first, state last: a reader that sees the state sees the body */
        uint32_t state = st == HCOMM_SUCCESS ? TOPO_SHARE_READY : TOPO_SHARE_FAILED;
        if (pwrite(fd, rec, sizeof(*rec), 0) != (ssize_t)sizeof(*rec) ||
            pwrite(fd, &state, sizeof(state), 0) != (ssize_t)sizeof(state))
            hc_debug(TOPO, "%s: write: %s; the host's other ranks discover on their own", name,
                     strerror(errno));
    }
    free(rec);
    return st;
}

/* A writer puts its pid in the record right after creating it: one that is
 * still empty this long after its last change lost its writer in between. */
#define TOPO_SHARE_EMPTY_GRACE 2.0 /* seconds */

static int topo_share_abandoned(int fd)
{
    struct stat     st;
    struct timespec now;
    if (fstat(fd, &st) != 0 || clock_gettime(CLOCK_REALTIME, &now) != 0)
        return 0;
    double age = (double)(now.tv_sec - st.st_mtim.tv_sec) +
                 1e-9 * (double)(now.tv_nsec - st.st_mtim.tv_nsec);
    return age > TOPO_SHARE_EMPTY_GRACE;
}

/* A complete record is still another process's bytes (another hcomm build
 * of the same job, a damaged file): its counts bound every loop over it and
 * its strings end inside their arrays, or it is not used. */
static int topo_share_sane(topo_share_rec_t *rec)
{
    hc_topo_host_t *h = &rec->host;
    if (rec->layout != sizeof(hc_topo_host_t) || h->nnuma < 0 || h->nnuma > HC_TOPO_MAX_NUMA ||
        h->nnics < 0 || h->nnics > HC_TOPO_MAX_NICS || h->ngpus < 0 || h->ngpus > HC_TOPO_MAX_GPUS)
        return 0;
    for (int i = 0; i < HC_TOPO_MAX_NUMA; i++)
        h->numa_cpus[i][HC_TOPO_CPULIST_MAX - 1] = '\0';
    for (int i = 0; i < HC_TOPO_MAX_NICS; i++)
        h->nics[i].name[sizeof(h->nics[i].name) - 1] = '\0';
    for (int i = 0; i < HC_TOPO_MAX_GPUS; i++)
        h->gpus[i][sizeof(h->gpus[i]) - 1] = '\0';
    return 1;
}

/* 1: the record was read; 0: not complete yet; -1: never will be. */
static int topo_share_read(int fd, hc_topo_host_t *host)
{
    topo_share_rec_t *rec = malloc(sizeof(*rec));
    int               rc  = -1;
    ssize_t           n   = rec != NULL ? pread(fd, rec, sizeof(*rec), 0) : -1;
    if (n == (ssize_t)sizeof(*rec) && rec->state == TOPO_SHARE_READY) {
        if (topo_share_sane(rec)) {
            *host = rec->host;
            rc    = 1;
        } else {
            hc_warn(TOPO, "the host's shared discovery record is another build's or damaged: "
                          "this rank discovers on its own");
        }
    } else if (n >= 0 && n < (ssize_t)(sizeof(rec->state) + sizeof(rec->pid))) {
        rc = topo_share_abandoned(fd) ? -1 : 0; /* created, nothing written yet */
    } else if (n > 0 && rec->state == 0) {
        /* being written: wait unless its writer is gone */
        rc = hc_proc_gone(rec->pid, -1) ? -1 : 0;
    }
    free(rec);
    return rc;
}

static hcomm_status_t topo_share_wait(int fd, const char *name, double timeout,
                                      hc_topo_host_t *host)
{
    double          deadline = hc_clock_now() + timeout;
    struct timespec pause    = {0, 200 * 1000};
    int             rc;
    /* the writer needs the CPUs the waiters would spin on: back off to 8 ms */
    while ((rc = topo_share_read(fd, host)) == 0 && hc_clock_now() < deadline) {
        nanosleep(&pause, NULL);
        if (pause.tv_nsec < 8 * 1000 * 1000)
            pause.tv_nsec *= 2;
    }
    if (rc == 1)
        return HCOMM_SUCCESS;
    hc_debug(TOPO, "%s: %s; discovering on our own", name,
             rc == 0 ? "no record in time" : "its writer failed or exited");
    return hc_topo_host_discover(host);
}

hcomm_status_t hc_topo_share_get(const char *share_name, double timeout, hc_topo_host_t *host,
                                 int *owner)
{
    *owner = 0;
    int fd = shm_open(share_name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
        *owner            = 1;
        hcomm_status_t st = topo_share_publish(fd, share_name, host);
        close(fd);
        return st;
    }
    if (errno == EEXIST)
        fd = shm_open(share_name, O_RDONLY, 0);
    if (fd < 0) {
        hc_debug(TOPO, "%s: %s; discovering on our own", share_name, strerror(errno));
        return hc_topo_host_discover(host);
    }
    hcomm_status_t st = topo_share_wait(fd, share_name, timeout, host);
    close(fd);
    return st;
}

void hc_topo_share_remove(const char *share_name)
{
    if (shm_unlink(share_name) != 0 && errno != ENOENT)
        hc_debug(TOPO, "shm_unlink %s: %s", share_name, strerror(errno));
}
