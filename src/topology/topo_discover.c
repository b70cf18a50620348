/* topo_discover.c - what the calling process learns about itself: host
 * identity, the host's NUMA nodes (hwloc; once per host, topo_share.c), NICs
 * and accelerators (topo_devices.c), and where its CPU binding sits. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hwloc.h>

#include "base/hash.h"
#include "base/log.h"
#include "topology/topo_host.h"

uint64_t hc_topo_host_identity(char *hostname, size_t size)
{
    char buf[256] = "";
    memset(hostname, 0, size);
    gethostname(hostname, size - 1);
    uint64_t h = hc_hash_str(HC_HASH_FNV_SEED, hostname);
    FILE    *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(buf, sizeof(buf), f) != NULL)
            h = hc_hash_str(h, buf);
        fclose(f);
    }
    /* ranks that share a host's kernel but not its network, its process
     * ids (a peer's liveness is read by pid) or its /dev/shm (containers
     * on the host network, each with a private /dev/shm) are not one host
     * to shared memory */
    static const char *const ns[] = {"/proc/self/ns/net", "/proc/self/ns/pid"};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        ssize_t n = readlink(ns[i], buf, sizeof(buf) - 1);
        if (n > 0) {
            buf[n] = '\0';
            h      = hc_hash_str(h, buf);
        }
    }
    struct stat st;
    if (stat("/dev/shm", &st) == 0) {
        snprintf(buf, sizeof(buf), "shm %llu %llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
        h = hc_hash_str(h, buf);
    }
    return h;
}

hcomm_status_t hc_topo_host_discover(hc_topo_host_t *host)
{
    hwloc_topology_t topo;
    memset(host, 0, sizeof(*host));
    if (hwloc_topology_init(&topo) != 0) {
        hc_error(TOPO, "hwloc_topology_init: %s", strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    /* CPUs and NUMA only: devices come from sysfs (topo_devices.c) */
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(topo) != 0) {
        hc_error(TOPO, "hwloc_topology_load: %s", strerror(errno));
        hwloc_topology_destroy(topo);
        return HCOMM_ERR_SYSTEM;
    }
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n && host->nnuma < HC_TOPO_MAX_NUMA; i++) {
        hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (node == NULL || node->cpuset == NULL)
            continue;
        char *list = host->numa_cpus[host->nnuma];
        int   len  = hwloc_bitmap_list_snprintf(list, HC_TOPO_CPULIST_MAX, node->cpuset);
        if (len < 0 || len >= HC_TOPO_CPULIST_MAX) {
            hc_warn(TOPO, "NUMA node %u: CPU list longer than %d characters; node ignored",
                    node->os_index, HC_TOPO_CPULIST_MAX - 1);
            continue;
        }
        host->numa_os[host->nnuma++] = (int32_t)node->os_index;
    }
    hwloc_topology_destroy(topo);
    hc_topo_scan_devices(host);
    /* the kernel says -1 where there is one node to be on */
    for (int i = 0; i < host->nnics && host->nnuma == 1; i++)
        if (host->nics[i].numa < 0)
            host->nics[i].numa = host->numa_os[0];
    return HCOMM_SUCCESS;
}

/* The calling thread's CPU binding (every CPU when unknown), its NUMA node
 * (-1 when it spans several or none) and the host's node count. */
static hcomm_status_t topo_place(const hc_topo_host_t *host, hc_rank_topo_t *self)
{
    hwloc_bitmap_t bind = hwloc_bitmap_alloc(), node = hwloc_bitmap_alloc();
    cpu_set_t      set;
    if (bind == NULL || node == NULL) {
        hwloc_bitmap_free(bind);
        hwloc_bitmap_free(node);
        hc_error(TOPO, "hwloc_bitmap_alloc: out of memory");
        return HCOMM_ERR_NO_MEMORY;
    }
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
            if (CPU_ISSET(cpu, &set))
                hwloc_bitmap_set(bind, (unsigned)cpu);
    } else {
        hc_debug(TOPO, "sched_getaffinity: %s; assuming every CPU", strerror(errno));
    }
    int hits = 0, numa = -1;
    for (int i = 0; i < host->nnuma; i++) {
        if (hwloc_bitmap_list_sscanf(node, host->numa_cpus[i]) != 0)
            continue;
        if (hwloc_bitmap_iszero(bind) || hwloc_bitmap_intersects(node, bind)) {
            hits++;
            numa = host->numa_os[i];
        }
    }
    self->numa  = hits == 1 ? numa : -1;
    self->nnuma = host->nnuma > 0 ? host->nnuma : 1;
    int w       = hwloc_bitmap_weight(bind);
    self->ncpus = w > 0 ? w : 1;
    if (w <= 0 || hwloc_bitmap_list_snprintf(self->cpuset, sizeof(self->cpuset), bind) < 0)
        snprintf(self->cpuset, sizeof(self->cpuset), "?");
    hwloc_bitmap_free(bind);
    hwloc_bitmap_free(node);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_topo_discover(hc_rank_topo_t *self, const char *share_name, double timeout,
                                int *owner)
{
    if (self == NULL || owner == NULL)
        return HCOMM_ERR_INVALID_ARG;
    hc_topo_host_t *host = calloc(1, sizeof(*host));
    if (host == NULL)
        return HCOMM_ERR_NO_MEMORY;
    *owner = 0;
    memset(self, 0, sizeof(*self));
    self->host_hash   = hc_topo_host_identity(self->hostname, sizeof(self->hostname));
    hcomm_status_t st = share_name != NULL ? hc_topo_share_get(share_name, timeout, host, owner)
                                           : hc_topo_host_discover(host);
    if (st == HCOMM_SUCCESS)
        st = topo_place(host, self);
    if (st == HCOMM_SUCCESS) {
        self->nnics = host->nnics;
        memcpy(self->nics, host->nics, sizeof(self->nics));
        self->ngpus = host->ngpus;
        memcpy(self->gpus, host->gpus, sizeof(self->gpus));
    }
    free(host);
    return st;
}
