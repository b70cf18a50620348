/* api_split.c - hcomm_comm_split: ranks of one color form a new communicator,
 * ordered by (key, rank); hcomm_comm_shrink: every rank but the excluded ones
 * does. The parent carries the exchange; each new group's first rank starts a
 * rendezvous root for it. */
#include "api/api_split.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/watch.h"

typedef struct split_entry {
    int32_t color, key, rank;
} split_entry_t;

static int split_cmp(const void *a, const void *b)
{
    const split_entry_t *x = a, *y = b;
    if (x->color != y->color)
        return x->color < y->color ? -1 : 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : (x->rank > y->rank);
}

hcomm_status_t hcomm_comm_split(hcomm_comm_t comm, int color, int key, hcomm_comm_t *newcomm)
{
    hcomm_status_t st = hc_comm_check(comm, "hcomm_comm_split");
    if (st != HCOMM_SUCCESS)
        return st;
    if (newcomm == NULL || (color < 0 && color != HCOMM_SPLIT_NOCOLOR)) {
        hc_error(INIT, "hcomm_comm_split: %s",
                 newcomm == NULL ? "NULL newcomm" : "negative color other than HCOMM_SPLIT_NOCOLOR");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (hc_group_active()) {
        hc_error(INIT, "hcomm_comm_split: not allowed inside a group");
        return HCOMM_ERR_INVALID_USAGE;
    }
    int            n   = comm->nranks;
    split_entry_t *all = calloc((size_t)n, sizeof(*all));
    hcomm_unique_id_t *ids = calloc((size_t)n, sizeof(*ids));
    if (all == NULL || ids == NULL) {
        st = HCOMM_ERR_NO_MEMORY;
        goto out;
    }
    split_entry_t me = {color, key, comm->rank};
    st = hcomm_allgather(&me, all, sizeof(me), HCOMM_UINT8, comm, NULL);
    if (st != HCOMM_SUCCESS)
        goto out;
    qsort(all, (size_t)n, sizeof(*all), split_cmp);

    int first = -1, size = 0, myrank = -1;
    for (int i = 0; i < n; i++) {
        if (all[i].color != color)
            continue;
        if (first < 0)
            first = all[i].rank;
        if (all[i].rank == comm->rank)
            myrank = size;
        size++;
    }
    hcomm_unique_id_t mine;
    memset(&mine, 0, sizeof(mine));
    if (color != HCOMM_SPLIT_NOCOLOR && first == comm->rank)
        st = hc_comm_root_start(comm, &mine);
    /* every rank takes part in the exchange, even after a local failure, so
     * that no peer is left waiting; the failure is returned after it */
    hcomm_status_t xst = hcomm_allgather(&mine, ids, sizeof(mine), HCOMM_UINT8, comm, NULL);
    if (st == HCOMM_SUCCESS)
        st = xst;
    if (st != HCOMM_SUCCESS)
        goto out;
    if (color == HCOMM_SPLIT_NOCOLOR) {
        *newcomm = NULL;
        goto out;
    }
    static const hcomm_unique_id_t no_id;
    if (memcmp(&ids[first], &no_id, sizeof(no_id)) == 0) {
        /* its own failure is logged there; its id would be refused as the user's */
        hc_error(INIT, "hcomm_comm_split: rank %d could not start the rendezvous of color %d",
                 first, color);
        st = HCOMM_ERR_REMOTE;
        goto out;
    }
    uint64_t *host_ids = calloc((size_t)size, sizeof(*host_ids));
    if (host_ids == NULL) {
        st = HCOMM_ERR_NO_MEMORY;
        goto out;
    }
    for (int i = 0, k = 0; i < n; i++)
        if (all[i].color == color)
            host_ids[k++] = comm->peers[all[i].rank].host_hash;
    hc_comm_parent_t parent = {host_ids, comm->plans.cluster};
    st                      = hc_comm_create(newcomm, size, &ids[first], myrank, &parent);
    free(host_ids);
out:
    free(all);
    free(ids);
    return st;
}

/* Marks the survivors in keep[]; logs and fails on a bad list or an excluded caller. */
static hcomm_status_t shrink_survivors(hcomm_comm_t comm, const int *exclude, int nexclude,
                                       uint8_t *keep)
{
    if (nexclude < 0 || (nexclude > 0 && exclude == NULL)) {
        hc_error(INIT, "hcomm_comm_shrink: %d excluded ranks in list %p", nexclude,
                 (const void *)exclude);
        return HCOMM_ERR_INVALID_ARG;
    }
    memset(keep, 1, (size_t)comm->nranks);
    for (int i = 0; i < nexclude; i++) {
        int r = exclude[i];
        if (r < 0 || r >= comm->nranks || !keep[r]) {
            hc_error(INIT, "hcomm_comm_shrink: excluded rank %d is %s", r,
                     r < 0 || r >= comm->nranks ? "out of range" : "listed twice");
            return HCOMM_ERR_INVALID_ARG;
        }
        keep[r] = 0;
    }
    if (!keep[comm->rank]) {
        hc_error(INIT, "hcomm_comm_shrink: rank %d is excluded and must not call", comm->rank);
        return HCOMM_ERR_INVALID_USAGE;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_comm_shrink_check(hcomm_comm_t comm, const int *exclude, int nexclude,
                                    hcomm_comm_t *newcomm)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_shrink: communicator %p is NULL, destroyed or aborted",
                 (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (newcomm == NULL || hc_group_active()) {
        hc_error(INIT, "hcomm_comm_shrink: %s",
                 newcomm == NULL ? "NULL newcomm" : "not allowed inside a group");
        return newcomm == NULL ? HCOMM_ERR_INVALID_ARG : HCOMM_ERR_INVALID_USAGE;
    }
    uint8_t *keep = malloc((size_t)comm->nranks);
    if (keep == NULL)
        return HCOMM_ERR_NO_MEMORY;
    hcomm_status_t st = shrink_survivors(comm, exclude, nexclude, keep);
    free(keep);
    return st;
}

/* comm failed (or was revoked): its data path is gone, so the survivors
 * agree over the watch channel on who is alive and on the new rendezvous
 * (core/watch.h); the dead need not be listed in keep's complement. */
static hcomm_status_t shrink_failed(hcomm_comm_t comm, const uint8_t *keep, uint64_t *host_ids,
                                    hcomm_comm_t *newcomm)
{
    hcomm_unique_id_t id;
    int               n = comm->nranks, size = 0, myrank = -1;
    uint8_t          *alive = calloc((size_t)n, 1);
    double            t0    = hc_clock_now();
    if (alive == NULL)
        return HCOMM_ERR_NO_MEMORY;
    hcomm_status_t st = hc_watch_shrink_agree(comm, keep, alive, &id);
    for (int r = 0; st == HCOMM_SUCCESS && r < n; r++)
        if (alive[r]) {
            myrank           = r == comm->rank ? size : myrank;
            host_ids[size++] = comm->peers[r].host_hash;
        }
    free(alive);
    if (st != HCOMM_SUCCESS)
        return st;
    hc_info(INIT,
            "hcomm_comm_shrink: %d of %d ranks survive the failure (agreed in %.1f ms); "
            "this one is rank %d of the new communicator",
            size, n, (hc_clock_now() - t0) * 1e3, myrank);
    hc_comm_parent_t parent = {host_ids, comm->plans.cluster};
    return hc_comm_create(newcomm, size, &id, myrank, &parent);
}

hcomm_status_t hcomm_comm_shrink(hcomm_comm_t comm, const int *exclude, int nexclude,
                                 hcomm_comm_t *newcomm)
{
    hcomm_status_t st = hc_comm_shrink_check(comm, exclude, nexclude, newcomm);
    if (st != HCOMM_SUCCESS)
        return st;
    int       failed   = hcomm_comm_get_error(comm) != HCOMM_SUCCESS;
    int       n        = comm->nranks;
    uint8_t  *keep     = malloc((size_t)n);
    uint64_t *host_ids = calloc((size_t)n, sizeof(*host_ids));
    if (keep == NULL || host_ids == NULL) {
        st = HCOMM_ERR_NO_MEMORY;
        goto out;
    }
    if ((st = shrink_survivors(comm, exclude, nexclude, keep)) != HCOMM_SUCCESS)
        goto out;
    if (failed && comm->shrunk_failed) {
        /* its agreement's decision stays with the coordinator, whose answer
         * would send a second shrink's joiners to the first's rendezvous */
        hc_error(INIT, "hcomm_comm_shrink: this failed communicator was shrunk already; shrink "
                       "the communicator that gave");
        st = HCOMM_ERR_INVALID_USAGE;
        goto out;
    }
    if (failed) {
        st                  = shrink_failed(comm, keep, host_ids, newcomm);
        comm->shrunk_failed = st == HCOMM_SUCCESS;
        goto out;
    }
    int first = -1, size = 0, myrank = -1;
    for (int r = 0; r < n; r++) {
        if (!keep[r])
            continue;
        if (first < 0)
            first = r;
        if (r == comm->rank)
            myrank = size;
        host_ids[size++] = comm->peers[r].host_hash;
    }
    /* The first survivor sends the new id to the others, point to point, so the
     * excluded ranks are never waited for; with it a digest of its list, so that
     * a survivor passed another list fails at once. An all-zero id says the
     * root could not start. */
    struct {
        hcomm_unique_id_t id;
        uint64_t          digest;
    } msg, mine = {.digest = hc_hash_bytes(HC_HASH_FNV_SEED, keep, (size_t)n)};
    if (comm->rank == first) {
        if ((st = hc_comm_root_start(comm, &mine.id)) != HCOMM_SUCCESS)
            memset(&mine.id, 0, sizeof(mine.id));
        for (int r = first + 1; r < n; r++) {
            hcomm_status_t sst = keep[r] ? hcomm_send(&mine, sizeof(mine), HCOMM_UINT8, r, comm, NULL)
                                         : HCOMM_SUCCESS;
            if (st == HCOMM_SUCCESS)
                st = sst;
        }
        msg = mine;
    } else {
        static const hcomm_unique_id_t zero;
        st = hcomm_recv(&msg, sizeof(msg), HCOMM_UINT8, first, comm, NULL);
        if (st == HCOMM_SUCCESS && msg.digest != mine.digest) {
            hc_error(INIT, "hcomm_comm_shrink: rank %d passed another exclusion list", first);
            st = HCOMM_ERR_INVALID_ARG;
        } else if (st == HCOMM_SUCCESS && memcmp(&msg.id, &zero, sizeof(zero)) == 0) {
            hc_error(INIT, "hcomm_comm_shrink: rank %d could not start the new rendezvous", first);
            st = HCOMM_ERR_REMOTE;
        }
    }
    hc_comm_parent_t parent = {host_ids, comm->plans.cluster};
    if (st == HCOMM_SUCCESS)
        st = hc_comm_create(newcomm, size, &msg.id, myrank, &parent);
out:
    free(keep);
    free(host_ids);
    return st;
}
