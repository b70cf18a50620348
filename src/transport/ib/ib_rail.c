/* ib_rail.c - one rail of a context: the port's device context, protection
 * domain, completion queue and the registration cache of user buffers on it.
 * A rail that does not open is warned about, and the context goes without ib
 * (HCOMM_ERR_UNSUPPORTED).
 * Never run with a device present (see ib.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "transport/ib/ib.h"

#define CQ_FIRST_EPS 64 /* endpoints the CQ has room for at first; it grows */

static int rail_reg(void *arg, void *addr, size_t len, void **handle, uint32_t *lkey,
                    uint32_t *rkey)
{
    hc_ib_rail_t  *r = arg;
    struct ibv_mr *mr =
        ibv_reg_mr(r->pd, addr, len,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    if (mr == NULL && (errno == EFAULT || errno == EACCES)) /* read-only memory: a send's */
        mr = ibv_reg_mr(r->pd, addr, len, IBV_ACCESS_REMOTE_READ);
    if (mr == NULL) {
        int err = errno != 0 ? errno : EIO;
        hc_debug(NET, "ib %s: ibv_reg_mr of %zu bytes at %p: %s", r->port.nic.name, len, addr,
                 strerror(err));
        return err;
    }
    *handle = mr;
    *lkey   = mr->lkey;
    *rkey   = mr->rkey;
    return 0;
}

static void rail_dereg(void *arg, void *handle)
{
    (void)arg;
    ibv_dereg_mr(handle);
}

static struct ibv_context *open_by_name(const char *name)
{
    int                 n;
    struct ibv_context *c    = NULL;
    struct ibv_device **list = ibv_get_device_list(&n);
    for (int i = 0; list != NULL && i < n && c == NULL; i++)
        if (strcmp(ibv_get_device_name(list[i]), name) == 0)
            c = ibv_open_device(list[i]);
    if (list != NULL)
        ibv_free_device_list(list);
    return c;
}

static int imin(int a, int b)
{
    return a < b ? a : b;
}

hcomm_status_t hc_ib_rail_open(hc_ib_rail_t *r, const hc_ib_port_t *port, int nranks)
{
    struct ibv_device_attr da;
    const char            *name = port->nic.name;
    memset(r, 0, sizeof(*r));
    r->port = *port;
    r->vctx = open_by_name(name);
    if (r->vctx == NULL || ibv_query_device(r->vctx, &da) != 0) {
        hc_warn(NET, "ib %s: cannot open the device: %s", name, strerror(errno));
        goto err;
    }
    r->max_cqe = da.max_cqe;
    r->rd_atom = (uint8_t)imin(imin(da.max_qp_init_rd_atom, 16), 255);
    r->rd_dest = (uint8_t)imin(imin(da.max_qp_rd_atom, 16), 255);
    if (r->rd_atom == 0 || r->rd_dest == 0) {
        hc_warn(NET, "ib %s: the device takes no RDMA reads", name);
        goto err;
    }
    r->pd = ibv_alloc_pd(r->vctx);
    if (r->pd == NULL) {
        hc_warn(NET, "ib %s: ibv_alloc_pd: %s", name, strerror(errno));
        goto err;
    }
    int eps   = imin(nranks > 1 ? nranks - 1 : 1, CQ_FIRST_EPS);
    r->cq_cap = imin(eps * HC_IB_CQ_PER_EP + 64, da.max_cqe);
    r->cq     = ibv_create_cq(r->vctx, r->cq_cap, NULL, NULL, 0);
    if (r->cq == NULL) {
        hc_warn(NET, "ib %s: ibv_create_cq(%d): %s", name, r->cq_cap, strerror(errno));
        goto err;
    }
    r->cq_cap = r->cq->cqe;
    long page = sysconf(_SC_PAGESIZE);
    hc_ib_rcache_init(&r->rcache, HC_IB_RCACHE_ENTRIES, HC_IB_RCACHE_BYTES,
                      page > 0 ? (size_t)page : 4096, rail_reg, rail_dereg, r);
    return HCOMM_SUCCESS;

err:
    hc_ib_rail_close(r);
    return HCOMM_ERR_SYSTEM;
}

void hc_ib_rail_close(hc_ib_rail_t *r)
{
    if (r->pd != NULL)
        hc_ib_rcache_fini(&r->rcache);
    if (r->cq != NULL)
        ibv_destroy_cq(r->cq);
    if (r->pd != NULL)
        ibv_dealloc_pd(r->pd);
    if (r->vctx != NULL)
        ibv_close_device(r->vctx);
    r->cq   = NULL;
    r->pd   = NULL;
    r->vctx = NULL;
}

hcomm_status_t hc_ib_rail_reserve(hc_ib_rail_t *r)
{
    int need = r->cq_used + HC_IB_CQ_PER_EP;
    if (need > r->max_cqe) {
        hc_error(NET,
                 "ib %s: its completion queue holds at most %d entries: no room for "
                 "another peer",
                 r->port.nic.name, r->max_cqe);
        return HCOMM_ERR_NO_MEMORY;
    }
    if (need > r->cq_cap) {
        int cap = imin(need > 2 * r->cq_cap ? need : 2 * r->cq_cap, r->max_cqe);
        int rc  = ibv_resize_cq(r->cq, cap);
        if (rc != 0) {
            hc_error(NET, "ib %s: ibv_resize_cq(%d): %s", r->port.nic.name, cap, strerror(rc));
            return HCOMM_ERR_SYSTEM;
        }
        r->cq_cap = r->cq->cqe;
    }
    r->cq_used = need;
    return HCOMM_SUCCESS;
}
