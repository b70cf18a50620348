/* topo_model.c - the cluster model: nodes, local ranks, rails and link costs,
 * built from the ranks' discovery or synthesised for planning at scale. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "topology/topo.h"

/* Built-in costs until calibration or a topology file says otherwise. The
 * shared-memory figures are typical of one modern socket (memcpy through a
 * shared ring) and of crossing the socket interconnect; the network default is
 * a 10 Gbit/s link, replaced by the slowest first NIC the ranks report. */
static const hc_link_cost_t topo_default_link[HC_LINK_CLASS_COUNT] = {
    [HC_LINK_SELF]       = {.alpha_us = 0.0, .bw_gbps = 1000.0},
    [HC_LINK_SAME_NUMA]  = {.alpha_us = 0.3, .bw_gbps = 8.0},
    [HC_LINK_CROSS_NUMA] = {.alpha_us = 0.5, .bw_gbps = 5.0},
    [HC_LINK_CROSS_NODE] = {.alpha_us = 10.0, .bw_gbps = 1.25},
};
#define TOPO_DEFAULT_REDUCE_GBPS 10.0 /* local reduction (gamma), GB/s */
#define TOPO_MAX_RANKS (1 << 24)

void hc_cluster_destroy(hc_cluster_t *c)
{
    if (c == NULL)
        return;
    free(c->node_of);
    free(c->local_rank);
    free(c->numa_of);
    free(c->rail_of);
    free(c->node_first);
    free(c->node_ranks);
    free(c->ranks);
    free(c);
}

/* A model with its per-rank arrays allocated and default costs. */
static hc_cluster_t *topo_alloc(int nranks)
{
    hc_cluster_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    size_t n      = (size_t)nranks;
    c->nranks     = nranks;
    c->node_of    = malloc(n * sizeof(int));
    c->local_rank = malloc(n * sizeof(int));
    c->numa_of    = malloc(n * sizeof(int));
    c->rail_of    = malloc(n * sizeof(int));
    c->node_ranks = malloc(n * sizeof(int));
    if (c->node_of == NULL || c->local_rank == NULL || c->numa_of == NULL || c->rail_of == NULL ||
        c->node_ranks == NULL) {
        hc_cluster_destroy(c);
        return NULL;
    }
    memcpy(c->link, topo_default_link, sizeof(c->link));
    c->reduce_gbps = TOPO_DEFAULT_REDUCE_GBPS;
    return c;
}

/* From node_of (nodes numbered by lowest rank) and nnodes: node_first,
 * node_ranks and local_rank. Returns -1 when out of memory. */
static int topo_group(hc_cluster_t *c)
{
    c->node_first = calloc((size_t)c->nnodes + 1, sizeof(int));
    if (c->node_first == NULL)
        return -1;
    for (int r = 0; r < c->nranks; r++)
        c->node_first[c->node_of[r] + 1]++;
    for (int n = 0; n < c->nnodes; n++)
        c->node_first[n + 1] += c->node_first[n];
    int *fill = malloc((size_t)c->nnodes * sizeof(int));
    if (fill == NULL)
        return -1;
    memcpy(fill, c->node_first, (size_t)c->nnodes * sizeof(int));
    for (int r = 0; r < c->nranks; r++) {
        int n                    = c->node_of[r];
        c->local_rank[r]         = fill[n] - c->node_first[n];
        c->node_ranks[fill[n]++] = r;
    }
    free(fill);
    return 0;
}

/* Node index of each rank by host_hash, nodes numbered by lowest rank. */
static int topo_assign_nodes(hc_cluster_t *c, const hc_rank_topo_t *ranks)
{
    uint64_t *hash = malloc((size_t)c->nranks * sizeof(uint64_t));
    if (hash == NULL)
        return -1;
    c->nnodes = 0;
    for (int r = 0; r < c->nranks; r++) {
        int n = c->nnodes - 1;
        /* ranks usually come node-major: try the last node first */
        if (n < 0 || hash[n] != ranks[r].host_hash)
            for (n = 0; n < c->nnodes && hash[n] != ranks[r].host_hash; n++)
                ;
        if (n == c->nnodes)
            hash[c->nnodes++] = ranks[r].host_hash;
        c->node_of[r] = n;
    }
    free(hash);
    return 0;
}

