/* plans.c - a cluster model with every plan built on it, as one object. */
#include <string.h>

#include "topology/plan.h"

hcomm_status_t hc_plans_build(hc_cluster_t *cluster, int nrings, hc_plans_t *out)
{
    memset(out, 0, sizeof(*out));
    out->cluster      = cluster;
    hcomm_status_t st = hc_plan_rings(cluster, nrings > 0 ? nrings : 1, &out->rings);
    if (st == HCOMM_SUCCESS)
        st = hc_plan_double_tree(cluster, out->trees);
    if (st == HCOMM_SUCCESS)
        st = hc_plan_hier(cluster, &out->hier);
    if (st != HCOMM_SUCCESS)
        hc_plans_free(out);
    return st;
}

void hc_plans_free(hc_plans_t *p)
{
    hc_plan_rings_free(&p->rings);
    hc_plan_tree_free(&p->trees[0]);
    hc_plan_tree_free(&p->trees[1]);
    hc_plan_hier_free(&p->hier);
    hc_cluster_destroy(p->cluster);
    memset(p, 0, sizeof(*p));
}
