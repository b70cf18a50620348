/* comm_split.c - hcomm_comm_split: ranks of one color form a new communicator,
 * ordered by (key, rank). The parent carries the exchange; each color's first
 * rank starts a rendezvous root for its group. */
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/log.h"

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
    if (color != HCOMM_SPLIT_NOCOLOR && first == comm->rank) {
        uint8_t cookie[16];
        char    bind[80];
        const char *ip = hc_bootstrap_local_ip(comm->bs);
        snprintf(bind, sizeof(bind), strchr(ip, ':') ? "[%s]:0" : "%s:0", ip);
        st = hc_bootstrap_random(cookie, sizeof(cookie));
        if (st == HCOMM_SUCCESS)
            st = hc_bootstrap_root_start(bind, cookie, &mine);
    }
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
    uint64_t *host_ids = calloc((size_t)size, sizeof(*host_ids));
    if (host_ids == NULL) {
        st = HCOMM_ERR_NO_MEMORY;
        goto out;
    }
    for (int i = 0, k = 0; i < n; i++)
        if (all[i].color == color)
            host_ids[k++] = comm->peers[all[i].rank].host_hash;
    st = hc_comm_create(newcomm, size, &ids[first], myrank, host_ids);
    free(host_ids);
out:
    free(all);
    free(ids);
    return st;
}
