/* ofi_ep.c - ofi endpoints: queuing requests, cutting them into chunks the
 * provider gets as room allows, completing them in posting order, failing. */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "transport/ofi/ofi.h"

static uint8_t zero_len_buf[8]; /* a valid address for empty messages */

/* send_chunk and recv_chunk: our own allocation failed (not the provider's) */
#define OWN_NOMEM (-FI_EOTHER)

hcomm_status_t hc_ofi_ep_create(hc_tl_ctx_t *ctx, int peer, fi_addr_t addr, const hc_ofi_cut_t *cut,
                                pid_t pid, hc_tl_ep_t **ep_p)
{
    hc_tl_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        hc_error(NET, "ofi: peer %d: out of memory for an endpoint", peer);
        return HCOMM_ERR_NO_MEMORY;
    }
    ep->ctx      = ctx;
    ep->peer     = peer;
    ep->addr     = addr;
    ep->status   = HCOMM_SUCCESS;
    ep->pid      = pid;
    ep->cut      = *cut;
    ep->limit    = UINT64_MAX;
    ep->rx_grant = HC_OFI_WINDOW;
    *ep_p        = ep;
    return HCOMM_SUCCESS;
}

/* After the context's endpoint closed: nothing writes to the slots any more. */
void hc_ofi_ep_destroy(hc_tl_ep_t *ep)
{
    if (ep == NULL)
        return;
    for (int i = 0; i < HC_OFI_SINK_SLOTS; i++)
        free(ep->slot[i]);
    free(ep);
}

hcomm_status_t hc_ofi_ep_status(hc_tl_ep_t *ep)
{
    return ep == NULL ? HCOMM_ERR_INVALID_ARG : ep->status;
}

/* ---- sink staging ---- */

#define SLOT_NONE_FREE (-1)
#define SLOT_NO_MEMORY (-2)

/* A free staging slot, its memory made on first use; SLOT_NONE_FREE (wait
 * for one) or SLOT_NO_MEMORY. */
static int slot_get(hc_tl_ep_t *ep)
{
    for (int i = 0; i < HC_OFI_SINK_SLOTS; i++) {
        if (ep->slot_busy & (1u << i))
            continue;
        if (ep->slot[i] == NULL && (ep->slot[i] = malloc(ep->cut.chunk)) == NULL)
            return SLOT_NO_MEMORY;
        ep->slot_busy |= 1u << i;
        return i;
    }
    return SLOT_NONE_FREE;
}

static void slot_put(hc_tl_ep_t *ep, int slot)
{
    if (slot >= 0)
        ep->slot_busy &= ~(1u << slot);
}

/* Hands a staged chunk to the sink, then every parked one now in turn: a
 * sink sees its message's bytes in order, whatever order chunks came in. */
void hc_ofi_sink_done(hc_tl_ep_t *ep, hc_ofi_op_t *op)
{
    hc_tl_req_t *r = op->req;
    size_t       k = hc_ofi_chunk_len(&ep->cut, r->len);
    while (op != NULL) {
        if (op->chunk != r->done / k) {
            op->next   = ep->parked;
            ep->parked = op;
            return;
        }
        if (op->len > 0)
            r->sink(r->sink_arg, r->done, ep->slot[op->slot], op->len);
        r->done += op->len;
        HC_OFI_DONE(r)++;
        slot_put(ep, op->slot);
        hc_ofi_op_put(ep->ctx, op);
        op = NULL;
        for (hc_ofi_op_t **pp = &ep->parked; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->req == r && (*pp)->chunk == r->done / k) {
                op  = *pp;
                *pp = op->next;
                break;
            }
        }
    }
}

/* ---- posting ---- */

static void live_link(hc_tl_ep_t *ep, hc_ofi_op_t *op)
{
    op->prev = NULL;
    op->next = ep->live;
    if (ep->live != NULL)
        ep->live->prev = op;
    ep->live = op;
}

void hc_ofi_op_unlink(hc_ofi_op_t *op)
{
    if (op->prev != NULL)
        op->prev->next = op->next;
    else
        op->ep->live = op->next;
    if (op->next != NULL)
        op->next->prev = op->prev;
    op->prev = op->next = NULL;
}

