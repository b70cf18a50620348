/* tl_variants.c - the transports the suite runs, one line each. A new transport
 * (ofi, ucx, ib) adds its line: its ops table, the parameters it runs with, and
 * a function that says why it cannot run here (no hardware, no provider), so
 * that its cases SKIP with that reason instead of passing or failing. Variants
 * of one transport differ by parameters (tune) or environment (env), e.g.
 * FI_PROVIDER=tcp and FI_PROVIDER=shm for ofi. */
#include <stddef.h>

#include "tl_suite.h"
#ifdef HC_HAVE_VERBS
#include "transport/ib/ib_nic.h"
#endif

/* tl_shm_only.c, tl_tcp_only.c */
extern const hc_tlt_case_t hc_tlt_shm_cases[], hc_tlt_tcp_cases[], hc_tlt_tcp4_cases[];
const char                *hc_tlt_shm_unusable(void);
int                        hc_tlt_shm_leftovers(const uint8_t *cookie);
const char                *hc_tlt_tcp_unusable(void);

/* Explicit values, so that HCOMM_* in the caller's environment change nothing. */
static void tune_shm(hc_params_t *prm)
{
    prm->shm_ring_bytes = HC_TLT_MIB;
    prm->shm_cma_min    = HC_TLT_MIB; /* 1 MiB and up in one copy, where permitted */
}

static void tune_tcp(hc_params_t *prm)
{
    prm->tcp_nsocks     = 1;
    prm->tcp_stripe_min = HC_TLT_MIB;
}

/* Four sockets, and a threshold below one chunk (64 KiB): messages from 4 KiB
 * up are striped, the small ones all on the first socket. */
static void tune_tcp4(hc_params_t *prm)
{
    prm->tcp_nsocks     = 4;
    prm->tcp_stripe_min = 4096;
}

#ifdef HC_HAVE_VERBS
/* Where no port is active (no RDMA device, none up, or HCOMM_IB_HCA leaves
 * none): "no RDMA device with an active port (ibv_get_device_list: ...)".
 * The variant has no tune: HCOMM_IB_HCA and HCOMM_IB_GID_INDEX from the
 * environment pick the device (rxe0 for soft-RoCE, say). */
static const char *ib_unusable(void)
{
    static char why[512];
    return hc_ib_unusable(why, sizeof(why));
}
#endif

const hc_tlt_variant_t hc_tlt_variants[] = {
    /* name, ops, tune, unusable, env, leftovers, extra cases */
    {"shm", &hc_tl_shm_ops, tune_shm, hc_tlt_shm_unusable, NULL, hc_tlt_shm_leftovers,
     hc_tlt_shm_cases},
    {"tcp", &hc_tl_tcp_ops, tune_tcp, hc_tlt_tcp_unusable, NULL, NULL, hc_tlt_tcp_cases},
    {"tcp4", &hc_tl_tcp_ops, tune_tcp4, hc_tlt_tcp_unusable, NULL, NULL, hc_tlt_tcp4_cases},
#ifdef HC_HAVE_VERBS
    {"ib", &hc_tl_ib_ops, NULL, ib_unusable, NULL, NULL, NULL},
#endif
    /* e.g. {"ofi-tcp", &hc_tl_ofi_ops, NULL, ofi_unusable, ofi_tcp_env, NULL, NULL},
     * with ofi_tcp_env = {"FI_PROVIDER=tcp", NULL} */
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};
