/* tl_variants.c - the transports the suite runs, one line each. A new transport
 * (ofi, ucx, ib) adds its line: its ops table, the parameters it runs with, and
 * a function that says why it cannot run here (no hardware, no provider), so
 * that its cases SKIP with that reason instead of passing or failing. Variants
 * of one transport differ by parameters (tune) or environment (env), e.g.
 * FI_PROVIDER=tcp and FI_PROVIDER=shm for ofi. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

#if defined(HC_HAVE_OFI) || defined(HC_HAVE_UCX)
#define PROBE_POLLED 100 /* a child's exit: a context, without a wait fd */

/* Opens a context of ops (tune'd parameters, the variant's environment) in a
 * child, so that the library the transport loads (libfabric, UCX: threads,
 * memory hooks) never starts in the process that forks the worlds. The init
 * status; *polled: the context offered no wait fd. */
static hcomm_status_t probe(const hc_tl_ops_t *ops, void (*tune)(hc_params_t *), int *polled)
{
    hc_params_t    prm  = *hc_params_get();
    hc_peer_info_t self = {.host_hash = 0x5eed, .pid = (int32_t)getpid()};
    hc_tl_params_t tp   = {
          .nranks = 2, .bind_ip = "127.0.0.1", .timeout = 5, .self = &self, .params = &prm};
    int   status;
    pid_t pid;

    if (tune != NULL)
        tune(&prm);
    fflush(NULL);
    if ((pid = fork()) == 0) {
        hc_tl_ctx_t   *ctx = NULL;
        struct pollfd  pfd[4];
        hcomm_status_t st   = ops->init(&ctx, &tp);
        int            code = -(int)st;
        if (st == HCOMM_SUCCESS) {
            if (ops->wait_fds == NULL || ops->wait_fds(ctx, pfd, 4) < 0)
                code = PROBE_POLLED;
            ops->fini(ctx);
        }
        _exit(code);
    }
    *polled = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return HCOMM_ERR_SYSTEM;
    *polled = WEXITSTATUS(status) == PROBE_POLLED;
    return *polled ? HCOMM_SUCCESS : (hcomm_status_t)-WEXITSTATUS(status);
}
#endif

#ifdef HC_HAVE_OFI
extern const hc_tlt_case_t hc_tlt_ofi_cases[]; /* tl_ofi_only.c */

static void tune_ofi_tcp(hc_params_t *prm)
{
    prm->ofi_provider = "tcp;ofi_rxm";
}

static void tune_ofi_shm(hc_params_t *prm)
{
    prm->ofi_provider = "shm";
}

/* The ops each variant runs: the transport's, less wait_fds where the
 * provider offers no wait fd (libfabric's shm), which the cases then skip. */
static hc_tl_ops_t ofi_tcp_ops, ofi_shm_ops;

static const char *ofi_unusable(void (*tune)(hc_params_t *), hc_tl_ops_t *ops, char *why,
                                size_t len)
{
    hc_params_t    prm = *hc_params_get();
    int            polled;
    hcomm_status_t st = probe(&hc_tl_ofi_ops, tune, &polled);

    *ops = hc_tl_ofi_ops;
    if (polled)
        ops->wait_fds = NULL; /* as the core reads a -1: this provider is polled only */
    tune(&prm);
    snprintf(why, len,
             "libfabric offers no usable provider \"%s\" here: %s (HCOMM_LOG_LEVEL=info "
             "says why)",
             prm.ofi_provider, hcomm_status_name(st));
    return st != HCOMM_SUCCESS ? why : NULL;
}

static const char *ofi_tcp_unusable(void)
{
    static char why[200];
    return ofi_unusable(tune_ofi_tcp, &ofi_tcp_ops, why, sizeof(why));
}

static const char *ofi_shm_unusable(void)
{
    static char why[200];
    return ofi_unusable(tune_ofi_shm, &ofi_shm_ops, why, sizeof(why));
}
#endif

#ifdef HC_HAVE_UCX
/* Whether UCX starts here with the variant's UCX_TLS (env, set by then). */
static const char *ucx_unusable(void)
{
    static char    why[160];
    int            polled;
    hcomm_status_t st = probe(&hc_tl_ucx_ops, NULL, &polled);
    if (st == HCOMM_SUCCESS)
        return NULL;
    snprintf(why, sizeof(why), "ucx init with UCX_TLS=%s: %s (HCOMM_LOG_LEVEL=info says why)",
             getenv("UCX_TLS") != NULL ? getenv("UCX_TLS") : "(unset)", hcomm_status_name(st));
    return why;
}

static const char *const ucx_tcp_env[] = {"UCX_TLS=tcp", NULL};
/* UCX 1.13's shared memory: posix segments for messages, cma (one
 * process_vm_readv) for the rendezvous of big ones */
static const char *const ucx_shm_env[] = {"UCX_TLS=posix,cma", NULL};
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
#ifdef HC_HAVE_OFI
    {"ofi-tcp", &ofi_tcp_ops, tune_ofi_tcp, ofi_tcp_unusable, NULL, NULL, hc_tlt_ofi_cases},
    {"ofi-shm", &ofi_shm_ops, tune_ofi_shm, ofi_shm_unusable, NULL, NULL, hc_tlt_ofi_cases},
#endif
#ifdef HC_HAVE_UCX
    {"ucx-tcp", &hc_tl_ucx_ops, NULL, ucx_unusable, ucx_tcp_env, NULL, NULL},
    {"ucx-shm", &hc_tl_ucx_ops, NULL, ucx_unusable, ucx_shm_env, NULL, NULL},
#endif
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};