int hc_cluster_nodes_equal(const hc_cluster_t *c)
{
    int p = c->nnodes > 0 ? c->node_first[1] - c->node_first[0] : 0;
    for (int nd = 1; nd < c->nnodes; nd++)
        if (c->node_first[nd + 1] - c->node_first[nd] != p)
            return 0;
    return c->nnodes > 0;
}

hcomm_status_t hc_cluster_build(const hc_rank_topo_t *ranks, int nranks, hc_cluster_t **out)
{
    if (ranks == NULL || out == NULL || nranks < 1 || nranks > TOPO_MAX_RANKS)
        return HCOMM_ERR_INVALID_ARG;
    hc_cluster_t *c = topo_alloc(nranks);
    if (c == NULL)
        goto err_nomem;
    c->ranks = malloc((size_t)nranks * sizeof(*ranks));
    if (c->ranks == NULL || topo_assign_nodes(c, ranks) != 0 || topo_group(c) != 0)
        goto err_free;
    memcpy(c->ranks, ranks, (size_t)nranks * sizeof(*ranks));
    double nic_min = 0.0;
    for (int r = 0; r < nranks; r++) {
        int nnics     = ranks[r].nnics > 0 ? ranks[r].nnics : 1;
        c->numa_of[r] = ranks[r].numa >= 0 ? ranks[r].numa : -1;
        c->rail_of[r] = c->local_rank[r] % nnics;
        double s      = ranks[r].nnics > 0 ? ranks[r].nics[0].speed_gbps : 0.0;
        if (s > 0.0 && (nic_min == 0.0 || s < nic_min))
            nic_min = s;
    }
    if (nic_min > 0.0)
        c->link[HC_LINK_CROSS_NODE].bw_gbps = nic_min;
    *out = c;
    return HCOMM_SUCCESS;

err_free:
    hc_cluster_destroy(c);
err_nomem:
    hc_error(INIT, "cluster model for %d ranks: out of memory", nranks);
    return HCOMM_ERR_NO_MEMORY;
}

hcomm_status_t hc_cluster_synthetic(int nnodes, int ppn, int nics, int round_robin,
                                    hc_cluster_t **out)
{
    if (out == NULL || nnodes < 1 || ppn < 1 || nics < 1 ||
        (long long)nnodes * ppn > TOPO_MAX_RANKS) {
        hc_error(INIT, "synthetic cluster %d nodes x %d ranks x %d NICs: invalid", nnodes, ppn,
                 nics);
        return HCOMM_ERR_INVALID_ARG;
    }
    hc_cluster_t *c = topo_alloc(nnodes * ppn);
    if (c == NULL)
        goto err_nomem;
    c->nnodes = nnodes;
    for (int r = 0; r < c->nranks; r++) {
        c->node_of[r] = round_robin ? r % nnodes : r / ppn;
        c->numa_of[r] = 0;
    }
    if (topo_group(c) != 0)
        goto err_free;
    for (int r = 0; r < c->nranks; r++)
        c->rail_of[r] = c->local_rank[r] % nics;
    *out = c;
    return HCOMM_SUCCESS;

err_free:
    hc_cluster_destroy(c);
err_nomem:
    hc_error(INIT, "synthetic cluster %d x %d: out of memory", nnodes, ppn);
    return HCOMM_ERR_NO_MEMORY;
}

hc_link_class_t hc_cluster_link(const hc_cluster_t *c, int a, int b)
{
    if (c == NULL || a < 0 || b < 0 || a >= c->nranks || b >= c->nranks)
        return HC_LINK_CROSS_NODE;
    if (a == b)
        return HC_LINK_SELF;
    if (c->node_of[a] != c->node_of[b])
        return HC_LINK_CROSS_NODE;
    /* an unknown NUMA node cannot be told apart: assume the cheaper class */
    if (c->numa_of[a] < 0 || c->numa_of[b] < 0 || c->numa_of[a] == c->numa_of[b])
        return HC_LINK_SAME_NUMA;
    return HC_LINK_CROSS_NUMA;
}
