/* comm_topo.c - a communicator's cluster model and plans, built at init from
 * every rank's hwloc discovery or loaded from HCOMM_TOPO_FILE. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"

/* Ranks of one host on different model nodes must not share memory: give
 * each node its own host identity for the transports' reachability test. */
static void topo_apply_nodes(const hc_cluster_t *cl, hc_peer_info_t *peers)
{
    for (int r = 0; r < cl->nranks; r++)
        peers[r].host_hash ^= 0x9e3779b97f4a7c15ull * (uint64_t)(cl->node_of[r] + 1);
}

/* Written beside the file and renamed over it: a rank still loading the same
 * path (HCOMM_TOPO_FILE too) reads the old file or the new, never an
 * emptied one. */
static void topo_dump(const hc_cluster_t *cl, const char *path)
{
    char tmp[sizeof(((hc_params_t *)0)->topo_dump_file) + 32];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        hc_warn(INIT, "HCOMM_TOPO_DUMP_FILE %s: %s", tmp, strerror(errno));
        return;
    }
    int ok = hc_cluster_dump(cl, f) == HCOMM_SUCCESS;
    ok &= fclose(f) == 0;
    if (!ok)
        hc_warn(INIT, "HCOMM_TOPO_DUMP_FILE %s: writing the model failed", tmp);
    else if (rename(tmp, path) != 0)
        hc_warn(INIT, "HCOMM_TOPO_DUMP_FILE %s: %s", path, strerror(errno));
    else
        return;
    unlink(tmp);
}

hcomm_status_t hc_comm_topo_setup(hcomm_comm_t comm, const hc_rank_topo_t *all,
                                  hc_peer_info_t *peers)
{
    const hc_cluster_t *parent  = comm->parent != NULL ? comm->parent->model : NULL;
    const hc_params_t *p       = hc_params_get();
    hc_cluster_t      *cluster = NULL;
    hcomm_status_t     st;

    /* a split child keeps its parent's nodes; the file describes the parent */
    if (p->topo_file[0] != '\0' && comm->parent == NULL) {
        st = hc_cluster_load(p->topo_file, comm->nranks, &cluster);
        if (st != HCOMM_SUCCESS)
            return st;
        topo_apply_nodes(cluster, peers);
        hc_info(INIT, "topology from %s: %d nodes", p->topo_file, cluster->nnodes);
    } else {
        st = hc_cluster_build(all, comm->nranks, &cluster);
        if (st != HCOMM_SUCCESS)
            return st;
        if (parent != NULL) { /* the same links: the file's costs, or those measured */
            memcpy(cluster->link, parent->link, sizeof(cluster->link));
            cluster->reduce_gbps = parent->reduce_gbps;
        }
    }
    const hc_link_cost_t *x = &cluster->link[HC_LINK_CROSS_NODE];
    hc_debug(INIT, "cross-node link: %g us, %g GB/s (%s)", x->alpha_us, x->bw_gbps,
             parent != NULL            ? "the parent communicator's"
             : p->topo_file[0] != '\0' ? "the topology file's"
                                       : "discovery's");
    /* the world's model: a split or shrunk child (whose rank 0 may be another
     * process) would replace it with its own */
    if (comm->rank == 0 && comm->parent == NULL && p->topo_dump_file[0] != '\0')
        topo_dump(cluster, p->topo_dump_file);
    return hc_plans_build(cluster, p->rings, &comm->plans);
}
