/* topo_host.h - what discovery learns about a host as a whole (private to
 * topology/): NUMA nodes with their CPUs, NICs, accelerators. One rank per
 * host discovers it and the others of the host read it (topo_share.c); each
 * rank then places itself from its own CPU binding (topo_discover.c). */
#ifndef HC_TOPO_HOST_H
#define HC_TOPO_HOST_H

#include "topology/topo.h"

#define HC_TOPO_MAX_NUMA 64
#define HC_TOPO_CPULIST_MAX 512 /* "0-27,56-83": a node's CPUs as a list */

typedef struct hc_topo_host {
    int32_t       nnuma;
    int32_t       numa_os[HC_TOPO_MAX_NUMA]; /* OS index of each node */
    char          numa_cpus[HC_TOPO_MAX_NUMA][HC_TOPO_CPULIST_MAX];
    int32_t       nnics;
    hc_topo_nic_t nics[HC_TOPO_MAX_NICS];
    int32_t       ngpus;
    char          gpus[HC_TOPO_MAX_GPUS][32];
} hc_topo_host_t;

/* hwloc's NUMA nodes, then sysfs's devices (topo_discover.c). */
hcomm_status_t hc_topo_host_discover(hc_topo_host_t *host);
/* Adds the host's NICs and accelerators (topo_devices.c): RDMA ports when
 * some is active, else network interfaces. */
void hc_topo_scan_devices(hc_topo_host_t *host);
/* Tests: read sysfs under root ("/tmp/x" for /tmp/x/sys/...); NULL: the host's. */
void hc_topo_set_sysfs_root(const char *root);
/* The host's record from the rank of this host that discovers it first under
 * share_name, or from this rank's own discovery when that rank is gone or
 * slower than timeout seconds. *owner: this rank wrote the record (and
 * removes it with hc_topo_share_remove). */
hcomm_status_t hc_topo_share_get(const char *share_name, double timeout, hc_topo_host_t *host,
                                 int *owner);

#endif
