/* topo_discover.c - what the calling process learns about itself with hwloc:
 * host identity, its CPU binding and NUMA node, NICs and GPUs. */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>

#include "base/hash.h"
#include "base/log.h"
#include "topology/topo.h"

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
    ssize_t n = readlink("/proc/self/ns/net", buf, sizeof(buf) - 1);
    if (n > 0) {
        buf[n] = '\0';
        h      = hc_hash_str(h, buf);
    }
    return h;
}

/* /sys/class/net/<if>/speed is in Mb/s; -1 or absent means unknown (0). */
static double topo_nic_speed(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0.0;
    long mbps = -1;
    if (fscanf(f, "%ld", &mbps) != 1)
        mbps = -1;
    fclose(f);
    return mbps > 0 ? (double)mbps / 8000.0 : 0.0;
}

/* The one NUMA node (OS index) a nodeset names; -1 for none or several. */
static int32_t topo_single_numa(hwloc_const_nodeset_t ns)
{
    if (ns == NULL || hwloc_bitmap_weight(ns) != 1)
        return -1;
    return (int32_t)hwloc_bitmap_first(ns);
}

static void topo_add_nic(hc_rank_topo_t *self, const char *name, int32_t numa)
{
    for (int i = 0; i < self->nnics; i++)
        if (strcmp(self->nics[i].name, name) == 0)
            return;
    if (self->nnics >= HC_TOPO_MAX_NICS)
        return;
    hc_topo_nic_t *nic = &self->nics[self->nnics++];
    snprintf(nic->name, sizeof(nic->name), "%s", name);
    nic->speed_gbps = topo_nic_speed(nic->name);
    nic->numa       = numa;
}

static void topo_add_gpu(hc_rank_topo_t *self, hwloc_obj_t os)
{
    if (self->ngpus >= HC_TOPO_MAX_GPUS)
        return;
    char       *dst = self->gpus[self->ngpus++];
    hwloc_obj_t p   = os->parent;
    if (p != NULL && p->type == HWLOC_OBJ_PCI_DEVICE)
        snprintf(dst, 32, "%04x:%02x:%02x.%01x", p->attr->pcidev.domain, p->attr->pcidev.bus,
                 p->attr->pcidev.dev, p->attr->pcidev.func);
    else
        snprintf(dst, 32, "%s", os->name != NULL ? os->name : "gpu");
}

static void topo_scan_osdevs(hwloc_topology_t topo, hc_rank_topo_t *self)
{
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo, NULL); os != NULL;
         os             = hwloc_get_next_osdev(topo, os)) {
        hwloc_obj_osdev_type_t t = os->attr->osdev.type;
        if (t == HWLOC_OBJ_OSDEV_NETWORK && os->name != NULL) {
            hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, os);
            topo_add_nic(self, os->name, topo_single_numa(anc != NULL ? anc->nodeset : NULL));
        } else if (t == HWLOC_OBJ_OSDEV_GPU || t == HWLOC_OBJ_OSDEV_COPROC) {
            topo_add_gpu(self, os);
        }
    }
}

/* Virtual interfaces (veth, bridges) that hwloc does not list as PCI devices. */
static void topo_scan_ifaddrs(hc_rank_topo_t *self)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        hc_debug(INIT, "getifaddrs: %s", strerror(errno));
        return;
    }
    for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next)
        if (i->ifa_name != NULL && !(i->ifa_flags & IFF_LOOPBACK) && (i->ifa_flags & IFF_UP))
            topo_add_nic(self, i->ifa_name, -1);
    freeifaddrs(ifs);
}

/* Binding, its NUMA node (-1 when it spans several or none), and NUMA count. */
static int topo_binding(hwloc_topology_t topo, hc_rank_topo_t *self)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL)
        return -1;
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0 &&
        hwloc_get_cpubind(topo, set, 0) != 0) {
        hc_debug(INIT, "hwloc_get_cpubind: %s; assuming the whole machine", strerror(errno));
        hwloc_bitmap_copy(set, hwloc_topology_get_topology_cpuset(topo));
    }
    int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    int hits = 0, numa = -1;
    for (int i = 0; i < nnuma; i++) {
        hwloc_obj_t n = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (n != NULL && n->cpuset != NULL && hwloc_bitmap_intersects(n->cpuset, set)) {
            hits++;
            numa = (int)n->os_index;
        }
    }
    self->numa  = hits == 1 ? numa : -1;
    self->nnuma = nnuma > 0 ? nnuma : 1;
    int w       = hwloc_bitmap_weight(set);
    self->ncpus = w > 0 ? w : 1;
    if (hwloc_bitmap_list_snprintf(self->cpuset, sizeof(self->cpuset), set) < 0)
        self->cpuset[0] = '\0';
    hwloc_bitmap_free(set);
    return 0;
}

hcomm_status_t hc_topo_discover(hc_rank_topo_t *self)
{
    hc_rank_topo_t   t;
    hwloc_topology_t topo;
    if (self == NULL)
        return HCOMM_ERR_INVALID_ARG;
    memset(&t, 0, sizeof(t));
    t.host_hash = hc_topo_host_identity(t.hostname, sizeof(t.hostname));
    if (hwloc_topology_init(&topo) != 0) {
        hc_error(INIT, "hwloc_topology_init: %s", strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo) != 0) {
        hc_error(INIT, "hwloc_topology_load: %s", strerror(errno));
        goto err_topo;
    }
    if (topo_binding(topo, &t) != 0) {
        hc_error(INIT, "hwloc_bitmap_alloc: out of memory");
        goto err_topo;
    }
    topo_scan_osdevs(topo, &t);
    if (t.nnics == 0)
        topo_scan_ifaddrs(&t);
    hwloc_topology_destroy(topo);
    *self = t;
    return HCOMM_SUCCESS;

err_topo:
    hwloc_topology_destroy(topo);
    return HCOMM_ERR_SYSTEM;
}
