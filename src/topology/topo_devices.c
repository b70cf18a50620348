/* topo_devices.c - NICs and accelerators of this host, read from sysfs.
 * hwloc's I/O discovery walks every PCI device (about two thirds of its
 * time, which every rank on a host pays at once during init); the few facts
 * the model needs - a NIC's name, speed and NUMA node, an accelerator's bus
 * id - are a directory listing away. */
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "topology/topo_host.h"

#define TOPO_SYS_IB "%s/sys/class/infiniband"
#define TOPO_SYS_NET "%s/sys/class/net"
#define TOPO_SYS_PCI "%s/sys/bus/pci/devices"

/* "" on a real host; a fake tree's folder in tests (hc_topo_set_sysfs_root). */
static const char *sys_root = "";

void hc_topo_set_sysfs_root(const char *root)
{
    sys_root = root != NULL ? root : "";
}

static long topo_read_long(const char *path, int base, long fallback)
{
    char  buf[32];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return fallback;
    char *ok = fgets(buf, sizeof(buf), f);
    fclose(f);
    if (ok == NULL)
        return fallback;
    char *end;
    errno  = 0;
    long v = strtol(buf, &end, base);
    return (errno != 0 || end == buf) ? fallback : v;
}

/* /sys/class/net/<if>/speed is in Mb/s; -1 or absent means unknown (0). */
static double topo_nic_speed(const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), TOPO_SYS_NET "/%s/speed", sys_root, name);
    long mbps = topo_read_long(path, 10, -1);
    return mbps > 0 ? (double)mbps / 8000.0 : 0.0;
}

/* The NUMA node of a device directory or, for a function behind a bus
 * (virtio), of its parent: -1 when the kernel does not say. */
static int32_t topo_dev_numa(const char *devdir)
{
    char real[PATH_MAX], path[PATH_MAX + 16];
    if (realpath(devdir, real) == NULL)
        return -1;
    for (int up = 0; up < 2; up++) {
        snprintf(path, sizeof(path), "%s/numa_node", real);
        if (access(path, R_OK) == 0)
            return (int32_t)topo_read_long(path, 10, -1);
        char *slash = strrchr(real, '/');
        if (slash == NULL || slash == real)
            break;
        *slash = '\0';
    }
    return -1;
}

static hc_topo_nic_t *topo_add_nic(hc_topo_host_t *host, const char *name, int32_t numa)
{
    for (int i = 0; i < host->nnics; i++)
        if (strcmp(host->nics[i].name, name) == 0)
            return NULL;
    if (host->nnics >= HC_TOPO_MAX_NICS || strlen(name) >= sizeof(host->nics[0].name))
        return NULL;
    hc_topo_nic_t *nic = &host->nics[host->nnics++];
    snprintf(nic->name, sizeof(nic->name), "%s", name);
    nic->speed_gbps = topo_nic_speed(nic->name);
    nic->numa       = numa;
    return nic;
}

/* "100 Gb/sec (4X EDR)" in GB/s; 0 when unreadable. */
static double topo_ib_rate(const char *path)
{
    char  buf[64];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0.0;
    double gbits = 0.0;
    if (fgets(buf, sizeof(buf), f) == NULL || sscanf(buf, "%lf", &gbits) != 1)
        gbits = 0.0;
    fclose(f);
    return gbits > 0.0 ? gbits / 8.0 : 0.0;
}

/* RDMA devices' active ports as NICs "mlx5_0:1", with the port's rate: what
 * the ib transport drives. Their IPoIB or RoCE netdevs are then not counted
 * again: each port is one rail. */
static void topo_scan_rdma(hc_topo_host_t *host)
{
    struct dirent **devs = NULL;
    char            dir[PATH_MAX];
    snprintf(dir, sizeof(dir), TOPO_SYS_IB, sys_root);
    int n = scandir(dir, &devs, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *dev = devs[i]->d_name;
        char        path[PATH_MAX], name[PATH_MAX];
        for (int port = 1; port <= 4 && dev[0] != '.'; port++) {
            snprintf(path, sizeof(path), TOPO_SYS_IB "/%s/ports/%d/state", sys_root, dev, port);
            if (topo_read_long(path, 10, 0) != 4) /* "4: ACTIVE" */
                continue;
            snprintf(name, sizeof(name), "%s:%d", dev, port);
            snprintf(path, sizeof(path), TOPO_SYS_IB "/%s/device", sys_root, dev);
            hc_topo_nic_t *nic = topo_add_nic(host, name, topo_dev_numa(path));
            snprintf(path, sizeof(path), TOPO_SYS_IB "/%s/ports/%d/rate", sys_root, dev, port);
            if (nic != NULL)
                nic->speed_gbps = topo_ib_rate(path);
        }
        free(devs[i]);
    }
    free(devs);
}

/* Interfaces backed by a device (PCI, virtio), in name order so every rank of
 * a host numbers its rails alike. */
static void topo_scan_netdevs(hc_topo_host_t *host)
{
    struct dirent **names = NULL;
    char            dir[PATH_MAX];
    snprintf(dir, sizeof(dir), TOPO_SYS_NET, sys_root);
    int n = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char dev[PATH_MAX];
        snprintf(dev, sizeof(dev), TOPO_SYS_NET "/%s/device", sys_root, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && access(dev, F_OK) == 0)
            topo_add_nic(host, names[i]->d_name, topo_dev_numa(dev));
        free(names[i]);
    }
    free(names);
}

/* Virtual interfaces (veth, bridges): a network namespace may have no other. */
static void topo_scan_ifaddrs(hc_topo_host_t *host)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        hc_debug(TOPO, "getifaddrs: %s", strerror(errno));
        return;
    }
    for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next)
        if (i->ifa_name != NULL && !(i->ifa_flags & IFF_LOOPBACK) && (i->ifa_flags & IFF_UP))
            topo_add_nic(host, i->ifa_name, -1);
    freeifaddrs(ifs);
}

/* PCI classes of compute accelerators: 3D controllers (most data-centre
 * GPUs), display controllers (some AMD parts), processing accelerators; VGA
 * only from GPU makers, not the board's management graphics. */
static int topo_is_accelerator(long cls, long vendor)
{
    long base_sub = cls >> 8;
    if (base_sub == 0x0302 || base_sub == 0x0380 || base_sub == 0x1200)
        return 1;
    return base_sub == 0x0300 && (vendor == 0x10de || vendor == 0x1002);
}

static void topo_scan_accelerators(hc_topo_host_t *host)
{
    struct dirent **names = NULL;
    char            dir[PATH_MAX];
    snprintf(dir, sizeof(dir), TOPO_SYS_PCI, sys_root);
    int n = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), TOPO_SYS_PCI "/%s/class", sys_root, names[i]->d_name);
        long cls = topo_read_long(path, 16, -1);
        snprintf(path, sizeof(path), TOPO_SYS_PCI "/%s/vendor", sys_root, names[i]->d_name);
        long   vendor = topo_read_long(path, 16, -1);
        size_t len    = strlen(names[i]->d_name);
        if (names[i]->d_name[0] != '.' && topo_is_accelerator(cls, vendor) &&
            host->ngpus < HC_TOPO_MAX_GPUS && len < sizeof(host->gpus[0]))
            memcpy(host->gpus[host->ngpus++], names[i]->d_name, len + 1);
        free(names[i]);
    }
    free(names);
}

void hc_topo_scan_devices(hc_topo_host_t *host)
{
    topo_scan_rdma(host);
    if (host->nnics == 0)
        topo_scan_netdevs(host);
    if (host->nnics == 0)
        topo_scan_ifaddrs(host);
    topo_scan_accelerators(host);
}
