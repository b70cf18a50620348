/* ofi_open.c - choosing the libfabric provider, and opening what a context
 * needs of it: fabric, domain, completion queue, address vector, endpoint. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/log.h"
#include "transport/ofi/ofi.h"

/* What the transport can live with: it gives every operation a fi_context2,
 * registers local buffers when asked, and uses no RMA of its own (so keys and
 * virtual addressing are the provider's business). */
#define HC_OFI_MR_MODES                                                                            \
    (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT | FI_MR_RAW)

static struct fi_info *hints_make(const char *want)
{
    struct fi_info *h = hc_ofi_lib.fi_dupinfo(NULL);
    if (h == NULL)
        return NULL;
    h->caps                   = FI_TAGGED;
    h->mode                   = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA | FI_ASYNC_IOV;
    h->ep_attr->type          = FI_EP_RDM;
    h->domain_attr->mr_mode   = HC_OFI_MR_MODES;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->addr_format            = FI_FORMAT_UNSPEC;
    /* a single name narrows the search in libfabric; lists are filtered here */
    if (want[0] != '\0' && strpbrk(want, ",^") == NULL) {
        h->fabric_attr->prov_name = strdup(want);
        if (h->fabric_attr->prov_name == NULL) {
            hc_ofi_lib.fi_freeinfo(h);
            return NULL;
        }
    }
    return h;
}

/* Whether item names the provider: its whole name ("tcp;ofi_rxm") or one of
 * its layers ("tcp"), as FI_PROVIDER reads it. */
static int item_names(const char *item, size_t ilen, const char *prov)
{
    for (const char *p = prov; p != NULL; p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL) {
        size_t n = strcspn(p, ";");
        if (n == ilen && strncmp(p, item, ilen) == 0)
            return 1;
    }
    return strlen(prov) == ilen && strncmp(prov, item, ilen) == 0;
}

