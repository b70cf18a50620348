/* nccl_group_init.c - communicators created inside a group. NCCL lets one
 * thread create several ranks' communicators between ncclGroupStart and
 * ncclGroupEnd (a single-process program driving several GPUs; nccl-tests'
 * -g 2); an hcomm init returns only once all its ranks joined, so inside a
 * group they are queued, and the outermost ncclGroupEnd runs them together,
 * one thread each. Arguments are checked at the call. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "nccl_shim.h"

typedef struct {
    ncclComm_t  *out;
    int          nranks, rank;
    ncclUniqueId id;
    ncclConfig_t cfg; /* copied: the caller's may be gone by the group's end */
    int          has_cfg;
    ncclResult_t res;
    char         why[256]; /* the failure's message, from the thread that ran it */
} pending_init_t;

static __thread pending_init_t *pending;
static __thread int             npending, cap;

ncclResult_t hc_nccl_init_defer(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                const ncclConfig_t *config)
{
    if (npending == cap) {
        int   ncap = cap ? 2 * cap : 8;
        void *p    = realloc(pending, (size_t)ncap * sizeof(*pending));
        if (p == NULL)
            return hc_nccl_fail(ncclSystemError, "ncclCommInitRank: out of memory in a group");
        pending = p, cap = ncap;
    }
    pending_init_t *q = &pending[npending++];
    *q                = (pending_init_t){.out = comm, .nranks = nranks, .rank = rank, .id = id};
    if (config != NULL) { /* read_config took its size; NCCL's callers pass the full struct */
        size_t n = config->size < sizeof(q->cfg) ? config->size : sizeof(q->cfg);
        memcpy(&q->cfg, config, n);
        q->has_cfg = 1;
    }
    *comm = NULL; /* valid once the group ends */
    return ncclSuccess;
}

static void *init_thread(void *arg)
{
    pending_init_t *q = arg;
    q->res = hc_nccl_init_rank(q->out, q->nranks, q->id, q->rank, q->has_cfg ? &q->cfg : NULL);
    if (q->res != ncclSuccess)
        snprintf(q->why, sizeof(q->why), "%s", hcomm_nccl_GetLastError(NULL));
    return NULL;
}

void hc_nccl_init_drop(void)
{
    npending = 0;
}

ncclResult_t hc_nccl_init_run(void)
{
    int n = npending;
    npending = 0;
    if (n == 0)
        return ncclSuccess;
    pthread_t *t   = calloc((size_t)n, sizeof(*t));
    char      *ran = calloc((size_t)n, 1);
    for (int i = 0; i < n && t != NULL && ran != NULL; i++)
        ran[i] = pthread_create(&t[i], NULL, init_thread, &pending[i]) == 0;
    int failed = -1;
    for (int i = 0; i < n; i++) {
        if (t != NULL && ran != NULL && ran[i])
            pthread_join(t[i], NULL);
        else
            pending[i].res = ncclSystemError, snprintf(pending[i].why, sizeof(pending[i].why),
                                                       "could not start its thread");
        if (pending[i].res != ncclSuccess && failed < 0)
            failed = i;
    }
    free(t);
    free(ran);
    if (failed < 0)
        return ncclSuccess;
    /* as NCCL's failed group: none of its communicators is left */
    for (int i = 0; i < n; i++)
        if (pending[i].res == ncclSuccess && *pending[i].out != NULL) {
            hcomm_nccl_CommAbort(*pending[i].out);
            *pending[i].out = NULL;
        }
    return hc_nccl_fail(pending[failed].res, "ncclGroupEnd: rank %d of %d's communicator: %s",
                        pending[failed].rank, pending[failed].nranks, pending[failed].why);
}
