/* shm_ep.c - shared-memory transport: queuing, the data path and progress. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/proc.h"
#include "transport/shm/shm.h"

static inline uint64_t shm_pad(uint64_t n)
{
    return (n + HC_SHM_LINE - 1) & ~(uint64_t)(HC_SHM_LINE - 1);
}

static inline uint64_t shm_min(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

hcomm_status_t hc_shm_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req)
{
    hcomm_status_t st = hc_tl_msg_args(ep, buf, len, NULL, req);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    if (ep->peer_gone)
        return HCOMM_ERR_REMOTE;
    hc_tl_req_init(req, ep, len);
    req->sbuf = buf;
    if (ep->sq_tail != NULL)
        ep->sq_tail->next = req;
    else
        ep->sq_head = req;
    ep->sq_tail = req;
    if (ep->sq_cur == NULL)
        ep->sq_cur = req;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_shm_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req)
{
    /* A gone peer may have left messages in the ring: receives drain them. */
    hcomm_status_t st = hc_tl_msg_args(ep, buf, len, sink, req);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    hc_tl_req_init(req, ep, len);
    req->rbuf     = buf;
    req->sink     = sink;
    req->sink_arg = sink_arg;
    if (ep->rq_tail != NULL)
        ep->rq_tail->next = req;
    else
        ep->rq_head = req;
    ep->rq_tail = req;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_shm_ep_status(hc_tl_ep_t *ep)
{
    /* the segment's flag, not peer_mapped, which progress sets later: the
     * peer may have mapped it, delivered all it had, and left */
    int joined = ep->peer_mapped || atomic_load_explicit(&ep->seg->attached, memory_order_acquire);
    return ep->status == HCOMM_SUCCESS && !joined ? HCOMM_IN_PROGRESS : ep->status;
}

/* Fails the endpoint: every pending request completes with st. */
static int shm_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st)
{
    hc_tl_req_t *req, *next;
    int          n = 0;

    ep->status = st;
    for (req = ep->sq_head; req != NULL; req = next, n++) {
        next        = req->next;
        req->status = st;
    }
    for (req = ep->rq_head; req != NULL; req = next, n++) {
        next        = req->next;
        req->status = st;
    }
    ep->sq_head = ep->sq_cur = ep->sq_tail = NULL;
    ep->rq_head = ep->rq_tail = NULL;
    ep->tx_hdr_done = ep->rx_hdr_done = 0;
    return n;
}

static int shm_ep_fail_gone(hc_tl_ep_t *ep)
{
    int pending = ep->sq_head != NULL || ep->rq_head != NULL;

    if (ep->peer_gone == HC_SHM_PEER_DEAD)
        hc_error(SHM, "peer rank %d (pid %d) died", ep->peer, (int)ep->peer_pid);
    else if (pending)
        hc_error(SHM, "peer rank %d (pid %d) closed its endpoint with requests pending", ep->peer,
                 (int)ep->peer_pid);
    else
        hc_debug(SHM, "peer rank %d (pid %d) closed its endpoint", ep->peer, (int)ep->peer_pid);
    return shm_ep_fail(ep, HCOMM_ERR_REMOTE);
}

/* Writes req's header. Returns 1 if the message is all written (inline, or
 * whole: the payload before the header, so that the receiver finds all of it by
 * the header's stamp, without head's line), or is a single-copy descriptor
 * (the payload stays in the sender's buffer and the send only awaits its ack). */
static int shm_send_header(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep, hc_tl_req_t *req)
{
    hc_shm_ring_t *tx     = &ep->tx;
    hc_shm_msg_t   msg    = {.len = req->len, .magic = HC_SHM_MSG_MAGIC};
    uint64_t       padded = shm_pad(req->len);
    int            cma    = ctx->cma_min > 0 && req->len >= ctx->cma_min &&
              atomic_load_explicit(&tx->ctl->cma_ok, memory_order_relaxed) == HC_SHM_CMA_YES;

    if (cma) {
        msg.flags    = HC_SHM_MSG_CMA;
        msg.addr     = (uint64_t)(uintptr_t)req->sbuf;
        req->priv[0] = ++ep->cma_sent;
        ep->n_cma_tx++;
    } else if (req->len <= HC_SHM_INLINE_MAX) {
        /* one cache line for the whole message: the latency path */
        msg.flags = HC_SHM_MSG_INLINE;
        if (req->len != 0)
            memcpy(msg.inl, req->sbuf, req->len);
    } else if (padded <= HC_SHM_WHOLE_MAX &&
               hc_shm_ring_space(tx, HC_SHM_LINE + padded) >= HC_SHM_LINE + padded) {
        uint64_t at = tx->pos;
        msg.flags   = HC_SHM_MSG_WHOLE;
        tx->pos     = at + HC_SHM_LINE;
        hc_shm_ring_write(tx, req->sbuf, req->len);
        tx->pos = at;
        hc_shm_ring_write_hdr(tx, &msg);
        tx->pos = at + HC_SHM_LINE + padded;
        return 1;
    }
    hc_shm_ring_write_hdr(tx, &msg);
    return msg.flags != 0;
}