/* FI_PROVIDER's syntax: a comma list of names, or ^ and a list to exclude. */
static int prov_wanted(const char *want, const char *prov)
{
    int         neg = want[0] == '^';
    const char *p   = want + neg;
    if (*p == '\0')
        return 1;
    for (; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (item_names(p, strcspn(p, ","), prov))
            return !neg;
    return neg;
}

/* Whether the provider's source address is bind_ip: the interface hcomm's
 * bootstrap uses, so that ranks meet on the network the job was given. */
static int src_is(const struct fi_info *i, const char *ip)
{
    unsigned char a[16];
    if (ip == NULL || i->src_addr == NULL)
        return 0;
    if (i->addr_format == FI_SOCKADDR_IN && i->src_addrlen >= sizeof(struct sockaddr_in))
        return inet_pton(AF_INET, ip, a) == 1 &&
               memcmp(&((const struct sockaddr_in *)i->src_addr)->sin_addr, a, 4) == 0;
    if (i->addr_format == FI_SOCKADDR_IN6 && i->src_addrlen >= sizeof(struct sockaddr_in6))
        return inet_pton(AF_INET6, ip, a) == 1 &&
               memcmp(&((const struct sockaddr_in6 *)i->src_addr)->sin6_addr, a, 16) == 0;
    return 0;
}

static hcomm_status_t open_fail(hc_tl_ctx_t *ctx, const struct fi_info *i, const char *what, int rc)
{
    hc_info(NET, "ofi: provider %s (fabric %s, domain %s): %s: %s", i->fabric_attr->prov_name,
            i->fabric_attr->name, i->domain_attr->name, what, hc_ofi_lib.fi_strerror(rc < 0 ? -rc : rc));
    hc_ofi_close(ctx);
    return HCOMM_ERR_UNSUPPORTED;
}

/* A wait fd where the provider offers one; a CQ without one else. */
static int cq_open(hc_tl_ctx_t *ctx, const struct fi_info *i)
{
    struct fi_cq_attr a = {.size     = ctx->tx_cap + ctx->rx_cap + HC_OFI_NCTL_RX,
                           .format   = FI_CQ_FORMAT_TAGGED,
                           .wait_obj = FI_WAIT_FD};
    ctx->wait_fd        = -1;
    if (fi_cq_open(ctx->domain, &a, &ctx->cq, NULL) == 0) {
        if (fi_control(&ctx->cq->fid, FI_GETWAIT, &ctx->wait_fd) == 0 && ctx->wait_fd >= 0)
            return 0;
        ctx->wait_fd = -1;
        fi_close(&ctx->cq->fid);
        ctx->cq = NULL; /* a failed reopen below leaves it untouched */
    }
    a.wait_obj = FI_WAIT_NONE;
    hc_debug(NET, "ofi: %s offers no CQ wait fd: the transport is polled only",
             i->fabric_attr->prov_name);
    return fi_cq_open(ctx->domain, &a, &ctx->cq, NULL);
}

static void limits_set(hc_tl_ctx_t *ctx, const struct fi_info *i)
{
    ctx->tx_cap = i->tx_attr->size > 0 ? i->tx_attr->size : 256;
    /* half the receive entries: shm keeps unexpected messages in the others */
    ctx->rx_cap    = i->rx_attr->size / 2 > HC_OFI_NCTL_RX + 16 ? i->rx_attr->size / 2 : 256;
    ctx->inject    = i->tx_attr->inject_size;
    ctx->data_mask = i->domain_attr->cq_data_size >= 8
                         ? UINT64_MAX
                         : (1ull << (8 * i->domain_attr->cq_data_size)) - 1;
    ctx->cut.chunk = HC_OFI_CHUNK;
    if (i->ep_attr->max_msg_size > 0 && i->ep_attr->max_msg_size < ctx->cut.chunk)
        ctx->cut.chunk = i->ep_attr->max_msg_size;
    /* Injected messages complete without the peer's help (shm's larger ones
     * wait for the receiver to copy them); worth cutting for when big enough. */
    ctx->cut.piece = 0;
    if (ctx->inject >= HC_OFI_PIECE_MIN && ctx->inject <= ctx->cut.chunk)
        ctx->cut.piece =
            (uint32_t)(ctx->inject < HC_OFI_EAGER_MAX ? ctx->inject : HC_OFI_EAGER_MAX);
    /* libfabric's shm (1.17) completes every send it does not inject through
     * a response queue it reads in order: one to a peer that died blocks all
     * later ones, to every peer. Injected pieces only, then. (A peer stopped
     * while it writes into our region holds that region's spin lock, and our
     * fi_cq_read spins on it: no timeout of ours can bound that.) */
    if (strcmp(i->fabric_attr->prov_name, "shm") == 0 && ctx->cut.piece != 0)
        ctx->cut.chunk = ctx->cut.piece;
}

static hcomm_status_t try_open(hc_tl_ctx_t *ctx, const struct fi_info *i)
{
    int rc;
    limits_set(ctx, i);
    if ((rc = hc_ofi_lib.fi_fabric(i->fabric_attr, &ctx->fabric, NULL)) != 0)
        return open_fail(ctx, i, "fi_fabric", rc);
    if ((rc = fi_domain(ctx->fabric, (struct fi_info *)i, &ctx->domain, NULL)) != 0)
        return open_fail(ctx, i, "fi_domain", rc);
    if ((rc = cq_open(ctx, i)) != 0)
        return open_fail(ctx, i, "fi_cq_open", rc);
    struct fi_av_attr av = {
        .type  = i->domain_attr->av_type != FI_AV_UNSPEC ? i->domain_attr->av_type : FI_AV_TABLE,
        .count = (size_t)ctx->nranks};
    if ((rc = fi_av_open(ctx->domain, &av, &ctx->av, NULL)) != 0)
        return open_fail(ctx, i, "fi_av_open", rc);
    if ((rc = fi_endpoint(ctx->domain, (struct fi_info *)i, &ctx->ep, NULL)) != 0)
        return open_fail(ctx, i, "fi_endpoint", rc);
    if ((rc = fi_ep_bind(ctx->ep, &ctx->av->fid, 0)) != 0 ||
        (rc = fi_ep_bind(ctx->ep, &ctx->cq->fid, FI_TRANSMIT | FI_RECV)) != 0)
        return open_fail(ctx, i, "fi_ep_bind", rc);
    if ((rc = fi_enable(ctx->ep)) != 0)
        return open_fail(ctx, i, "fi_enable", rc);
    ctx->namelen = sizeof(ctx->name);
    if ((rc = fi_getname(&ctx->ep->fid, ctx->name, &ctx->namelen)) != 0)
        return open_fail(ctx, i, "fi_getname", rc);
    if (ctx->namelen + HC_OFI_ADDR_HDR > HC_TL_ADDR_MAX)
        return open_fail(ctx, i, "endpoint name too long", FI_ETOOSMALL);
    ctx->info = hc_ofi_lib.fi_dupinfo(i);
    if (ctx->info == NULL)
        return open_fail(ctx, i, "fi_dupinfo", FI_ENOMEM);
    snprintf(ctx->prov, sizeof(ctx->prov), "%s", i->fabric_attr->prov_name);
    ctx->mrc = (hc_ofi_mrc_t){.on     = (i->domain_attr->mr_mode & FI_MR_LOCAL) != 0,
                              .domain = ctx->domain,
                              .ep     = ctx->ep,
                              .mode   = (uint64_t)i->domain_attr->mr_mode};
    return HCOMM_SUCCESS;
}

/* Whether an offer has what the transport needs beyond the hints: remote
 * CQ data, which carries each message's length. */
static int usable(const struct fi_info *i)
{
    if (i->domain_attr->cq_data_size > 0)
        return 1;
    hc_info(NET, "ofi: provider %s (fabric %s) carries no remote CQ data: skipped",
            i->fabric_attr->prov_name, i->fabric_attr->name);
    return 0;
}

/* Whether every layer of the provider ("tcp;ofi_rxm") runs over sockets or
 * shared memory, which hcomm's own tcp and shm drive faster. */
static int prov_is_soft(const char *prov)
{
    static const char *const soft[] = {"tcp", "sockets", "udp", "shm", "sm2", "net",
                                       "ofi_rxm", "ofi_rxd", NULL};
    for (const char *p = prov; *p != '\0';) {
        size_t len = strcspn(p, ";"), k = 0;
        while (soft[k] != NULL && !(strlen(soft[k]) == len && strncmp(soft[k], p, len) == 0))
            k++;
        if (soft[k] == NULL)
            return 0;
        p += len + (p[len] == ';');
    }
    return 1;
}

/* Tries the matching offers in libfabric's order, the one on bind_ip first. */
static hcomm_status_t open_first(hc_tl_ctx_t *ctx, struct fi_info *list, const char *want,
                                 const char *bind_ip, int hw_only)
{
    int tried = 0, soft = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (struct fi_info *i = list; i != NULL; i = i->next) {
            if (!prov_wanted(want, i->fabric_attr->prov_name) || src_is(i, bind_ip) != !pass)
                continue;
            if (hw_only && prov_is_soft(i->fabric_attr->prov_name)) {
                soft++;
                continue;
            }
            if (!usable(i))
                continue;
            tried++;
            if (try_open(ctx, i) == HCOMM_SUCCESS)
                return HCOMM_SUCCESS;
        }
    }
    if (tried == 0 && soft > 0)
        hc_info(NET,
                "ofi: libfabric offers only providers over sockets or shared memory here, "
                "which hcomm's tcp and shm drive faster (HCOMM_NET=ofi,... or "
                "HCOMM_OFI_PROVIDER uses them)");
    else if (tried == 0)
        hc_info(NET,
                "ofi: libfabric offers no provider named \"%s\" with reliable tagged "
                "messages (FI_EP_RDM, FI_TAGGED)",
                want);
    return HCOMM_ERR_UNSUPPORTED;
}

