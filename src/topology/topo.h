/* topo.h - the cluster model: where every rank sits (node, NUMA domain, NIC),
 * the link classes between ranks with their costs, built from each rank's own
 * discovery (hwloc) or loaded from a topology file. Plans (plan.h) and the
 * cost model read it; nothing here moves data. */
#ifndef HC_TOPO_H
#define HC_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hcomm.h"

#define HC_TOPO_NAME_MAX 64
#define HC_TOPO_MAX_NICS 8
#define HC_TOPO_MAX_GPUS 8

typedef enum {
    HC_LINK_SELF = 0,    /* a rank and itself */
    HC_LINK_SAME_NUMA,   /* same node, same NUMA domain */
    HC_LINK_CROSS_NUMA,  /* same node, different NUMA domains */
    HC_LINK_CROSS_NODE,  /* different (possibly virtual) nodes: the network */
    HC_LINK_CLASS_COUNT
} hc_link_class_t;

/* alpha-beta-gamma: time(bytes) = alpha + bytes / bw; reductions cost bytes / reduce_bw. */
typedef struct hc_link_cost {
    double alpha_us;  /* latency per message, microseconds */
    double bw_gbps;   /* bandwidth, GB/s (1e9 bytes per second) */
} hc_link_cost_t;

typedef struct hc_topo_nic {
    char   name[16];   /* "eth0", "ib0" */
    double speed_gbps; /* link speed in GB/s, 0 when unknown */
    int32_t numa;      /* NUMA node the NIC hangs off, -1 when unknown */
} hc_topo_nic_t;

/* What one rank discovers about itself: fixed size, gathered at init. */
typedef struct hc_rank_topo {
    char          hostname[HC_TOPO_NAME_MAX];
    uint64_t      host_hash;           /* as hc_peer_info_t: same kernel and namespace */
    int32_t       numa;                /* NUMA node of the CPUs it is bound to; -1: several/unknown */
    int32_t       nnuma;               /* NUMA nodes on the host */
    int32_t       ncpus;               /* CPUs in its binding */
    char          cpuset[HC_TOPO_NAME_MAX]; /* its binding as a list, "0-3,8" */
    int32_t       nnics;
    hc_topo_nic_t nics[HC_TOPO_MAX_NICS];
    int32_t       ngpus;
    char          gpus[HC_TOPO_MAX_GPUS][32]; /* PCI bus ids of the accelerators */
} hc_rank_topo_t;

/* The model. Nodes are numbered in order of their lowest rank; within a node,
 * ranks keep rank order (local rank 0, 1, ...). */
#define HC_CLUSTER_COST_SLOTS 8 /* >= HC_COST_ALGO_COUNT (cost.h) */

typedef struct hc_cluster {
    int             nranks, nnodes;
    int            *node_of;       /* [nranks]: node index of each rank */
    int            *local_rank;    /* [nranks]: index of the rank within its node */
    int            *numa_of;       /* [nranks]: NUMA node, -1 unknown */
    int            *rail_of;       /* [nranks]: NIC index used for cross-node traffic */
    int            *node_first;    /* [nnodes + 1]: node n's ranks are node_ranks[node_first[n] ..] */
    int            *node_ranks;    /* [nranks]: ranks grouped by node, rank order inside */
    hc_link_cost_t  link[HC_LINK_CLASS_COUNT];
    double          reduce_gbps;   /* gamma: local reduction bandwidth, GB/s */
    double          step_us;       /* least cost of any dependent step, measured with
                                    * every rank busy (0: unknown; links' alphas) */
    double          small_us[HC_CLUSTER_COST_SLOTS]; /* per hc_cost_algo_t: its measured
                                    * 8-byte allreduce, a floor on its time at any size
                                    * (0: not measured) */
    hc_rank_topo_t *ranks;         /* [nranks] or NULL (synthetic models) */
} hc_cluster_t;

/* This process's host identity: a hash of hostname, kernel boot id and network
 * namespace (equal: same kernel, same /dev/shm, same network stack); also
 * writes the hostname (size bytes). The communicator and discovery share it. */
uint64_t hc_topo_host_identity(char *hostname, size_t size);

/* Fills *self: this host (hwloc and sysfs) and where the calling thread's CPU
 * binding sits in it. With share_name (a shared-memory name every rank of one
 * communicator computes alike), one rank per host discovers and the others
 * read its record, waiting at most timeout seconds; *owner is then set on the
 * rank that wrote the record, which removes it with hc_topo_share_remove once
 * every rank of the host is past discovery. NULL: discover alone. */
hcomm_status_t hc_topo_discover(hc_rank_topo_t *self, const char *share_name, double timeout,
                                int *owner);
void           hc_topo_share_remove(const char *share_name);

/* Builds the model from every rank's discovery (ranks[r] for r < nranks); takes
 * no ownership of ranks (copies). Default link costs per class come from the
 * discovered NIC speeds and built-in shared-memory figures. */
hcomm_status_t hc_cluster_build(const hc_rank_topo_t *ranks, int nranks, hc_cluster_t **out);

/* A synthetic model: nnodes x ppn ranks (node-major rank order unless
 * round_robin, then rank r is on node r % nnodes), nics NICs per node with
 * rails assigned by local rank. For plans at scales this machine cannot run. */
hcomm_status_t hc_cluster_synthetic(int nnodes, int ppn, int nics, int round_robin,
                                    hc_cluster_t **out);

void hc_cluster_destroy(hc_cluster_t *c);

/* Whether every node holds as many ranks (what the hierarchical alltoall needs). */
int hc_cluster_nodes_equal(const hc_cluster_t *c);

hc_link_class_t hc_cluster_link(const hc_cluster_t *c, int a, int b);

/* Topology files (XML, docs/topology.md): write the model; load one, whose
 * node assignment may put ranks of one host on different (virtual) nodes. A
 * loaded file must describe exactly nranks ranks. */
hcomm_status_t hc_cluster_dump(const hc_cluster_t *c, FILE *f);
hcomm_status_t hc_cluster_load(const char *path, int nranks, hc_cluster_t **out);

#endif
