/* launcher_pmix.c - the job's size and the unique id through the launcher's
 * PMIx server (Open MPI's mpirun, srun --mpi=pmix): put, commit, fence, get.
 *
 * libpmix.so.2 is loaded at first use (dlopen), not linked: linked, libhcomm
 * and the NCCL drop-in would pull it and its plugins into every process on
 * hcomm, launched by PMIx or not. Only pmix.h is needed to build. Its macros
 * that call into the library are not used, so nothing here needs it linked.
 * The calls that wait for other ranks (fence, get) carry PMIX_TIMEOUT; init,
 * put, commit and finalize only talk to the local server. Each
 * hcomm_comm_init_env connects (hc_launch_pmix_size) and disconnects
 * (hc_launch_pmix_release): Open MPI's mpirun takes a process that exits
 * connected for a failed one. */
#include <pmix.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dl.h"
#include "base/log.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/launcher.h"

#define LIBPMIX "libpmix.so.2"

#define HC_PMIX_API(X)                                                                             \
    X(PMIx_Init)                                                                                   \
    X(PMIx_Finalize) X(PMIx_Get) X(PMIx_Put) X(PMIx_Commit) X(PMIx_Fence) X(PMIx_Error_string)

static struct {
#define HC_PMIX_FIELD_(f) __typeof__(f) *f;
    HC_PMIX_API(HC_PMIX_FIELD_)
} api;

#define HC_PMIX_NAME_(f) #f,
#define HC_PMIX_SLOT_(f) (void **)&api.f,
static const char *const api_names[] = {HC_PMIX_API(HC_PMIX_NAME_)};
static void **const      api_slots[] = {HC_PMIX_API(HC_PMIX_SLOT_)};

static pthread_mutex_t lock      = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t  load_once = PTHREAD_ONCE_INIT;
static char            load_error[256];
static int             loaded;
static int             held; /* connections open: PMIx_Init not yet finalized */
static pmix_proc_t     me;

static void load(void)
{
    loaded = hc_dl_load(LIBPMIX, api_names, api_slots, sizeof(api_names) / sizeof(api_names[0]),
                        load_error, sizeof(load_error)) == 0;
}

/* Connects to the server, one connection per init (PMIx counts them; one
 * left open makes Open MPI's mpirun call the exit abnormal). */
static int connect_server(void)
{
    pthread_once(&load_once, load);
    if (!loaded) {
        hc_warn(BOOT, "PMIx: %s", load_error);
        return -1;
    }
    pmix_status_t rc = api.PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        hc_warn(BOOT, "PMIx: PMIx_Init: %s", api.PMIx_Error_string(rc));
        return -1;
    }
    held++;
    return 0;
}

void hc_launch_pmix_release(void)
{
    pthread_mutex_lock(&lock);
    if (held > 0) {
        pmix_status_t rc = api.PMIx_Finalize(NULL, 0);
        if (rc != PMIX_SUCCESS)
            hc_warn(BOOT, "PMIx: PMIx_Finalize: %s", api.PMIx_Error_string(rc));
        held--;
    }
    pthread_mutex_unlock(&lock);
}

static void info_int(pmix_info_t *info, const char *key, int v)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->key, sizeof(info->key), "%s", key);
    info->value.type         = PMIX_INT;
    info->value.data.integer = v;
}

static void info_bool(pmix_info_t *info, const char *key, bool v)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->key, sizeof(info->key), "%s", key);
    info->value.type      = PMIX_BOOL;
    info->value.data.flag = v;
}

/* A value PMIx_Get returned; libpmix allocates with malloc (its pmix_free). */
static void value_free(pmix_value_t *v)
{
    if (v != NULL && v->type == PMIX_STRING)
        free(v->data.string);
    free(v);
}

hcomm_status_t hc_launch_pmix_size(int *rank, int *nranks)
{
    pmix_value_t  *v = NULL;
    pmix_proc_t    job;
    hcomm_status_t st = HCOMM_ERR_UNSUPPORTED;

    pthread_mutex_lock(&lock);
    if (connect_server() != 0)
        goto out;
    job              = me;
    job.rank         = PMIX_RANK_WILDCARD;
    pmix_status_t rc = api.PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || v == NULL || v->type != PMIX_UINT32 || v->data.uint32 < 1 ||
        v->data.uint32 > HC_BOOTSTRAP_MAX_RANKS || me.rank >= v->data.uint32) {
        hc_warn(BOOT, "PMIx: no job size for rank %u in namespace %s: %s", me.rank, me.nspace,
                rc != PMIX_SUCCESS ? api.PMIx_Error_string(rc) : "not a count above the rank");
        goto out;
    }
    *rank   = (int)me.rank;
    *nranks = (int)v->data.uint32;
    st      = HCOMM_SUCCESS;
out:
    value_free(v);
    pthread_mutex_unlock(&lock);
    if (st != HCOMM_SUCCESS)
        hc_launch_pmix_release();
    return st;
}

hcomm_status_t hc_launch_pmix_exchange(const char *key, char *val, size_t len, int publish,
                                       double timeout)
{
    pmix_info_t    info[2];
    pmix_value_t  *got = NULL, put;
    pmix_proc_t    root;
    pmix_status_t  rc   = PMIX_SUCCESS;
    const char    *what = "PMIx_Put";
    hcomm_status_t st   = HCOMM_SUCCESS;
    int            secs = timeout < 1 ? 1 : timeout > 1e6 ? 1000000 : (int)(timeout + 0.999);

    pthread_mutex_lock(&lock);
    if (held == 0) {
        pthread_mutex_unlock(&lock);
        hc_error(BOOT, "PMIx: %s exchanged without a connection", key);
        return HCOMM_ERR_INVALID_USAGE;
    }
    info_int(&info[0], PMIX_TIMEOUT, secs);
    info_bool(&info[1], PMIX_COLLECT_DATA, true);
    if (publish) {
        memset(&put, 0, sizeof(put));
        put.type        = PMIX_STRING;
        put.data.string = val;
        rc              = api.PMIx_Put(PMIX_GLOBAL, key, &put);
        if (rc == PMIX_SUCCESS)
            what = "PMIx_Commit", rc = api.PMIx_Commit();
    }
    if (rc == PMIX_SUCCESS)
        what = "PMIx_Fence", rc = api.PMIx_Fence(NULL, 0, info, 2);
    if (rc == PMIX_SUCCESS && !publish) {
        root      = me;
        root.rank = 0;
        what      = "PMIx_Get";
        rc        = api.PMIx_Get(&root, key, info, 1, &got);
        if (rc == PMIX_SUCCESS && (got == NULL || got->type != PMIX_STRING ||
                                   got->data.string == NULL || strlen(got->data.string) >= len))
            rc = PMIX_ERR_BAD_PARAM;
        if (rc == PMIX_SUCCESS)
            memcpy(val, got->data.string, strlen(got->data.string) + 1);
    }
    if (rc != PMIX_SUCCESS) {
        st = rc == PMIX_ERR_TIMEOUT ? HCOMM_ERR_TIMEOUT : HCOMM_ERR_REMOTE;
        hc_error(BOOT, "PMIx: %s of %s (rank %u in namespace %s, timeout %d s): %s", what, key,
                 me.rank, me.nspace, secs,
                 rc == PMIX_ERR_BAD_PARAM && got != NULL ? "not a string of the expected length"
                                                         : api.PMIx_Error_string(rc));
    }
    value_free(got);
    pthread_mutex_unlock(&lock);
    return st;
}
