/* comm_cache.c - a communicator's schedules, cached per call shape (selection
 * and building run once per shape), a group's fused ones by their calls'
 * schedules, and the scratch buffer its requests share. */
#include <stdlib.h>
#include <string.h>

#include "algorithms/select.h"
#include "base/dtype.h"
#include "base/log.h"
#include "core/comm.h"

hcomm_status_t hc_comm_reserve_scratch(hcomm_comm_t comm, size_t size)
{
    if (size <= comm->scratch_size)
        return HCOMM_SUCCESS;
    void *p = NULL;
    if (posix_memalign(&p, 64, size) != 0) {
        hc_error(EXEC, "cannot allocate %zu bytes of scratch", size);
        return HCOMM_ERR_NO_MEMORY;
    }
    free(comm->scratch);
    comm->scratch      = p;
    comm->scratch_size = size;
    return HCOMM_SUCCESS;
}

static int cache_match(const hc_sched_cache_entry_t *e, const hc_coll_args_t *a, hc_algo_t algo,
                       size_t chunk)
{
    return e->algo == algo && e->chunk_bytes == chunk && e->args.coll == a->coll &&
           e->args.count == a->count && e->args.dtype == a->dtype && e->args.op == a->op &&
           e->args.root == a->root && e->args.in_place == a->in_place;
}

static void group_cache_clear(hcomm_comm_t comm)
{
    for (int i = 0; i < comm->ngroup_cache; i++)
        hc_sched_destroy(comm->group_cache[i].merged);
    comm->ngroup_cache = 0;
}

void hc_comm_cache_clear(hcomm_comm_t comm)
{
    group_cache_clear(comm);
    for (int i = 0; i < comm->ncache; i++)
        hc_sched_destroy(comm->cache[i].sched);
    comm->ncache    = 0;
    comm->cache_mru = 0;
}

hc_sched_t *hc_comm_group_sched_find(hcomm_comm_t comm, hc_sched_t *const *members, size_t n)
{
    for (int i = 0; i < comm->ngroup_cache; i++) {
        hc_group_cache_entry_t *e = &comm->group_cache[i];
        if (e->nmember == n && memcmp(e->member, members, n * sizeof(*members)) == 0) {
            e->last_use = ++comm->cache_clock;
            return e->merged;
        }
    }
    return NULL;
}

int hc_comm_group_sched_keep(hcomm_comm_t comm, hc_sched_t *const *members, size_t n,
                             hc_sched_t *merged)
{
    int victim = 0;

    if (n > HC_GROUP_KEY_MAX)
        return 0;
    for (size_t k = 0; k < n; k++)
        if (members[k] == NULL)
            return 0;
    if (comm->ngroup_cache < HC_GROUP_CACHE_MAX) {
        victim = comm->ngroup_cache++;
    } else if (comm->req_head == NULL) {
        for (int i = 1; i < comm->ngroup_cache; i++)
            if (comm->group_cache[i].last_use < comm->group_cache[victim].last_use)
                victim = i;
        hc_sched_destroy(comm->group_cache[victim].merged);
    } else {
        return 0; /* a queued request may hold the victim */
    }
    hc_group_cache_entry_t *e = &comm->group_cache[victim];
    memcpy(e->member, members, n * sizeof(*members));
    e->nmember  = n;
    e->merged   = merged;
    e->last_use = ++comm->cache_clock;
    return 1;
}

/* Selects, finds or builds: everything but a repeat of the last call, kept
 * out of hc_comm_get_sched so that the repeat's path saves no registers. */