/* Chunk j of a send: injected when small (done at once), else sent from
 * the caller's buffer. 0, or the provider's -FI_E* code. */
static int send_chunk(hc_tl_ep_t *ep, hc_tl_req_t *r, uint32_t j)
{
    hc_tl_ctx_t   *ctx = ep->ctx;
    size_t         k = hc_ofi_chunk_len(&ctx->cut, r->len), off = (size_t)j * k;
    size_t         len  = r->len - off < k ? r->len - off : k;
    const uint8_t *p    = r->len > 0 ? (const uint8_t *)r->sbuf + off : zero_len_buf;
    uint64_t       tag  = hc_ofi_tag(HC_OFI_KIND_DATA, ctx->rank, HC_OFI_SEQ(r) + j);
    uint64_t       data = r->len & ctx->data_mask;
    if (HC_OFI_SEQ(r) + j >= ctx->grant[ep->peer])
        return -FI_EAGAIN; /* no credit yet */
    if (len <= ctx->inject) {
        int rc = (int)fi_tinjectdata(ctx->ep, p, len, data, ep->addr, tag);
        if (rc == 0)
            HC_OFI_DONE(r)++;
        return rc;
    }
    if (ctx->tx_live >= ctx->tx_cap)
        return -FI_EAGAIN;
    hc_ofi_mr_t *mr = NULL;
    hc_ofi_op_t *op = hc_ofi_op_get(ctx);
    if (op == NULL)
        return OWN_NOMEM;
    if (hc_ofi_mr_get(&ctx->mrc, r->sbuf, r->len, 0, &mr) != HCOMM_SUCCESS) {
        hc_ofi_op_put(ctx, op);
        return OWN_NOMEM;
    }
    *op = (hc_ofi_op_t){
        .req = r, .ep = ep, .mr = mr, .chunk = j, .kind = HC_OFI_OP_SEND, .slot = -1, .len = len};
    int rc =
        (int)fi_tsenddata(ctx->ep, p, len, hc_ofi_mr_desc(op->mr), data, ep->addr, tag, &op->fctx);
    if (rc != 0) {
        hc_ofi_op_put(ctx, op);
        return rc;
    }
    live_link(ep, op);
    ctx->tx_live++;
    return 0;
}

/* Chunk j of a receive, with its exact tag; a sink's goes to a staging
 * slot, -FI_EAGAIN while none is free. */
static int recv_chunk(hc_tl_ep_t *ep, hc_tl_req_t *r, uint32_t j)
{
    hc_tl_ctx_t *ctx = ep->ctx;
    size_t       k = hc_ofi_chunk_len(&ep->cut, r->len), off = (size_t)j * k;
    size_t       len = r->len - off < k ? r->len - off : k;
    if (ctx->rx_live >= ctx->rx_cap)
        return -FI_EAGAIN;
    int staged = r->sink != NULL && r->len > 0; /* an empty message has nothing to stage */
    int slot   = staged ? slot_get(ep) : -1;
    if (staged && slot < 0)
        return slot == SLOT_NO_MEMORY ? OWN_NOMEM : -FI_EAGAIN;
    uint8_t     *p = staged ? ep->slot[slot] : r->len > 0 ? (uint8_t *)r->rbuf + off : zero_len_buf;
    hc_ofi_mr_t *mr   = NULL;
    hc_ofi_op_t *op   = hc_ofi_op_get(ctx);
    hcomm_status_t st   = op == NULL ? HCOMM_ERR_NO_MEMORY
                          : staged   ? hc_ofi_mr_get(&ctx->mrc, p, ep->cut.chunk, 1, &mr)
                                     : hc_ofi_mr_get(&ctx->mrc, r->rbuf, r->len, 0, &mr);
    if (st != HCOMM_SUCCESS) {
        if (op != NULL)
            hc_ofi_op_put(ctx, op);
        slot_put(ep, slot);
        return OWN_NOMEM;
    }
    *op          = (hc_ofi_op_t){.req   = r,
                                 .ep    = ep,
                                 .mr    = mr,
                                 .chunk = j,
                                 .kind  = staged ? HC_OFI_OP_SINK : HC_OFI_OP_RECV,
                                 .slot  = (int8_t)slot,
                                 .len   = len};
    uint64_t tag = hc_ofi_tag(HC_OFI_KIND_DATA, ep->peer, HC_OFI_SEQ(r) + j);
    int      rc =
        (int)fi_trecv(ctx->ep, p, len, hc_ofi_mr_desc(op->mr), FI_ADDR_UNSPEC, tag, 0, &op->fctx);
    if (rc != 0) {
        hc_ofi_op_put(ctx, op);
        slot_put(ep, slot);
        return rc;
    }
    live_link(ep, op);
    ctx->rx_live++;
    return 0;
}

