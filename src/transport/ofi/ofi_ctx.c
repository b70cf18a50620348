/* ofi_ctx.c - the ofi transport's context: init and fini, the address blob
 * and what it says about reachability, the operation pool, the ops table.
 *
 * Address blob (little-endian): magic u32, version u16, name length u16,
 * address format u32, piece u32, chunk u64, provider name (32 bytes, NUL
 * padded), 8 bytes reserved; then fi_getname's endpoint name. */
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/params.h"
#include "base/proc.h"
#include "transport/ofi/ofi.h"

#define HC_OFI_POOL_BLOCK 64                  /* operations per allocation */
#define HC_OFI_CHUNK_MAX ((uint64_t)64 << 20) /* a peer's chunk we are willing to stage */

/* ---- the operation pool ---- */

hc_ofi_op_t *hc_ofi_op_get(hc_tl_ctx_t *ctx)
{
    if (ctx->free_ops == NULL) {
        void **b = realloc(ctx->blocks, (size_t)(ctx->nblocks + 1) * sizeof(*b));
        if (b == NULL)
            return NULL;
        ctx->blocks    = b;
        hc_ofi_op_t *o = calloc(HC_OFI_POOL_BLOCK, sizeof(*o));
        if (o == NULL)
            return NULL;
        ctx->blocks[ctx->nblocks++] = o;
        for (int i = 0; i < HC_OFI_POOL_BLOCK; i++) {
            o[i].next     = ctx->free_ops;
            ctx->free_ops = &o[i];
        }
    }
    hc_ofi_op_t *op = ctx->free_ops;
    ctx->free_ops   = op->next;
    memset(op, 0, sizeof(*op));
    op->slot = -1;
    return op;
}

void hc_ofi_op_put(hc_tl_ctx_t *ctx, hc_ofi_op_t *op)
{
    hc_ofi_mr_put(&ctx->mrc, op->mr);
    op->mr        = NULL;
    op->kind      = 0; /* free */
    op->next      = ctx->free_ops;
    ctx->free_ops = op;
}

/* After the endpoint closed: operations it still held let their
 * registrations go, then every block is freed. */
static void pool_free(hc_tl_ctx_t *ctx)
{
    for (int b = 0; b < ctx->nblocks; b++) {
        hc_ofi_op_t *o = ctx->blocks[b];
        for (int i = 0; i < HC_OFI_POOL_BLOCK; i++)
            if (o[i].kind != 0)
                hc_ofi_mr_put(&ctx->mrc, o[i].mr);
        free(o);
    }
    free(ctx->blocks);
    ctx->blocks   = NULL;
    ctx->nblocks  = 0;
    ctx->free_ops = NULL;
}

/* ---- init and fini ---- */

static void ofi_fini(hc_tl_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->ep != NULL)
        hc_ofi_say_bye(ctx);
    hc_ofi_close_ep(ctx);
    pool_free(ctx);
    for (int i = 0; i < ctx->neps; i++) {
        hc_tl_ep_t *ep = ctx->eps[i];
        if (ep->region[0] != '\0' && hc_proc_gone(ep->pid, -1))
            hc_ofi_region_reap(ep->region, ep->peer); /* died since progress last looked */
        hc_ofi_ep_destroy(ep);
    }
    hc_ofi_close(ctx);
    free(ctx->ctlq);
    free(ctx->eps);
    free(ctx->by_rank);
    free(ctx->hello);
    free(ctx->bye);
    free(ctx->grant);
    free(ctx->since);
    free(ctx);
}

