/* plan_hier.c - the hierarchy for hierarchical algorithms: node groups (the
 * ranks of one node) and rail groups (rail l: the ranks of local rank l on
 * every node that has one, in node order). On uneven nodes the high rails
 * are shorter; rail 0 always spans every node. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "topology/plan.h"

static int cluster_ok(const hc_cluster_t *c)
{
    return c && c->nranks > 0 && c->nnodes > 0 && c->nnodes <= c->nranks && c->node_first &&
           c->node_ranks && c->node_first[0] == 0 && c->node_first[c->nnodes] == c->nranks;
}

hcomm_status_t hc_plan_hier(const hc_cluster_t *c, hc_hier_t *out)
{
    if (!cluster_ok(c) || !out) {
        hc_error(TOPO, "plan hierarchy: invalid cluster");
        return HCOMM_ERR_INVALID_ARG;
    }
    int nn = c->nnodes, nr = c->nranks, ppn = 0;
    for (int n = 0; n < nn; n++) {
        int s = c->node_first[n + 1] - c->node_first[n];
        if (s > ppn)
            ppn = s;
    }
    hc_hier_t h  = {.nnodes = nn, .ppn_max = ppn, .nrails = ppn};
    h.node_first = malloc((size_t)(nn + 1) * sizeof(int));
    h.node_ranks = malloc((size_t)nr * sizeof(int));
    h.rail_first = calloc((size_t)ppn + 1, sizeof(int));
    h.rail_ranks = malloc((size_t)nr * sizeof(int));
    if (!h.node_first || !h.node_ranks || !h.rail_first || !h.rail_ranks) {
        hc_error(TOPO, "plan hierarchy: out of memory for %d ranks", nr);
        hc_plan_hier_free(&h);
        return HCOMM_ERR_NO_MEMORY;
    }
    memcpy(h.node_first, c->node_first, (size_t)(nn + 1) * sizeof(int));
    memcpy(h.node_ranks, c->node_ranks, (size_t)nr * sizeof(int));

    /* Rail l holds one rank from every node with more than l ranks. */
    for (int n = 0; n < nn; n++) {
        int s = c->node_first[n + 1] - c->node_first[n];
        for (int l = 0; l < s; l++)
            h.rail_first[l + 1]++;
    }
    for (int l = 0; l < ppn; l++)
        h.rail_first[l + 1] += h.rail_first[l];
    /* Fill with rail_first[l] as rail l's cursor, which ends at rail l + 1's
     * start; shifting back restores the starts. */
    for (int n = 0; n < nn; n++)
        for (int i = c->node_first[n]; i < c->node_first[n + 1]; i++)
            h.rail_ranks[h.rail_first[i - c->node_first[n]]++] = c->node_ranks[i];
    memmove(h.rail_first + 1, h.rail_first, (size_t)ppn * sizeof(int));
    h.rail_first[0] = 0;
    *out            = h;
    return HCOMM_SUCCESS;
}

void hc_plan_hier_free(hc_hier_t *h)
{
    if (!h)
        return;
    free(h->rail_ranks);
    free(h->rail_first);
    free(h->node_ranks);
    free(h->node_first);
    memset(h, 0, sizeof(*h));
}