/* Posts the chunks of one queue, in order, until the provider has no room. */
static void post_queue(hc_tl_ep_t *ep, hc_tl_req_t **post, int tx)
{
    const hc_ofi_cut_t *cut = tx ? &ep->ctx->cut : &ep->cut;
    while (*post != NULL) {
        hc_tl_req_t *r = *post;
        uint32_t     n = hc_ofi_nchunks(cut, r->len);
        while (HC_OFI_POSTED(r) < n) {
            uint32_t j  = (uint32_t)HC_OFI_POSTED(r);
            int      rc = tx ? send_chunk(ep, r, j) : recv_chunk(ep, r, j);
            /* no room now; shm says ENOMEM when unexpected messages hold it */
            if (rc == -FI_EAGAIN || (rc == -FI_ENOMEM && !tx))
                return;
            if (rc != 0) {
                hc_error(NET, "ofi: peer %d: posting a %s of %zu bytes: %s", ep->peer,
                         tx ? "send" : "receive", r->len,
                         rc == OWN_NOMEM ? "out of memory" : hc_ofi_lib.fi_strerror(-rc));
                if (ep->pend_fail == HCOMM_SUCCESS)
                    ep->pend_fail = rc == OWN_NOMEM ? HCOMM_ERR_NO_MEMORY : HCOMM_ERR_REMOTE;
                return;
            }
            HC_OFI_POSTED(r)++;
        }
        *post = r->next;
    }
}

/* Credit for the chunks now posted, and a window beyond, once it grew by
 * a step: the peer may send them. */
static void credit(hc_tl_ep_t *ep)
{
    hc_tl_req_t *r     = ep->rx_post;
    uint64_t     front = r != NULL ? HC_OFI_SEQ(r) + HC_OFI_POSTED(r) : ep->rx_seq;
    uint64_t     give  = front + HC_OFI_WINDOW;
    if (give >= ep->rx_grant + HC_OFI_CREDIT_STEP && !ep->gone) {
        hc_ofi_ctl_send(ep->ctx, ep->addr, HC_OFI_CTL_CREDIT, give, 0);
        ep->rx_grant = give;
    }
}

void hc_ofi_ep_post(hc_tl_ep_t *ep)
{
    if (ep->status != HCOMM_SUCCESS || ep->pend_fail != HCOMM_SUCCESS)
        return;
    if (ep->tx_post != NULL && ep->hello_out)
        post_queue(ep, &ep->tx_post, 1);
    if (ep->rx_post != NULL)
        post_queue(ep, &ep->rx_post, 0);
    credit(ep);
}

/* ---- queuing ---- */

static void enqueue(hc_tl_req_t **head, hc_tl_req_t **tail, hc_tl_req_t **post, hc_tl_req_t *req)
{
    if (*tail != NULL)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
    if (*post == NULL)
        *post = req;
}

static void req_start(hc_tl_req_t *req, hc_tl_ep_t *ep, size_t len, uint64_t *seq,
                      const hc_ofi_cut_t *cut)
{
    hc_tl_req_init(req, ep, len);
    HC_OFI_SEQ(req)    = *seq;
    HC_OFI_POSTED(req) = 0;
    HC_OFI_DONE(req)   = 0;
    HC_OFI_ERR(req)    = 0;
    *seq += hc_ofi_nchunks(cut, len);
}

hcomm_status_t hc_ofi_isend(hc_tl_ep_t *ep, const void *buf, size_t len, hc_tl_req_t *req)
{
    hcomm_status_t st = hc_tl_msg_args(ep, buf, len, NULL, req);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    if (ep->gone)
        return HCOMM_ERR_REMOTE;
    req_start(req, ep, len, &ep->tx_seq, &ep->ctx->cut);
    req->sbuf = buf;
    enqueue(&ep->tx_head, &ep->tx_tail, &ep->tx_post, req);
    hc_ofi_ep_post(ep);
    return HCOMM_SUCCESS;
}

