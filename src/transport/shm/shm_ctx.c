/* shm_ctx.c - shared-memory transport: context, segments and connection set-up. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/proc.h"
#include "transport/shm/shm.h"

static hcomm_status_t shm_init(hc_tl_ctx_t **ctx_p, const hc_tl_params_t *p)
{
    const hc_params_t *prm = p->params != NULL ? p->params : hc_params_get();
    hc_tl_ctx_t       *ctx;
    hcomm_status_t     st = HCOMM_ERR_NO_MEMORY;

    if (p->nranks <= 0 || p->rank < 0 || p->rank >= p->nranks) {
        hc_error(SHM, "invalid rank %d of %d", p->rank, p->nranks);
        return HCOMM_ERR_INVALID_ARG;
    }
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        goto err_nomem;
    ctx->eps   = calloc((size_t)p->nranks, sizeof(*ctx->eps));
    ctx->since = calloc((size_t)p->nranks, sizeof(*ctx->since));
    ctx->list  = calloc((size_t)p->nranks, sizeof(*ctx->list));
    ctx->lower = calloc((size_t)p->nranks, sizeof(*ctx->lower));
    if (ctx->eps == NULL || ctx->since == NULL || ctx->list == NULL || ctx->lower == NULL)
        goto err_free;

    ctx->rank       = p->rank;
    ctx->nranks     = p->nranks;
    ctx->timeout    = hc_tl_timeout_init(p, prm);
    ctx->ring_bytes = hc_shm_ring_size(prm->shm_ring_bytes);
    ctx->chunk      = HC_SHM_CHUNK_MAX;
    ctx->cma_min    = prm->shm_cma_min;
    ctx->unstack    = prm->shm_unstack;
    ctx->pid        = getpid();
    memcpy(ctx->cookie, p->cookie, sizeof(ctx->cookie));
    if (p->self != NULL)
        memcpy(ctx->nonce, p->self->nonce, sizeof(ctx->nonce));
    if (hc_auth_public_name(ctx->cookie, HC_AUTH_SHM_NAMES, ctx->public_name,
                            sizeof(ctx->public_name)) != 0 ||
        hc_auth_random(&ctx->probe, sizeof(ctx->probe)) != 0) {
        hc_error(SHM, "deriving the segment names or drawing the probe value failed");
        st = HCOMM_ERR_SYSTEM;
        goto err_free;
    }
    *ctx_p = ctx;
    return HCOMM_SUCCESS;

err_free:
    free(ctx->lower);
    free(ctx->list);
    free(ctx->since);
    free(ctx->eps);
    free(ctx);
err_nomem:
    if (st == HCOMM_ERR_NO_MEMORY)
        hc_error(SHM, "out of memory creating the shm context");
    return st;
}

/* Marks our side closed and unmaps the segment. */
static void shm_seg_release(hc_tl_ep_t *ep)
{
    hc_shm_seg_t *seg = ep->seg;

    atomic_store_explicit(&seg->closed[ep->side], 1, memory_order_release);
    /* A peer that never opened the segment left its name behind: remove it. */
    if (ep->created && !atomic_load_explicit(&seg->attached, memory_order_acquire) &&
        shm_unlink(ep->name) != 0 && errno != ENOENT)
        hc_warn(SHM, "peer %d: shm_unlink %s: %s", ep->peer, ep->name, strerror(errno));
    munmap(seg, ep->map_bytes);
}

static void shm_ep_close(hc_tl_ep_t *ep)
{
    if (ep->peer_pidfd >= 0)
        close(ep->peer_pidfd);
    shm_seg_release(ep);
    free(ep);
}

void hc_shm_seg_name(const char *public_name, const uint8_t *lo_nonce, int lo, int hi,
                     char name[HC_SHM_NAME_MAX])
{
    char hex[2 * HC_SHM_NAME_NONCE + 1];
    for (int i = 0; i < HC_SHM_NAME_NONCE; i++)
        snprintf(hex + 2 * i, 3, "%02x", lo_nonce[i]);
    snprintf(name, HC_SHM_NAME_MAX, "/hcomm-%s-%s-%d-%d", public_name, hex, lo, hi);
}