static hcomm_status_t __attribute__((noinline))
cache_lookup(hcomm_comm_t comm, const hc_coll_args_t *args, hc_sched_t **sched_p, int *owned_p)
{
    const hc_params_t *p      = hc_params_get();
    int                victim = 0;
    /* alltoallv's schedule follows its counts: built for each call, not cached */
    int             cacheable = args->coll != HC_COLL_ALLTOALLV;
    /* a shape seen under these parameters selects what it selected then (as
     * the last call's fast path assumes): calls that alternate, such as a
     * group's send and receive, skip selection too */
    for (int i = 0; i < comm->ncache && cacheable; i++) {
        hc_sched_cache_entry_t *e = &comm->cache[i];
        if (cache_match(e, args, e->algo, e->chunk_bytes) && e->algo_setting == p->algo &&
            (comm->timing == HC_ALGO_AUTO || comm->timing == e->algo)) {
            e->last_use     = ++comm->cache_clock;
            comm->cache_mru = i;
            *sched_p        = e->sched;
            *owned_p        = 0;
            return HCOMM_SUCCESS;
        }
    }
    hc_select_ctx_t sc = {.nranks = comm->nranks, .plans = &comm->plans, .params = p,
                          .timing = comm->timing};
    hc_choice_t     choice = hc_select(&sc, args);
    hc_algo_t       algo   = choice.algo;
    size_t          chunk  = choice.chunk;
    for (int i = 0; i < comm->ncache && cacheable; i++) {
        hc_sched_cache_entry_t *e = &comm->cache[i];
        if (cache_match(e, args, algo, chunk)) {
            e->last_use     = ++comm->cache_clock;
            comm->cache_mru = i;
            *sched_p        = e->sched;
            *owned_p        = 0;
            return HCOMM_SUCCESS;
        }
        if (e->last_use < comm->cache[victim].last_use)
            victim = i;
    }
    hc_sched_t    *s  = NULL;
    hcomm_status_t st = hc_algo_build(args, algo, &comm->plans, comm->nranks, comm->rank, chunk,
                                      &s);
    if (st != HCOMM_SUCCESS) {
        hc_error(ALGO, "building %s with %s for %zu elements failed: %s",
                 hc_coll_name(args->coll), hc_algo_name(algo), args->count,
                 hcomm_status_str(st));
        return st;
    }
    hc_debug(ALGO, "%s of %zu elements (%zu bytes): %s (%s), %u steps", hc_coll_name(args->coll),
             args->count, args->count * hc_dtype_size(args->dtype), hc_algo_name(algo),
             hc_chosen_by_name(choice.by), s->nsteps);
    *sched_p = s;
    *owned_p = !cacheable;
    if (!cacheable)
        return HCOMM_SUCCESS;
    if (comm->ncache < HC_SCHED_CACHE_MAX) {
        victim = comm->ncache++;
    } else if (comm->req_head == NULL) {
        /* the fused schedules are keyed by their calls' schedule pointers:
         * one freed here could come back at its address as another */
        group_cache_clear(comm);
        hc_sched_destroy(comm->cache[victim].sched);
    } else {
        /* a queued request may hold the victim: this one owns its schedule instead */
        *owned_p = 1;
        return HCOMM_SUCCESS;
    }
    comm->cache[victim] = (hc_sched_cache_entry_t){
        .args = *args, .algo = algo, .algo_setting = p->algo, .chunk_bytes = chunk, .sched = s,
        .last_use = ++comm->cache_clock};
    comm->cache_mru = victim;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_comm_get_sched(hcomm_comm_t comm, const hc_coll_args_t *args,
                                 hc_sched_t **sched_p, int *owned_p)
{
    /* the algorithm follows from args and the parameters, so a repeat of the
     * last call needs no selection (unless calibration times another);
     * alltoallv's schedule follows its counts and is never cached */
    if (args->coll != HC_COLL_ALLTOALLV && comm->cache_mru < comm->ncache) {
        hc_sched_cache_entry_t *e = &comm->cache[comm->cache_mru];
        if (cache_match(e, args, e->algo, e->chunk_bytes) &&
            e->algo_setting == hc_params_get()->algo &&
            (comm->timing == HC_ALGO_AUTO || comm->timing == e->algo)) {
            e->last_use = ++comm->cache_clock;
            *sched_p    = e->sched;
            *owned_p    = 0;
            return HCOMM_SUCCESS;
        }
    }
    return cache_lookup(comm, args, sched_p, owned_p);
}