/* Streams sq_cur's payload (padded to a line) into the ring; 1 once all in.
 * budget bounds the bytes per call, so a peer that keeps up cannot keep
 * progress in one endpoint forever. */
static int shm_send_payload(hc_tl_ep_t *ep, hc_tl_req_t *req, uint64_t *budget)
{
    hc_shm_ring_t *tx     = &ep->tx;
    uint64_t       padded = shm_pad(req->len);

    while (ep->tx_off < padded) {
        uint64_t want  = shm_min(padded - ep->tx_off, ep->chunk);
        uint64_t space = hc_shm_ring_space(tx, want);
        uint64_t n, real;

        if (space == 0 || *budget == 0)
            return 0;
        n    = shm_min(space, want);
        real = ep->tx_off < req->len ? shm_min(n, req->len - ep->tx_off) : 0;
        if (real > 0)
            hc_shm_ring_write(tx, (const uint8_t *)req->sbuf + ep->tx_off, real);
        tx->pos += n - real;
        ep->tx_off += n;
        *budget -= shm_min(*budget, n);
        req->done = shm_min(ep->tx_off, req->len);
        /* Publish per chunk so the receiver copies out while we copy in. */
        hc_shm_ring_publish(tx);
    }
    return 1;
}

/* Completes written sends in order; a descriptor waits for its ack. */
static int shm_send_complete(hc_tl_ep_t *ep)
{
    hc_tl_req_t *req;
    int          n = 0;

    /* Until the peer has mapped the segment nothing is delivered: a rank that
     * finished and left before then would take the segment, and its messages,
     * with it (connections are made on first use, so that can happen). */
    if (!ep->peer_mapped) {
        if (!atomic_load_explicit(&ep->seg->attached, memory_order_acquire))
            return 0;
        ep->peer_mapped = 1;
    }

    while ((req = ep->sq_head) != NULL && req != ep->sq_cur) {
        if (req->priv[0] > ep->acks) {
            ep->acks = atomic_load_explicit(&ep->tx.ctl->acks, memory_order_acquire);
            if (req->priv[0] > ep->acks)
                break;
        }
        ep->sq_head = req->next;
        if (ep->sq_head == NULL)
            ep->sq_tail = NULL;
        req->done   = req->len;
        req->status = HCOMM_SUCCESS;
        n++;
    }
    return n;
}

/* Producer, before a small message: back to the ring's start once the write
 * position is past the hot window and the consumer has read far enough into
 * this lap that the message fits at the start (it may still be reading the
 * messages before the rewind header). The tail test is what keeps unread data
 * safe: the skipped bytes count as written, and with tail still in the
 * previous lap the ring's free space would underflow. Larger messages walk
 * the ring: rewinding before 32 KiB ones measured 8% slower (perf/RESULTS.md). */
static void shm_rewind(hc_tl_ep_t *ep, const hc_tl_req_t *next)
{
    hc_shm_ring_t *tx   = &ep->tx;
    uint64_t       off  = tx->pos & tx->mask;
    uint64_t       lap  = tx->pos - off;
    uint64_t       need = HC_SHM_LINE + (next->len <= HC_SHM_INLINE_MAX ? 0 : shm_pad(next->len));
    hc_shm_msg_t   mark = {.magic = HC_SHM_MSG_MAGIC, .flags = HC_SHM_MSG_REWIND};

    if (off < HC_SHM_HOT_BYTES || need > HC_SHM_HOT_BYTES)
        return;
    if (tx->peer < lap + need)
        tx->peer = atomic_load_explicit(&tx->ctl->tail, memory_order_acquire);
    if (tx->peer < lap + need || hc_shm_ring_space(tx, HC_SHM_LINE) < HC_SHM_LINE)
        return;
    hc_shm_ring_write_hdr(tx, &mark);
    tx->pos = lap + tx->size;
    ep->n_rewind++;
}