/* lo_nonce: the lower rank's, this rank's own or the peer's. */
static void shm_seg_name(const hc_tl_ctx_t *ctx, int peer, const uint8_t *lo_nonce, char *name)
{
    int lo = ctx->rank < peer ? ctx->rank : peer;
    int hi = ctx->rank < peer ? peer : ctx->rank;
    hc_shm_seg_name(ctx->public_name, lo_nonce, lo, hi, name);
}

static hcomm_status_t shm_address(hc_tl_ctx_t *ctx, void *buf, size_t *len)
{
    (void)ctx;
    (void)buf;
    /* The segment name derives from the key, the ranks and the lower rank's
     * nonce, which the bootstrap already carries: nothing to publish. */
    *len = 0;
    return HCOMM_SUCCESS;
}

static int shm_reachable(hc_tl_ctx_t *ctx, const hc_peer_info_t *self, const hc_peer_info_t *peer,
                         const void *addr, size_t len)
{
    int same = self->host_hash == peer->host_hash;
    (void)addr, (void)len;
    /* remembered for shm_close_unopened (lower ranks) and for counting this
     * host's ranks (shm_cpu.c): the choice asks about every peer */
    if (same && ctx != NULL && peer->rank >= 0 && peer->rank < ctx->nranks &&
        peer->rank != ctx->rank) {
        hc_shm_lower_t *lo = &ctx->lower[peer->rank];
        lo->local          = 1;
        lo->pid            = peer->pid;
        memcpy(lo->nonce, peer->nonce, sizeof(lo->nonce));
    }
    return same;
}

/* Binds a segment to its name and creator: only a holder of the key makes it. */
static int shm_seg_tag(const hc_tl_ctx_t *ctx, const char *name, int32_t creator, uint8_t *tag)
{
    hc_auth_part_t parts[2] = {{name, strlen(name)}, {&creator, sizeof(creator)}};
    return hc_auth_mac(ctx->cookie, "hcomm shm segment", parts, 2, tag);
}

static void shm_publish_self(hc_tl_ctx_t *ctx, hc_shm_seg_t *seg, int side)
{
    seg->pid[side]        = (int32_t)ctx->pid;
    seg->probe_addr[side] = (uint64_t)(uintptr_t)&ctx->probe;
    seg->probe_val[side]  = ctx->probe;
}

/* Lower rank: creates, sizes and initialises the segment, then marks it ready. */
static hcomm_status_t shm_seg_create(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep)
{
    size_t        bytes = HC_SHM_HDR_BYTES + 2 * ctx->ring_bytes;
    hc_shm_seg_t *seg;
    int           fd, rc;

    for (int attempt = 0;; attempt++) {
        fd = shm_open(ep->name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0)
            break;
        if (errno != EEXIST || attempt > 0) {
            hc_error(SHM, "peer %d: shm_open %s: %s", ep->peer, ep->name, strerror(errno));
            return HCOMM_ERR_SYSTEM;
        }
        /* Someone else's under our name (the nonce is fresh, so not a run
         * of ours): it cannot pass the tag check, so replace it. */
        hc_warn(SHM, "peer %d: removing stale segment %s", ep->peer, ep->name);
        if (shm_unlink(ep->name) != 0 && errno != ENOENT) {
            hc_error(SHM, "peer %d: shm_unlink %s: %s", ep->peer, ep->name, strerror(errno));
            return HCOMM_ERR_SYSTEM;
        }
    }
    /* fallocate, not ftruncate: a full /dev/shm fails here, not as SIGBUS later. */
    while ((rc = posix_fallocate(fd, 0, (off_t)bytes)) == EINTR) /* a signal (a profiler's) */
        ;
    if (rc != 0) {
        hc_error(SHM, "peer %d: allocating %zu bytes for %s: %s", ep->peer, bytes, ep->name,
                 strerror(rc));
        goto err_unlink;
    }
    /* Populated at connection, which lazy connections make the pair's first
     * use: left to fault page by page, the rings' first laps cost the first
     * collectives up to 2x at 32 B to 32 KiB on 4 ranks (perf/RESULTS.md). */
    seg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (seg == MAP_FAILED) {
        hc_error(SHM, "peer %d: mmap %s: %s", ep->peer, ep->name, strerror(errno));
        goto err_unlink;
    }
    close(fd);

    if (shm_seg_tag(ctx, ep->name, (int32_t)ctx->pid, seg->tag) != 0) {
        munmap(seg, bytes);
        fd = -1;
        goto err_unlink;
    }
    seg->ring_bytes = ctx->ring_bytes;
    shm_publish_self(ctx, seg, 0);
    atomic_store_explicit(&seg->magic, HC_SHM_SEG_READY, memory_order_release);
    ep->seg       = seg;
    ep->map_bytes = bytes;
    ep->created   = 1;
    return HCOMM_SUCCESS;

err_unlink:
    if (fd >= 0)
        close(fd);
    shm_unlink(ep->name);
    return HCOMM_ERR_SYSTEM;
}