static hcomm_status_t ctx_alloc(hc_tl_ctx_t **ctx_p, int nranks)
{
    hc_tl_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (ctx != NULL) {
        ctx->wait_fd = -1;
        ctx->by_rank = calloc((size_t)nranks, sizeof(*ctx->by_rank));
        ctx->eps     = calloc((size_t)nranks, sizeof(*ctx->eps));
        ctx->hello   = calloc((size_t)nranks, sizeof(*ctx->hello));
        ctx->bye     = calloc((size_t)nranks, sizeof(*ctx->bye));
        ctx->grant   = calloc((size_t)nranks, sizeof(*ctx->grant));
        ctx->since   = calloc((size_t)nranks, sizeof(*ctx->since));
    }
    if (ctx == NULL || ctx->by_rank == NULL || ctx->eps == NULL || ctx->hello == NULL ||
        ctx->bye == NULL || ctx->grant == NULL || ctx->since == NULL) {
        ofi_fini(ctx);
        hc_error(NET, "ofi: out of memory for a context of %d ranks", nranks);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int r = 0; r < nranks; r++)
        ctx->grant[r] = HC_OFI_WINDOW;
    *ctx_p = ctx;
    return HCOMM_SUCCESS;
}

static hcomm_status_t ofi_init(hc_tl_ctx_t **ctx_p, const hc_tl_params_t *p)
{
    if (ctx_p == NULL || p == NULL || p->nranks <= 0 || p->rank < 0 || p->rank >= p->nranks)
        return HCOMM_ERR_INVALID_ARG;
    if (p->nranks > HC_OFI_RANK_MAX) {
        hc_info(NET, "ofi: %d ranks: its tags hold %d at most", p->nranks, HC_OFI_RANK_MAX);
        return HCOMM_ERR_UNSUPPORTED;
    }
    const hc_params_t *prm = p->params != NULL ? p->params : hc_params_get();
    hc_tl_ctx_t       *ctx;
    hcomm_status_t     st = ctx_alloc(&ctx, p->nranks);
    if (st != HCOMM_SUCCESS)
        return st;
    ctx->rank      = p->rank;
    ctx->nranks    = p->nranks;
    ctx->timeout   = hc_tl_timeout_init(p, prm);
    ctx->host_hash = p->self != NULL ? p->self->host_hash : 0;
    memcpy(ctx->cookie, p->cookie, sizeof(ctx->cookie));
    const char *want    = prm->ofi_provider != NULL ? prm->ofi_provider : "";
    int         hw_only = p->fabric_only && want[0] == '\0' && hc_params_foreign("FI_PROVIDER") == NULL;
    if (hw_only && !hc_tl_host_has_fabric()) {
        hc_info(NET, "ofi: no RDMA-class device here: libfabric would only offer sockets or "
                     "shared memory, which hcomm's tcp and shm drive faster (HCOMM_NET=ofi,... "
                     "or HCOMM_OFI_PROVIDER uses them)");
        st = HCOMM_ERR_UNSUPPORTED;
    } else {
        st = hc_ofi_open(ctx, want, p->bind_ip, hw_only);
    }
    for (int i = 0; st == HCOMM_SUCCESS && i < HC_OFI_NCTL_RX; i++) {
        hc_ofi_op_t *op = hc_ofi_op_get(ctx);
        st              = op == NULL ? HCOMM_ERR_NO_MEMORY : hc_ofi_ctl_post_rx(ctx, op);
        if (op != NULL && st != HCOMM_SUCCESS)
            hc_ofi_op_put(ctx, op);
    }
    if (st != HCOMM_SUCCESS) {
        ofi_fini(ctx);
        return st;
    }
    *ctx_p = ctx;
    return HCOMM_SUCCESS;
}

/* ---- the address blob ---- */

static void put16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof(v));
}

static void put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof(v));
}

static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return le16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return le64toh(v);
}

static hcomm_status_t ofi_address(hc_tl_ctx_t *ctx, void *buf, size_t *len)
{
    if (ctx == NULL || buf == NULL || len == NULL)
        return HCOMM_ERR_INVALID_ARG;
    uint8_t *b = buf;
    memset(b, 0, HC_OFI_ADDR_HDR);
    put32(b, HC_OFI_MAGIC);
    put16(b + 4, HC_OFI_VERSION);
    put16(b + 6, (uint16_t)ctx->namelen);
    put32(b + 8, ctx->info->addr_format);
    put32(b + 12, ctx->cut.piece);
    put64(b + 16, ctx->cut.chunk);
    memcpy(b + 24, ctx->prov, HC_OFI_PROV_MAX);
    memcpy(b + HC_OFI_ADDR_HDR, ctx->name, ctx->namelen);
    *len = HC_OFI_ADDR_HDR + ctx->namelen;
    return HCOMM_SUCCESS;
}