static int shm_send_step(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep)
{
    hc_shm_ring_t *tx     = &ep->tx;
    uint64_t       start  = tx->pos;
    uint64_t       budget = tx->size;
    hc_tl_req_t   *req;

    while ((req = ep->sq_cur) != NULL) {
        if (!ep->tx_hdr_done) {
            shm_rewind(ep, req);
            if (hc_shm_ring_space(tx, HC_SHM_LINE) < HC_SHM_LINE)
                break;
            if (shm_send_header(ctx, ep, req)) {
                ep->sq_cur = req->next;
                continue;
            }
            ep->tx_hdr_done = 1;
            ep->tx_off      = 0;
        }
        if (!shm_send_payload(ep, req, &budget))
            break;
        ep->tx_hdr_done = 0;
        ep->sq_cur      = req->next;
    }
    if (tx->pos != start)
        hc_shm_ring_publish(tx);
    return shm_send_complete(ep);
}

/* The header at the read position, found by its stamp and copied out. */
static hcomm_status_t shm_recv_header(hc_tl_ep_t *ep, hc_tl_req_t *req, const uint8_t *line)
{
    memcpy(&ep->rx_msg, line, sizeof(ep->rx_msg));
    hc_shm_ring_skip_to(&ep->rx, ep->rx.pos + HC_SHM_LINE);
    if (ep->rx_msg.magic != HC_SHM_MSG_MAGIC) {
        hc_error(SHM, "peer %d: corrupt message header in the ring", ep->peer);
        return HCOMM_ERR_PROTOCOL;
    }
    if (ep->rx_msg.len != req->len) {
        hc_error(SHM, "peer %d: message of %llu bytes arrived for a receive of %zu", ep->peer,
                 (unsigned long long)ep->rx_msg.len, req->len);
        return HCOMM_ERR_PROTOCOL;
    }
    if ((ep->rx_msg.flags & HC_SHM_MSG_INLINE) && ep->rx_msg.len > sizeof(ep->rx_msg.inl)) {
        hc_error(SHM, "peer %d: inline message of %llu bytes (at most %zu)", ep->peer,
                 (unsigned long long)ep->rx_msg.len, sizeof(ep->rx_msg.inl));
        return HCOMM_ERR_PROTOCOL;
    }
    if ((ep->rx_msg.flags & HC_SHM_MSG_WHOLE) && ep->rx_msg.len > HC_SHM_WHOLE_MAX) {
        hc_error(SHM, "peer %d: whole message of %llu bytes (at most %llu)", ep->peer,
                 (unsigned long long)ep->rx_msg.len, (unsigned long long)HC_SHM_WHOLE_MAX);
        return HCOMM_ERR_PROTOCOL;
    }
    /* A payload past the pages read so far: read the rest of the ring now. */
    if (!(ep->rx_msg.flags & (HC_SHM_MSG_CMA | HC_SHM_MSG_INLINE)) &&
        __builtin_expect((ep->rx.pos & ep->rx.mask) + shm_pad(req->len) > ep->rx.cold, 0))
        hc_shm_ring_warm(&ep->rx, ep->rx.size);
    ep->rx_hdr_done = 1;
    ep->rx_off      = 0;
    return HCOMM_SUCCESS;
}

/* Hands n bytes at the ring's read position to req: at most two pieces. */
static void shm_deliver(hc_tl_req_t *req, const hc_shm_ring_t *rx, uint64_t off, uint64_t n)
{
    uint64_t       run;
    const uint8_t *p = hc_shm_ring_peek(rx, n, &run);

    if (req->sink != NULL) {
        req->sink(req->sink_arg, off, p, run);
        if (run < n)
            req->sink(req->sink_arg, off + run, rx->data, n - run);
    } else {
        memcpy((uint8_t *)req->rbuf + off, p, run);
        if (run < n)
            memcpy((uint8_t *)req->rbuf + off + run, rx->data, n - run);
    }
}

