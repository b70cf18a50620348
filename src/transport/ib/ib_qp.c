/* ib_qp.c - an endpoint's reliable-connected QPs (one per rail): creation,
 * the INIT -> RTR -> RTS transitions with the peer's connection data, and
 * the work requests the data path posts. Never run with a device present
 * (see ib.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "transport/ib/ib.h"

static uint32_t random_psn(void)
{
    uint32_t v;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
        v = (uint32_t)hc_clock_ts_ns(CLOCK_MONOTONIC) * 2654435761u;
    return v & 0xffffff;
}

hcomm_status_t hc_ib_qp_create(hc_tl_ep_t *ep, int i)
{
    hc_ib_rail_t           *r  = &ep->ctx->rail[i];
    struct ibv_qp_init_attr ia = {
        .send_cq = r->cq,
        .recv_cq = r->cq,
        .qp_type = IBV_QPT_RC,
        .cap     = {.max_send_wr  = HC_IB_SQ_DEPTH,
                    .max_recv_wr  = i == 0 ? HC_IB_NSLOTS : 1,
                    .max_send_sge = 1,
                    .max_recv_sge = 1},
    };
    ep->qp[i] = ibv_create_qp(r->pd, &ia);
    if (ep->qp[i] == NULL) {
        hc_error(NET, "peer %d: ib %s: ibv_create_qp: %s", ep->peer, r->port.nic.name,
                 strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    struct ibv_qp_attr a = {
        .qp_state   = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num   = (uint8_t)r->port.nic.port,
        .qp_access_flags =
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
    };
    int rc = ibv_modify_qp(ep->qp[i], &a,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        hc_error(NET, "peer %d: ib %s: QP to INIT: %s", ep->peer, r->port.nic.name, strerror(rc));
        return HCOMM_ERR_SYSTEM;
    }
    ep->psn[i] = random_psn();
    return HCOMM_SUCCESS;
}

static int gid_known(const uint8_t gid[16])
{
    static const uint8_t zero[16];
    return memcmp(gid, zero, 16) != 0;
}

/* The address vector: a GRH on RoCE (its only address), and on InfiniBand
 * when both GIDs are known and the peer's subnet prefix is another. */
static void set_av(const hc_ib_rail_t *r, const hc_ib_rail_conn_t *rc, struct ibv_ah_attr *ah)
{
    ah->port_num = (uint8_t)r->port.nic.port;
    ah->dlid     = rc->lid;
    int global   = r->port.nic.link == HC_IB_LINK_ETH ||
                 (r->port.gid_index >= 0 && gid_known(r->port.gid) && gid_known(rc->gid) &&
                  memcmp(r->port.gid, rc->gid, 8) != 0);
    if (!global)
        return;
    ah->is_global = 1;
    memcpy(ah->grh.dgid.raw, rc->gid, 16);
    ah->grh.sgid_index = (uint8_t)r->port.gid_index;
    ah->grh.hop_limit  = 255;
}

hcomm_status_t hc_ib_qp_connect(hc_tl_ep_t *ep, int i)
{
    const hc_ib_rail_t      *r  = &ep->ctx->rail[i];
    const hc_ib_rail_conn_t *rc = &ep->remote.rail[i];
    if (rc->link != r->port.nic.link) {
        hc_error(NET, "peer %d: rail %d is %s here and %s there", ep->peer, i,
                 r->port.nic.link == HC_IB_LINK_IB ? "InfiniBand" : "RoCE",
                 rc->link == HC_IB_LINK_IB ? "InfiniBand" : "RoCE");
        return HCOMM_ERR_PROTOCOL;
    }
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state           = IBV_QPS_RTR;
    a.path_mtu           = (enum ibv_mtu)(r->port.mtu < rc->mtu ? r->port.mtu : rc->mtu);
    a.dest_qp_num        = rc->qpn;
    a.rq_psn             = rc->psn;
    a.max_dest_rd_atomic = r->rd_dest;
    a.min_rnr_timer      = 12;
    set_av(r, rc, &a.ah_attr);
    int rc1 = ibv_modify_qp(ep->qp[i], &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    memset(&a, 0, sizeof(a));
    a.qp_state      = IBV_QPS_RTS;
    a.timeout       = HC_IB_RC_TIMEOUT;
    a.retry_cnt     = HC_IB_RC_RETRY;
    a.rnr_retry     = 7; /* forever: credits keep receives posted ahead */
    a.sq_psn        = ep->psn[i];
    a.max_rd_atomic = r->rd_atom < rc->rd_dest ? r->rd_atom : rc->rd_dest;
    int rc2         = rc1 != 0
                          ? rc1
                          : ibv_modify_qp(ep->qp[i], &a,
                                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                              IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc2 != 0) {
        hc_error(NET, "peer %d: ib %s: QP to %s: %s", ep->peer, r->port.nic.name,
                 rc1 != 0 ? "RTR" : "RTS", strerror(rc2));
        return HCOMM_ERR_SYSTEM;
    }
    return HCOMM_SUCCESS;
}

void hc_ib_qp_error(hc_tl_ep_t *ep)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    for (int i = 0; i < ep->nrails; i++)
        if (ep->qp[i] != NULL)
            ibv_modify_qp(ep->qp[i], &a, IBV_QP_STATE);
}