/* rxm's defaults, unless the user chose; read when libfabric loads its
 * providers, so only a first context has its say.
 * - It looks at its connection events every 10 ms while idle (manual
 *   progress), so a first message waits several of those for its
 *   connection: 1 ms instead.
 * - Above 16 KiB it sends by rendezvous: a request, an RMA read and an ack
 *   per message, two round trips a chunk. Over tcp, eager messages go
 *   straight from the sender's buffer to the posted receive's (direct send,
 *   dynamic receive buffers), so eager up to a whole chunk where tcp is
 *   asked for (over verbs rxm wants its eager limit at its buffer size). */
static void rxm_tune(const char *want)
{
    char eager[32];
    snprintf(eager, sizeof(eager), "%zu", HC_OFI_CHUNK);
    setenv("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "1000", 0);
    if (strstr(want, "tcp") != NULL && strstr(want, "verbs") == NULL && want[0] != '^')
        setenv("FI_OFI_RXM_EAGER_LIMIT", eager, 0);
}

hcomm_status_t hc_ofi_open(hc_tl_ctx_t *ctx, const char *want, const char *bind_ip, int hw_only)
{
    hcomm_status_t st = hc_ofi_load();
    if (st != HCOMM_SUCCESS)
        return st;
    rxm_tune(want);
    struct fi_info *hints = hints_make(want), *list = NULL;
    if (hints == NULL) {
        hc_error(NET, "ofi: out of memory for fi_getinfo hints");
        return HCOMM_ERR_NO_MEMORY;
    }
    int rc = hc_ofi_lib.fi_getinfo(HC_OFI_API, NULL, NULL, 0, hints, &list);
    hc_ofi_lib.fi_freeinfo(hints);
    if (rc != 0) {
        hc_info(NET,
                "ofi: no libfabric provider%s%s offers reliable tagged messages "
                "(FI_EP_RDM, FI_TAGGED): fi_getinfo: %s",
                want[0] != '\0' ? " named " : "", want, hc_ofi_lib.fi_strerror(-rc));
        return HCOMM_ERR_UNSUPPORTED;
    }
    st = open_first(ctx, list, want, bind_ip, hw_only);
    hc_ofi_lib.fi_freeinfo(list);
    if (st == HCOMM_SUCCESS)
        hc_info(NET, "ofi: provider %s, fabric %s, domain %s%s", ctx->prov,
                ctx->info->fabric_attr->name, ctx->info->domain_attr->name,
                ctx->mrc.on ? ", buffers registered" : "");
    return st;
}

/* The endpoint first: nothing moves after it, and what it held is ours. */
void hc_ofi_close_ep(hc_tl_ctx_t *ctx)
{
    if (ctx->ep != NULL)
        fi_close(&ctx->ep->fid);
    ctx->ep = NULL;
}

void hc_ofi_close(hc_tl_ctx_t *ctx)
{
    hc_ofi_close_ep(ctx);
    hc_ofi_mr_fini(&ctx->mrc);
    if (ctx->av != NULL)
        fi_close(&ctx->av->fid);
    if (ctx->cq != NULL)
        fi_close(&ctx->cq->fid);
    if (ctx->domain != NULL)
        fi_close(&ctx->domain->fid);
    if (ctx->fabric != NULL)
        fi_close(&ctx->fabric->fid);
    if (ctx->info != NULL) /* NULL also where libfabric never loaded */
        hc_ofi_lib.fi_freeinfo(ctx->info);
    ctx->av      = NULL;
    ctx->cq      = NULL;
    ctx->domain  = NULL;
    ctx->fabric  = NULL;
    ctx->info    = NULL;
    ctx->wait_fd = -1;
}

/* libfabric's shm (1.17) keeps its region in /dev/shm under the endpoint's
 * name less "fi_shm://" ("PID:UID:N") until the endpoint closes: a peer
 * killed leaves it behind, so the peers that saw it die remove it. Only a
 * name that starts with the dead pid qualifies. */
void hc_ofi_region_name(const hc_tl_ctx_t *ctx, const uint8_t *name, size_t len, pid_t pid,
                        char *out, size_t outlen)
{
    static const char pre[] = "fi_shm://";
    char              n[64] = "", *end;
    out[0]                  = '\0';
    if (strcmp(ctx->prov, "shm") != 0 || pid <= 0 || len >= sizeof(n))
        return;
    memcpy(n, name, len);
    n[len] = '\0';
    if (strncmp(n, pre, sizeof(pre) - 1) != 0 || strchr(n + sizeof(pre) - 1, '/') != NULL)
        return;
    const char *id = n + sizeof(pre) - 1;
    if (strtoimax(id, &end, 10) != pid || *end != ':')
        return;
    snprintf(out, outlen, "/%s", id);
}

void hc_ofi_region_reap(const char *region, int peer)
{
    if (region[0] == '\0')
        return;
    if (shm_unlink(region) == 0)
        hc_debug(NET, "ofi: peer %d died: removed its shm region %s", peer, region);
    else if (errno != ENOENT)
        hc_warn(NET, "ofi: peer %d died: removing its shm region %s: %s", peer, region,
                strerror(errno));
}
