/* ib_dev.c - device and port discovery: the active ports HCOMM_IB_HCA lets
 * through, their bandwidth, link layer, LID and GID; and whether there is
 * one (the conformance suite's skip). Never run with a device present (see
 * ib.h): on this build machine ibv_get_device_list fails. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/params.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_hca.h"
#include "transport/ib/ib_speed.h"

/* Why no port came through, as notes "mlx5_0:1 down; mlx5_1: ..." */
typedef struct why_buf {
    char  *s;
    size_t len, used;
} why_buf_t;

static void note(why_buf_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(why_buf_t *w, const char *fmt, ...)
{
    if (w->s == NULL || w->used + 3 >= w->len)
        return;
    if (w->used > 0)
        w->used += (size_t)snprintf(w->s + w->used, w->len - w->used, "; ");
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(w->s + w->used, w->len - w->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        w->used += (size_t)n < w->len - w->used ? (size_t)n : w->len - w->used - 1;
}

static int numa_of(const struct ibv_device *dev)
{
    char path[IBV_SYSFS_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/device/numa_node", dev->ibdev_path);
    FILE *f = fopen(path, "r");
    int   n = -1;
    if (f == NULL)
        return -1;
    if (fscanf(f, "%d", &n) != 1)
        n = -1;
    fclose(f);
    return n;
}

/* A RoCE port's GID: the index asked for, else the first RoCE v2 GID that
 * is an IPv4-mapped address. 0, or -1 when there is none. */
static int pick_gid(struct ibv_context *c, int port, int tbl_len, int want, hc_ib_port_t *out)
{
    struct ibv_gid_entry e;
    if (want >= 0) {
        if (want >= tbl_len || ibv_query_gid_ex(c, (uint32_t)port, (uint32_t)want, &e, 0) != 0)
            return -1;
        memcpy(out->gid, e.gid.raw, 16);
        out->gid_index = want;
        return 0;
    }
    for (int i = 0; i < tbl_len; i++) {
        if (ibv_query_gid_ex(c, (uint32_t)port, (uint32_t)i, &e, 0) != 0)
            continue; /* an empty entry: ENODATA */
        if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && hc_ib_gid_v4mapped(e.gid.raw)) {
            memcpy(out->gid, e.gid.raw, 16);
            out->gid_index = i;
            return 0;
        }
    }
    return -1;
}

/* One port: 1 and *out when it is usable, else 0 (noted). */
static int scan_port(struct ibv_device *dev, struct ibv_context *c, int port,
                     const hc_ib_hca_filter_t *f, int gid_want, hc_ib_port_t *out, why_buf_t *w)
{
    const char          *name = ibv_get_device_name(dev);
    struct ibv_port_attr pa;
    if (!hc_ib_hca_match(f, name, port)) {
        note(w, "%s:%d left out by HCOMM_IB_HCA", name, port);
        return 0;
    }
    if (ibv_query_port(c, (uint8_t)port, &pa) != 0) {
        note(w, "%s:%d: ibv_query_port: %s", name, port, strerror(errno));
        return 0;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
        note(w, "%s:%d %s", name, port, ibv_port_state_str(pa.state));
        return 0;
    }
    memset(out, 0, sizeof(*out));
    snprintf(out->nic.name, sizeof(out->nic.name), "%s", name);
    out->nic.port  = port;
    out->nic.gbps  = hc_ib_port_gbps(pa.active_speed, pa.active_width);
    out->nic.numa  = numa_of(dev);
    out->lid       = pa.lid;
    out->mtu       = (uint8_t)pa.active_mtu;
    out->max_msg   = pa.max_msg_sz;
    out->gid_index = -1;
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
        out->nic.link = HC_IB_LINK_ETH;
        if (pick_gid(c, port, pa.gid_tbl_len, gid_want, out) != 0) {
            note(w, "%s:%d: RoCE without %s", name, port,
                 gid_want >= 0 ? "the GID HCOMM_IB_GID_INDEX names"
                               : "a RoCE v2 IPv4 GID (HCOMM_IB_GID_INDEX picks another)");
            return 0;
        }
        return 1;
    }
    out->nic.link = HC_IB_LINK_IB; /* IBV_LINK_LAYER_UNSPECIFIED is InfiniBand too */
    if (pa.lid == 0 || pa.lid >= 0xc000) {
        note(w, "%s:%d: InfiniBand without a unicast LID (0x%x)", name, port, pa.lid);
        return 0;
    }
    union ibv_gid g; /* the port GID, for a GRH across subnets */
    if (ibv_query_gid(c, (uint8_t)port, 0, &g) == 0) {
        memcpy(out->gid, g.raw, 16);
        out->gid_index = 0;
    }
    return 1;
}

/* The usable ports of one device, appended at out[*count] (counting past max). */
static void scan_device(struct ibv_device *dev, const hc_ib_hca_filter_t *f, int gid_want,
                        hc_ib_port_t *out, int max, int *count, why_buf_t *w)
{
    struct ibv_context    *c = ibv_open_device(dev);
    struct ibv_device_attr da;
    if (c == NULL) {
        note(w, "%s: ibv_open_device: %s", ibv_get_device_name(dev), strerror(errno));
        return;
    }
    if (ibv_query_device(c, &da) != 0) {
        note(w, "%s: ibv_query_device: %s", ibv_get_device_name(dev), strerror(errno));
        ibv_close_device(c);
        return;
    }
    for (int p = 1; p <= da.phys_port_cnt; p++) {
        hc_ib_port_t port;
        if (!scan_port(dev, c, p, f, gid_want, &port, w))
            continue;
        if (*count < max)
            out[*count] = port;
        (*count)++;
    }
    ibv_close_device(c);
}

int hc_ib_ports_scan(const char *hca, int gid_index, hc_ib_port_t *out, int max, char *why,
                     size_t wl)
{
    hc_ib_hca_filter_t f;
    char               perr[HC_IB_WHY];
    why_buf_t          w = {why, wl, 0};
    if (why != NULL && wl > 0)
        why[0] = '\0';
    if (hc_ib_hca_parse(hca, &f, perr, sizeof(perr)) != 0) {
        note(&w, "HCOMM_IB_HCA=%s: %s", hca, perr);
        return -1;
    }
    int                 n = 0, count = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL) {
        note(&w, "ibv_get_device_list: %s", strerror(errno));
        return 0;
    }
    if (n == 0)
        note(&w, "ibv_get_device_list: no RDMA devices");
    for (int i = 0; i < n; i++)
        scan_device(list[i], &f, gid_index, out, max, &count, &w);
    ibv_free_device_list(list);
    return count;
}

const char *hc_ib_unusable(char *buf, size_t len)
{
    const hc_params_t *prm = hc_params_get();
    hc_ib_port_t       port;
    char               why[HC_IB_WHY];
    int n = hc_ib_ports_scan(prm->ib_hca, prm->ib_gid_index, &port, 1, why, sizeof(why));
    if (n > 0)
        return NULL;
    snprintf(buf, len, "no RDMA device with an active port (%s)", why);
    return buf;
}