/* Consumes the current message's padded payload from the ring; 1 once done. */
static int shm_recv_payload(hc_tl_ep_t *ep, hc_tl_req_t *req, uint64_t *budget)
{
    hc_shm_ring_t *rx     = &ep->rx;
    uint64_t       padded = shm_pad(req->len);

    while (ep->rx_off < padded) {
        uint64_t want  = shm_min(padded - ep->rx_off, ep->chunk);
        uint64_t avail = hc_shm_ring_avail(rx, want);
        uint64_t n, real;

        if (avail == 0 || *budget == 0)
            return 0;
        n    = shm_min(avail, want);
        real = ep->rx_off < req->len ? shm_min(n, req->len - ep->rx_off) : 0;
        if (real > 0)
            shm_deliver(req, rx, ep->rx_off, real);
        rx->pos += n;
        ep->rx_off += n;
        *budget -= shm_min(*budget, n);
        req->done = shm_min(ep->rx_off, req->len);
        hc_shm_ring_release(rx);
    }
    return 1;
}

/* Reads a descriptor's payload from the sender's memory; 1 once done, 0 when
 * the per-call budget ran out, or an error. */
static int shm_recv_cma(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep, hc_tl_req_t *req)
{
    size_t budget = HC_SHM_CMA_BUDGET;

    if (req->sink != NULL && ctx->bounce == NULL) {
        ctx->bounce = malloc(HC_SHM_CMA_PIECE);
        if (ctx->bounce == NULL) {
            hc_error(SHM, "peer %d: out of memory for the receive buffer", ep->peer);
            return HCOMM_ERR_NO_MEMORY;
        }
    }
    while (ep->rx_off < req->len && budget > 0) {
        size_t       n      = shm_min(req->len - ep->rx_off,
                                       req->sink ? HC_SHM_CMA_SINK_PIECE : HC_SHM_CMA_PIECE);
        uint8_t     *dst    = req->sink != NULL ? ctx->bounce : (uint8_t *)req->rbuf + ep->rx_off;
        struct iovec local  = {dst, n};
        struct iovec remote = {(void *)(uintptr_t)(ep->rx_msg.addr + ep->rx_off), n};
        ssize_t      got    = process_vm_readv(ep->peer_pid, &local, 1, &remote, 1, 0);

        /* A sender that closed gave up its pending sends, and its buffer is
         * its caller's again: what this piece read may be anything. It
         * closes before it returns, so a read that still finds it open
         * (after the read) read the message. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&ep->seg->closed[1 - ep->side], memory_order_acquire)) {
            ep->peer_gone = HC_SHM_PEER_CLOSED;
            hc_debug(SHM, "peer %d closed during a read of its %zu bytes", ep->peer, req->len);
            return HCOMM_ERR_REMOTE;
        }
        if (got <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0 && errno == ESRCH) {
                ep->peer_gone = HC_SHM_PEER_DEAD;
                return HCOMM_ERR_REMOTE;
            }
            hc_error(SHM, "peer %d: process_vm_readv of %zu bytes: %s", ep->peer, n,
                     got < 0 ? strerror(errno) : "no data");
            return HCOMM_ERR_SYSTEM;
        }
        if (req->sink != NULL)
            req->sink(req->sink_arg, ep->rx_off, dst, (size_t)got);
        ep->rx_off += (uint64_t)got;
        req->done = ep->rx_off;
        budget -= shm_min(budget, (uint64_t)got);
    }
    if (ep->rx_off < req->len)
        return 0;
    atomic_store_explicit(&ep->rx.ctl->acks, ++ep->rx_acks, memory_order_release);
    ep->n_cma_rx++;
    return 1;
}

/* Consumer, between messages: follows a rewind header to the ring's start; 1 if there was one. */
static int shm_follow_rewind(hc_shm_ring_t *rx, const uint8_t *line)
{
    const hc_shm_msg_t *m = (const hc_shm_msg_t *)(const void *)line;

    if (m->flags != HC_SHM_MSG_REWIND || m->magic != HC_SHM_MSG_MAGIC)
        return 0;
    hc_shm_ring_skip_to(rx, rx->pos - (rx->pos & rx->mask) + rx->size);
    return 1;
}

static int shm_recv_step(hc_tl_ctx_t *ctx, hc_tl_ep_t *ep)
{
    hc_shm_ring_t *rx     = &ep->rx;
    uint64_t       start  = rx->pos;
    uint64_t       budget = rx->size;
    hc_tl_req_t   *req;
    int            n = 0, rc;

    while ((req = ep->rq_head) != NULL) {
        if (!ep->rx_hdr_done) {
            const uint8_t *line = hc_shm_ring_hdr(rx);
            if (line == NULL)
                break;
            if (shm_follow_rewind(rx, line))
                continue;
            rc = shm_recv_header(ep, req, line);
            if (rc != HCOMM_SUCCESS) {
                hc_shm_ring_release(rx);
                return n + shm_ep_fail(ep, (hcomm_status_t)rc);
            }
        }
        if (ep->rx_msg.flags & HC_SHM_MSG_CMA) {
            if (rx->pos != start) /* free the descriptor's slot before the long read */
                hc_shm_ring_release(rx);
            rc = ep->peer_gone ? HCOMM_ERR_REMOTE : shm_recv_cma(ctx, ep, req);
        } else if (ep->rx_msg.flags & HC_SHM_MSG_INLINE) {
            if (req->len != 0 && req->sink != NULL)
                req->sink(req->sink_arg, 0, ep->rx_msg.inl, req->len);
            else if (req->len != 0)
                memcpy(req->rbuf, ep->rx_msg.inl, req->len);
            req->done = req->len;
            rc        = 1;
        } else if (ep->rx_msg.flags & HC_SHM_MSG_WHOLE) {
            if (req->len != 0)
                shm_deliver(req, rx, 0, req->len);
            hc_shm_ring_skip_to(rx, rx->pos + shm_pad(req->len));
            req->done = req->len;
            rc        = 1;
        } else {
            rc = shm_recv_payload(ep, req, &budget);
        }
        if (rc < 0)
            return n + (ep->peer_gone ? shm_ep_fail_gone(ep) : shm_ep_fail(ep, (hcomm_status_t)rc));
        if (rc == 0)
            break;
        ep->rx_hdr_done = 0;
        ep->rq_head     = req->next;
        if (ep->rq_head == NULL)
            ep->rq_tail = NULL;
        req->status = HCOMM_SUCCESS;
        n++;
    }
    if (rx->pos != start)
        hc_shm_ring_release(rx);
    return n;
}

/* The peer is gone: its last messages may still be read from the ring; the
 * endpoint fails once a request can no longer complete. */
static int shm_gone_step(hc_tl_ep_t *ep)
{
    /* a peer leaves cleanly only after its single-copy sends were acknowledged:
     * a descriptor still being read means its buffer is no longer its data */
    int reading = ep->rx_hdr_done && (ep->rx_msg.flags & HC_SHM_MSG_CMA);

    if (ep->sq_head != NULL || reading || hc_shm_ring_avail(&ep->rx, 1) == 0)
        return shm_ep_fail_gone(ep);
    return 0;
}

static void shm_check_peers(hc_tl_ctx_t *ctx)
{
    for (int i = 0; i < ctx->nlist; i++) {
        hc_tl_ep_t *ep = ctx->list[i];

        if (ep->status != HCOMM_SUCCESS || ep->peer_gone)
            continue;
        if (atomic_load_explicit(&ep->seg->closed[1 - ep->side], memory_order_acquire))
            ep->peer_gone = HC_SHM_PEER_CLOSED;
        else if (hc_proc_gone(ep->peer_pid, ep->peer_pidfd))
            ep->peer_gone = HC_SHM_PEER_DEAD;
    }
    /* A dead peer's last ring writes must be seen before we judge what is left. */
    atomic_thread_fence(memory_order_acquire);
}

int hc_shm_progress(hc_tl_ctx_t *ctx)
{
    int n = 0;

    /* the clock only every 64 calls: this loop is the latency path */
    if ((++ctx->tick & 63) == 0) {
        hc_shm_cpu_check(ctx);
        uint64_t now = hc_clock_coarse_ms();
        if (now >= ctx->next_check_ms) {
            ctx->next_check_ms = now + HC_SHM_CHECK_MS;
            shm_check_peers(ctx);
        }
    }
    for (int i = 0; i < ctx->nlist; i++) {
        hc_tl_ep_t *ep = ctx->list[i];

        if (ep->status != HCOMM_SUCCESS)
            continue;
        if (ep->probe_pending)
            hc_shm_probe(ctx, ep);
        if (ep->sq_head != NULL)
            n += shm_send_step(ctx, ep);
        if (ep->rq_head != NULL)
            n += shm_recv_step(ctx, ep);
        if (ep->peer_gone && ep->status == HCOMM_SUCCESS)
            n += shm_gone_step(ep);
    }
    return n;
}