/* Maps the segment if it is there and ready: HCOMM_SUCCESS, HCOMM_IN_PROGRESS
 * (not yet), or an error. */
static hcomm_status_t shm_seg_try_open(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep, const hc_peer_info_t *peer)
{
    hcomm_status_t st = HCOMM_IN_PROGRESS;
    struct stat    sb;
    hc_shm_seg_t  *seg;
    int            fd = shm_open(ep->name, O_RDWR, 0);

    if (fd < 0) {
        if (errno == ENOENT)
            return HCOMM_IN_PROGRESS;
        hc_error(SHM, "peer %d: shm_open %s: %s", ep->peer, ep->name, strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    if (fstat(fd, &sb) != 0) {
        hc_error(SHM, "peer %d: fstat %s: %s", ep->peer, ep->name, strerror(errno));
        close(fd);
        return HCOMM_ERR_SYSTEM;
    }
    if (sb.st_uid != geteuid() || (sb.st_mode & 077) != 0) {
        /* the peer makes it 0600 as this user: another user's (made first
         * under the pair's name), or one others can change under us */
        hc_error(SHM,
                 "peer %d: segment %s is owned by uid %u with mode %04o, not this user's "
                 "with 0600: refused",
                 ep->peer, ep->name, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 0777));
        close(fd);
        return HCOMM_ERR_AUTH;
    }
    if ((size_t)sb.st_size < HC_SHM_HDR_BYTES) {
        close(fd);
        return HCOMM_IN_PROGRESS; /* being sized */
    }
    seg = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (seg == MAP_FAILED) {
        hc_error(SHM, "peer %d: mmap %s: %s", ep->peer, ep->name, strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    if (atomic_load_explicit(&seg->magic, memory_order_acquire) != HC_SHM_SEG_READY)
        goto out_unmap;
    if (peer->pid > 0 && seg->pid[0] != peer->pid)
        goto out_unmap; /* stale, from an earlier process: the peer replaces it */
    uint8_t tag[32];
    if (shm_seg_tag(ctx, ep->name, seg->pid[0], tag) != 0 ||
        !hc_auth_equal(tag, seg->tag, sizeof(tag))) {
        hc_error(SHM, "peer %d: segment %s was not made with the job secret: refused", ep->peer,
                 ep->name);
        st = HCOMM_ERR_AUTH;
        goto out_unmap;
    }
    /* Read once: the lower rank can still write the header, and every use
     * below takes the size from the checked mapping, never from it again. */
    uint64_t ring = __atomic_load_n(&seg->ring_bytes, __ATOMIC_RELAXED);
    if (ring != hc_shm_ring_size(ring) || (uint64_t)sb.st_size != HC_SHM_HDR_BYTES + 2 * ring) {
        hc_error(SHM, "peer %d: segment %s has an inconsistent size", ep->peer, ep->name);
        st = HCOMM_ERR_PROTOCOL;
        goto out_unmap;
    }
    ep->seg       = seg;
    ep->map_bytes = (size_t)sb.st_size;
    return HCOMM_SUCCESS;

out_unmap:
    munmap(seg, (size_t)sb.st_size);
    return st;
}

/* Higher rank: maps the lower rank's segment once it is ready and removes
 * its name; HCOMM_IN_PROGRESS until then, without waiting, and an error once
 * the peer died or the timeout passed since the first try. */
static hcomm_status_t shm_seg_open(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep, const hc_peer_info_t *peer)
{
    hcomm_status_t st  = shm_seg_try_open(ctx, ep, peer);
    double         now = hc_clock_now();
    if (st == HCOMM_IN_PROGRESS) {
        if (ctx->since[ep->peer] == 0)
            ctx->since[ep->peer] = now;
        if (hc_proc_gone(peer->pid, -1)) {
            hc_error(SHM, "peer rank %d (pid %d) died before creating %s", ep->peer,
                     (int)peer->pid, ep->name);
            return HCOMM_ERR_REMOTE;
        }
        if (now - ctx->since[ep->peer] < hc_tl_timeout(&ctx->timeout))
            return HCOMM_IN_PROGRESS;
        hc_error(SHM, "peer rank %d (pid %d): segment %s not ready within %.1f s", ep->peer,
                 (int)peer->pid, ep->name, hc_tl_timeout(&ctx->timeout));
        return HCOMM_ERR_TIMEOUT;
    }
    if (st != HCOMM_SUCCESS)
        return st;
    if (shm_unlink(ep->name) != 0)
        hc_warn(SHM, "peer %d: shm_unlink %s: %s", ep->peer, ep->name, strerror(errno));
#ifdef MADV_POPULATE_WRITE
    /* Fault the rings in now rather than on the first messages; best effort. */
    (void)madvise(ep->seg, ep->map_bytes, MADV_POPULATE_WRITE);
#endif
    shm_publish_self(ctx, ep->seg, 1);
    atomic_store_explicit(&ep->seg->attached, 1, memory_order_release);
    ep->peer_mapped = 1;
    return HCOMM_SUCCESS;
}

/* The segments lower ranks of this host made for pairs this rank never
 * opened. A live creator may be waiting to send into one (connections are
 * made on first use): marking this side closed fails those sends now, as if
 * this rank had connected and left, instead of at their timeout. Then the
 * name goes: a creator removes it itself when it closes, unless it died
 * (killed, crashed) before this rank opened it; then this rank, which will
 * not open it now, is the last that can (the kill campaign found such names
 * left in /dev/shm when a rank died just after creating a segment, or while
 * creating it, and its peer failed before opening it). A live creator finds
 * the name gone, which it tolerates. */
static void shm_close_unopened(hc_tl_ctx_t *ctx)
{
    for (int r = 0; r < ctx->rank; r++) {
        if (!ctx->lower[r].local || ctx->eps[r] != NULL)
            continue;
        hc_tl_ep_t     at   = {.ctx = ctx, .peer = r, .side = 1, .peer_pidfd = -1};
        hc_peer_info_t peer = {.pid = ctx->lower[r].pid, .rank = r};
        shm_seg_name(ctx, r, ctx->lower[r].nonce, at.name);
        if (shm_seg_try_open(ctx, &at, &peer) == HCOMM_SUCCESS) {
            atomic_store_explicit(&at.seg->closed[1], 1, memory_order_release);
            munmap(at.seg, at.map_bytes);
        }
        if (shm_unlink(at.name) == 0)
            hc_debug(SHM, "peer %d: closed and removed %s, which this rank never opened", r,
                     at.name);
        else if (errno != ENOENT)
            hc_warn(SHM, "peer %d: shm_unlink %s: %s", r, at.name, strerror(errno));
    }
}

static void shm_fini(hc_tl_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    for (int i = ctx->nlist - 1; i >= 0; i--)
        shm_ep_close(ctx->list[i]);
    shm_close_unopened(ctx);
    free(ctx->bounce);
    free(ctx->lower);
    free(ctx->list);
    free(ctx->since);
    free(ctx->eps);
    free(ctx);
}

void hc_shm_probe(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep)
{
    hc_shm_seg_t *seg     = ep->seg;
    int           other   = 1 - ep->side;
    uint32_t      verdict = HC_SHM_CMA_NO;
    uint64_t      val     = 0;
    ssize_t       got;

    if (ep->side == 0 && !atomic_load_explicit(&seg->attached, memory_order_acquire))
        return;
    ep->probe_pending = 0;
    if (ep->peer_pid <= 0)
        ep->peer_pid = seg->pid[other];
    if (ep->peer_pidfd < 0)
        ep->peer_pidfd = hc_proc_open(ep->peer_pid);
    if (ctx->cma_min > 0) {
        struct iovec local  = {&val, sizeof(val)};
        struct iovec remote = {(void *)(uintptr_t)seg->probe_addr[other], sizeof(val)};
        got                 = process_vm_readv(ep->peer_pid, &local, 1, &remote, 1, 0);
        if (got == (ssize_t)sizeof(val) && val == seg->probe_val[other]) {
            verdict = HC_SHM_CMA_YES;
        } else if (!ctx->cma_logged) {
            ctx->cma_logged = 1;
            hc_info(SHM,
                    "peer %d: process_vm_readv unusable (%s): large messages go through the ring",
                    ep->peer, got < 0 ? strerror(errno) : "wrong value");
        }
    }
    /* We consume the peer's ring: the verdict tells the peer, its producer. */
    atomic_store_explicit(&seg->ctl[other].cma_ok, verdict, memory_order_release);
}

/* Touches the pages small messages use (the hot window and the message after
 * it: shm.h) from this process at connect, so that their first touches are not
 * paid in the first collectives; the rest of each ring is touched in one go by
 * the first message that reaches past them (hc_shm_ring_warm). */
static void shm_warm(hc_tl_ep_t *ep)
{
    hc_shm_ring_warm(&ep->tx, 2 * HC_SHM_HOT_BYTES);
    hc_shm_ring_warm(&ep->rx, 2 * HC_SHM_HOT_BYTES);
}

static hcomm_status_t shm_connect(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer, const void *addr,
                                  size_t len, hc_tl_ep_t **ep_p)
{
    int            r = peer->rank;
    hc_tl_ep_t     at, *ep; /* the segment is made or found first, then the endpoint */
    hcomm_status_t st;
    uint8_t       *rings;
    uint64_t       ring, key[2];

    (void)addr;
    (void)len;
    if (r < 0 || r >= ctx->nranks || r == ctx->rank || ctx->eps[r] != NULL) {
        hc_error(SHM, "connect to invalid or already connected peer %d", r);
        return HCOMM_ERR_INVALID_ARG;
    }
    memset(&at, 0, sizeof(at));
    at.ctx      = ctx;
    at.peer     = r;
    at.side     = ctx->rank > r;
    at.peer_pid = peer->pid;
    at.peer_pidfd = -1;
    at.status   = HCOMM_SUCCESS;
    shm_seg_name(ctx, r, at.side == 0 ? ctx->nonce : peer->nonce, at.name);
    st = at.side == 0 ? shm_seg_create(ctx, &at) : shm_seg_open(ctx, &at, peer);
    if (st != HCOMM_SUCCESS)
        return st;
    ep = malloc(sizeof(*ep));
    if (ep == NULL) {
        hc_error(SHM, "peer %d: out of memory", r);
        shm_seg_release(&at);
        return HCOMM_ERR_NO_MEMORY;
    }
    *ep   = at;
    rings = (uint8_t *)ep->seg + HC_SHM_HDR_BYTES;
    /* the mapping's size, checked when it was made (not the header's word,
     * which the peer may have changed since: out of bounds at once) */
    ring = (ep->map_bytes - HC_SHM_HDR_BYTES) / 2;
    /* the segment's tag (a MAC over its fresh name), checked when it was
     * opened, keys the rings' header stamps: a word per direction */
    memcpy(key, ep->seg->tag, sizeof(key));
    hc_shm_ring_attach(&ep->tx, &ep->seg->ctl[ep->side], rings + ep->side * ring, ring,
                       key[ep->side], 1);
    hc_shm_ring_attach(&ep->rx, &ep->seg->ctl[1 - ep->side], rings + (1 - ep->side) * ring, ring,
                       key[1 - ep->side], 0);
    shm_warm(ep);
    /* Small steps keep both copies of the pipeline busy; a quarter ring at most. */
    ep->chunk = ring / 4 < ctx->chunk ? ring / 4 : ctx->chunk;
    /* hi can test lo's memory now; lo waits in progress for hi's address. */
    ep->probe_pending = 1;
    hc_shm_probe(ctx, ep);

    ctx->eps[r]             = ep;
    ctx->list[ctx->nlist++] = ep;
    *ep_p                   = ep;
    hc_debug(SHM, "peer %d: connected through %s (%llu-byte rings)", r, ep->name,
             (unsigned long long)ring);
    return HCOMM_SUCCESS;
}

const hc_tl_ops_t hc_tl_shm_ops = {
    .name      = "shm",
    .caps      = HC_TL_CAP_HOST_MEM,
    .init      = shm_init,
    .fini      = shm_fini,
    .address   = shm_address,
    .reachable = shm_reachable,
    .connect   = shm_connect,
    .isend     = hc_shm_isend,
    .irecv     = hc_shm_irecv,
    .progress  = hc_shm_progress,
    .ep_status = hc_shm_ep_status,
};
