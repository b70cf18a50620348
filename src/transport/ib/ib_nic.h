/* ib_nic.h - an RDMA port as the ib transport uses it, and whether this host
 * has one, for code outside the folder (the conformance suite's skip). Plain
 * types, no verbs header. The topology model reads the same ports from sysfs
 * (topology/topo_devices.c). Built only with libibverbs (HC_HAVE_VERBS). */
#ifndef HC_TL_IB_NIC_H
#define HC_TL_IB_NIC_H

#include <stddef.h>

typedef struct hc_ib_nic {
    char   name[64]; /* the device, "mlx5_0" */
    int    port;     /* 1, 2, ... */
    int    link;     /* HC_IB_LINK_IB (1) or HC_IB_LINK_ETH (2: RoCE) */
    double gbps;     /* data bandwidth, GB/s (1e9 bytes/s); 0 when unknown */
    int    numa;     /* the NUMA node the device hangs off, -1 when unknown */
} hc_ib_nic_t;

/* NULL when this host has an active port the transport can use; else why
 * not, written to buf ("no RDMA device with an active port
 * (ibv_get_device_list: no devices)"). */
const char *hc_ib_unusable(char *buf, size_t len);

#endif