/* fi_av_insert reads as many bytes as the address format says, whatever the
 * blob held: a name must be as long as its format needs. */
static int name_ok(const hc_tl_ctx_t *ctx, const uint8_t *name, size_t n)
{
    if (n == 0 || n > HC_TL_ADDR_MAX)
        return 0;
    switch (ctx->info->addr_format) {
    case FI_SOCKADDR_IN:
        return n >= sizeof(struct sockaddr_in);
    case FI_SOCKADDR_IN6:
        return n >= sizeof(struct sockaddr_in6);
    case FI_SOCKADDR: {
        sa_family_t fam;
        if (n < sizeof(struct sockaddr_in))
            return 0;
        memcpy(&fam, name + offsetof(struct sockaddr, sa_family), sizeof(fam));
        return fam != AF_INET6 || n >= sizeof(struct sockaddr_in6);
    }
    case FI_ADDR_STR:
        return memchr(name, '\0', n) != NULL;
    default: /* a binary format of this provider: as long as our own name */
        return n >= ctx->namelen;
    }
}

int hc_ofi_addr_parse(const hc_tl_ctx_t *ctx, const void *addr, size_t len, const uint8_t **name,
                      hc_ofi_cut_t *cut)
{
    const uint8_t *b = addr;
    if (addr == NULL || len < HC_OFI_ADDR_HDR || get32(b) != HC_OFI_MAGIC ||
        get16(b + 4) != HC_OFI_VERSION || HC_OFI_ADDR_HDR + (size_t)get16(b + 6) != len ||
        get32(b + 8) != ctx->info->addr_format ||
        strncmp((const char *)b + 24, ctx->prov, HC_OFI_PROV_MAX) != 0 ||
        !name_ok(ctx, b + HC_OFI_ADDR_HDR, len - HC_OFI_ADDR_HDR))
        return -1;
    cut->piece = get32(b + 12);
    cut->chunk = get64(b + 16);
    if (cut->chunk == 0 || cut->chunk > HC_OFI_CHUNK_MAX || cut->piece > HC_OFI_EAGER_MAX ||
        cut->piece > cut->chunk)
        return -1;
    *name = b + HC_OFI_ADDR_HDR;
    return 0;
}

/* Providers that reach no further than this host. */
static int host_only(const char *prov)
{
    return strcmp(prov, "shm") == 0 || strcmp(prov, "sm2") == 0;
}

/* The same provider, the same address format, and for an intra-host
 * provider the same host: both ranks of a pair read the same fields. */
static int ofi_reachable(hc_tl_ctx_t *ctx, const hc_peer_info_t *self, const hc_peer_info_t *peer,
                         const void *addr, size_t len)
{
    const uint8_t *name;
    hc_ofi_cut_t   cut;
    if (ctx == NULL || hc_ofi_addr_parse(ctx, addr, len, &name, &cut) != 0)
        return 0;
    if (host_only(ctx->prov))
        return self != NULL && peer != NULL && self->host_hash == peer->host_hash;
    return 1;
}

const hc_tl_ops_t hc_tl_ofi_ops = {
    .name      = "ofi",
    .caps      = HC_TL_CAP_HOST_MEM,
    .init      = ofi_init,
    .fini      = ofi_fini,
    .address   = ofi_address,
    .reachable = ofi_reachable,
    .connect   = hc_ofi_connect,
    .isend     = hc_ofi_isend,
    .irecv     = hc_ofi_irecv,
    .progress  = hc_ofi_progress,
    .ep_status = hc_ofi_ep_status,
    .wait_fds  = hc_ofi_wait_fds,
};