int hc_ib_post_recv(hc_tl_ep_t *ep, int n)
{
    struct ibv_recv_wr wr[HC_IB_NSLOTS], *bad;
    if (n <= 0)
        return 0;
    for (int k = 0; k < n && k < HC_IB_NSLOTS; k++) {
        memset(&wr[k], 0, sizeof(wr[k]));
        wr[k].wr_id = hc_ib_wr_id(ep->id, HC_IB_WR_RECV, 0, 0);
        wr[k].next  = k + 1 < n && k + 1 < HC_IB_NSLOTS ? &wr[k + 1] : NULL;
    }
    return ibv_post_recv(ep->qp[0], wr, &bad);
}

int hc_ib_post_slot(hc_tl_ep_t *ep, uint32_t slot, uint32_t len, uint32_t imm)
{
    struct ibv_sge     sge = {.addr   = (uintptr_t)(ep->tx_slots + (size_t)slot * HC_IB_SLOT_BYTES),
                              .length = len,
                              .lkey   = ep->mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id               = hc_ib_wr_id(ep->id, HC_IB_WR_SLOT, 0, 0);
    wr.sg_list             = len > 0 ? &sge : NULL;
    wr.num_sge             = len > 0 ? 1 : 0;
    wr.opcode              = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags          = IBV_SEND_SIGNALED;
    wr.imm_data            = htonl(imm);
    wr.wr.rdma.remote_addr = ep->remote.slots_addr + (uint64_t)slot * ep->remote.slot_size;
    wr.wr.rdma.rkey        = ep->remote.rkey;
    return ibv_post_send(ep->qp[0], &wr, &bad);
}

int hc_ib_post_ctrl(hc_tl_ep_t *ep)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)ep->ctrl_out, .length = HC_IB_CTRL_BYTES, .lkey = ep->mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id               = hc_ib_wr_id(ep->id, HC_IB_WR_CTRL, 0, 0);
    wr.sg_list             = &sge;
    wr.num_sge             = 1;
    wr.opcode              = IBV_WR_RDMA_WRITE;
    wr.send_flags          = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = ep->remote.ctrl_addr;
    wr.wr.rdma.rkey        = ep->remote.rkey;
    return ibv_post_send(ep->qp[0], &wr, &bad);
}

int hc_ib_post_read(hc_tl_ep_t *ep, int rail, uint64_t chunk, void *dst, uint32_t lkey,
                    uint64_t off, uint64_t len)
{
    struct ibv_sge     sge = {.addr = (uintptr_t)dst, .length = (uint32_t)len, .lkey = lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id               = hc_ib_wr_id(ep->id, HC_IB_WR_READ, (unsigned)rail, (uint32_t)chunk);
    wr.sg_list             = &sge;
    wr.num_sge             = 1;
    wr.opcode              = IBV_WR_RDMA_READ;
    wr.send_flags          = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = ep->rd.rts.addr + off;
    wr.wr.rdma.rkey        = ep->rd.rts.rkey[rail];
    return ibv_post_send(ep->qp[rail], &wr, &bad);
}