/* A gone peer's messages already on their way still arrive: receives are
 * taken until progress sees that none can come. */
hcomm_status_t hc_ofi_irecv(hc_tl_ep_t *ep, void *buf, size_t len, hc_tl_sink_fn_t sink,
                            void *sink_arg, hc_tl_req_t *req)
{
    hcomm_status_t st = hc_tl_msg_args(ep, buf, len, sink, req);
    if (st != HCOMM_SUCCESS)
        return st;
    if (ep->status != HCOMM_SUCCESS)
        return ep->status;
    if (ep->gone) /* the grace counts from now: what it sent may be here */
        ep->quiet = hc_clock_now();
    req_start(req, ep, len, &ep->rx_seq, &ep->cut);
    req->rbuf     = buf;
    req->sink     = sink;
    req->sink_arg = sink_arg;
    enqueue(&ep->rx_head, &ep->rx_tail, &ep->rx_post, req);
    hc_ofi_ep_post(ep);
    return HCOMM_SUCCESS;
}

/* ---- completion in order, and failure ---- */

static int req_done(const hc_tl_req_t *r, const hc_ofi_cut_t *cut)
{
    return HC_OFI_ERR(r) == 0 && HC_OFI_DONE(r) == hc_ofi_nchunks(cut, r->len);
}

/* Whether the provider still holds an operation of r: a receive it
 * matched (which fi_cancel does not stop) still writes into r's buffer, a
 * send still reads from it. */
static int req_held(const hc_tl_ep_t *ep, const hc_tl_req_t *r)
{
    for (const hc_ofi_op_t *op = ep->live; op != NULL; op = op->next)
        if (op->req == r)
            return 1;
    return 0;
}

/* Completes the requests at the head of a queue that finished, or failed
 * on their own; with st, also fails every one after them. A failed one waits
 * until the provider gave back all its operations. Returns how many it
 * completed. */
static int queue_settle(hc_tl_ep_t *ep, hc_tl_req_t **head, hc_tl_req_t **tail,
                        const hc_ofi_cut_t *cut, hcomm_status_t st)
{
    int          n = 0;
    hc_tl_req_t *r;
    while ((r = *head) != NULL) {
        int            ok  = req_done(r, cut);
        hcomm_status_t err = (hcomm_status_t)(int64_t)HC_OFI_ERR(r);
        if (!ok && err == HCOMM_SUCCESS && st == HCOMM_SUCCESS)
            break;
        if (!ok && req_held(ep, r))
            break;
        *head   = r->next;
        r->next = NULL;
        if (ok)
            r->done = r->len;
        /* last: the request is the caller's again */
        r->status = ok ? HCOMM_SUCCESS : err != HCOMM_SUCCESS ? err : st;
        n++;
    }
    if (*head == NULL)
        *tail = NULL;
    return n;
}

/* A failed endpoint's requests fail with its status, each once the
 * provider gave back its operations. */
int hc_ofi_ep_release(hc_tl_ep_t *ep)
{
    int n = 0;
    if (ep->tx_head != NULL)
        n += queue_settle(ep, &ep->tx_head, &ep->tx_tail, &ep->ctx->cut, ep->status);
    if (ep->rx_head != NULL)
        n += queue_settle(ep, &ep->rx_head, &ep->rx_tail, &ep->cut, ep->status);
    return n;
}

/* The first sequence number of the first send not finished: what a bye
 * tells the peer not to wait for. */
uint64_t hc_ofi_ep_tx_done_seq(const hc_tl_ep_t *ep)
{
    for (const hc_tl_req_t *r = ep->tx_head; r != NULL; r = r->next)
        if (!req_done(r, &ep->ctx->cut))
            return HC_OFI_SEQ(r);
    return ep->tx_seq;
}

uint64_t hc_ofi_ep_rx_done_seq(const hc_tl_ep_t *ep)
{
    for (const hc_tl_req_t *r = ep->rx_head; r != NULL; r = r->next)
        if (!req_done(r, &ep->cut))
            return HC_OFI_SEQ(r);
    return ep->rx_seq;
}

/* Stops every operation: receives not yet matched are cancelled (they come
 * back as errors); the rest come back as the provider finishes them. Each is
 * freed as it comes back; forget (fini) also unties it from its request. */
static void ep_abandon(hc_tl_ep_t *ep, int forget)
{
    for (hc_ofi_op_t *op = ep->live; op != NULL; op = op->next) {
        if (forget)
            op->req = NULL;
        if (op->kind != HC_OFI_OP_SEND)
            fi_cancel(&ep->ctx->ep->fid, &op->fctx);
    }
    while (ep->parked != NULL) {
        hc_ofi_op_t *op = ep->parked;
        ep->parked      = op->next;
        slot_put(ep, op->slot);
        hc_ofi_op_put(ep->ctx, op);
    }
    ep->tx_post = ep->rx_post = NULL;
}

/* Fails the endpoint once: the requests finished at the head of each queue
 * complete, every other one fails with st, now or (one the provider still
 * holds) from progress once it came back. Returns how many completed now. */
int hc_ofi_ep_fail(hc_tl_ep_t *ep, hcomm_status_t st)
{
    if (ep->status != HCOMM_SUCCESS)
        return 0;
    ep->status = st;
    ep_abandon(ep, 0);
    return hc_ofi_ep_release(ep);
}

/* fini: pending requests are abandoned, their buffers and sinks untouched. */
void hc_ofi_ep_drop(hc_tl_ep_t *ep)
{
    if (ep->status == HCOMM_SUCCESS)
        ep->status = HCOMM_ERR_ABORTED;
    ep_abandon(ep, 1);
    ep->tx_head = ep->tx_tail = ep->rx_head = ep->rx_tail = NULL;
}

void hc_ofi_ep_gone(hc_tl_ep_t *ep, uint64_t limit, uint64_t taken)
{
    if (!ep->gone) {
        ep->quiet = hc_clock_now();
        ep->taken = taken;
    }
    ep->gone = 1;
    if (limit < ep->limit)
        ep->limit = limit;
    if (taken > ep->taken)
        ep->taken = taken;
}

/* Sends the gone peer never took fail, in their turn, once the provider
 * gave back their chunks (it reads their buffers until then); the ones it
 * took still complete (their completions may be on their way). */
static void tx_cut(hc_tl_ep_t *ep)
{
    for (hc_tl_req_t *r = ep->tx_head; r != NULL; r = r->next)
        if (HC_OFI_SEQ(r) >= ep->taken && HC_OFI_ERR(r) == 0)
            HC_OFI_ERR(r) = (uint64_t)(int64_t)HCOMM_ERR_REMOTE;
    ep->tx_post = NULL; /* what was not posted was not taken */
}

/* A gone peer: the endpoint fails once nothing can complete any more: no
 * receive is pending and the peer sent nothing more, or the next one's
 * message was never sent, and no send it took is pending; or nothing came
 * for a while: a peer that died says nothing of what it sent, and what it
 * sent may still be on its way, or waiting for receives. */
int hc_ofi_ep_gone_step(hc_tl_ep_t *ep, double now)
{
    int known = ep->limit != UINT64_MAX;
    tx_cut(ep);
    int          n = hc_ofi_ep_release(ep);
    hc_tl_req_t *r = ep->rx_head;
    int          wait =
        ep->tx_head != NULL || (r != NULL && HC_OFI_SEQ(r) < ep->limit) || (r == NULL && !known);
    if (!wait && r == NULL && ep->rx_seq < ep->limit)
        return n; /* messages the peer finished may still be taken */
    if (wait && now - ep->quiet < HC_OFI_GRACE_S * (known ? 5 : 1))
        return n;
    if (r != NULL || ep->tx_head != NULL)
        hc_error(NET, "ofi: peer %d %s with requests pending", ep->peer,
                 known ? "closed its endpoint" : "died");
    else
        hc_debug(NET, "ofi: peer %d %s", ep->peer, known ? "closed its endpoint" : "died");
    return n + hc_ofi_ep_fail(ep, HCOMM_ERR_REMOTE);
}
