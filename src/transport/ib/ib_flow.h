/* ib_flow.h - the bookkeeping of an ib endpoint's data path, device-free
 * (tests/unit/test_ib.c):
 *
 * Eager messages and rendezvous requests are RDMA writes with immediate data
 * into the peer's ring of nslots receive slots: message k goes to slot
 * k % nslots, from local staging slot k % nslots. The sender may write
 * message k when (credit) the peer has freed message k - nslots's slot, and
 * (staging) its own write of message k - nslots has completed. The receiver
 * frees slots in order and reports the count it has freed; the sender
 * checks every report (monotonic, never more than it sent).
 *
 * Rendezvous messages are read in chunks of a fixed size; chunk j travels on
 * rail j % nrails (a sink receive stages chunk j in staging chunk j % K).
 *
 * Work request ids carry the endpoint, the kind of work, the rail and a
 * chunk index, so that a completion finds its way without a lookup.
 */
#ifndef HC_TL_IB_FLOW_H
#define HC_TL_IB_FLOW_H

#include <stddef.h>
#include <stdint.h>

/* ---- sender ---- */

typedef struct hc_ib_txflow {
    uint64_t posted; /* slot writes posted */
    uint64_t done;   /* ... whose local completion came */
    uint64_t freed;  /* ... whose slot the peer freed (its latest report) */
    uint32_t nslots;
} hc_ib_txflow_t;

void hc_ib_txflow_init(hc_ib_txflow_t *f, uint32_t nslots);
/* Whether the next write may go (a credit and a free staging slot). */
int hc_ib_txflow_can_post(const hc_ib_txflow_t *f);
/* Takes the next slot: its index (the same in both rings). */
uint32_t hc_ib_txflow_post(hc_ib_txflow_t *f);
/* A local completion: 0, or -1 when none was outstanding. */
int hc_ib_txflow_complete(hc_ib_txflow_t *f);
/* The peer's report of slots freed: 0 (taken, or the same as before), or -1
 * when it goes back or counts more than were posted. */
int hc_ib_txflow_credit(hc_ib_txflow_t *f, uint64_t freed);

/* ---- receiver ---- */

typedef struct hc_ib_rxring {
    uint64_t arrived;  /* writes into the slots seen (completions polled) */
    uint64_t consumed; /* slots freed, in order */
    uint64_t reported; /* the count last sent to the peer */
    uint32_t nslots;
} hc_ib_rxring_t;

void hc_ib_rxring_init(hc_ib_rxring_t *r, uint32_t nslots);
/* A write arrived: its slot, or -1 when the peer overran the ring (it wrote
 * without a credit). */
int hc_ib_rxring_arrive(hc_ib_rxring_t *r);
/* The oldest slot not yet freed, or -1 when none arrived. */
int hc_ib_rxring_head(const hc_ib_rxring_t *r);
/* Frees the head slot: 0, or -1 when there is none. */
int hc_ib_rxring_consume(hc_ib_rxring_t *r);
/* Arrived and not yet freed. */
uint64_t hc_ib_rxring_pending(const hc_ib_rxring_t *r);

/* ---- outstanding rendezvous sends: completed by both counts ---- */

/* Whether rendezvous send seq (0, 1, ...) is done: its request's local write
 * completed (seq < cqes) and the peer finished reading it (seq < fins). */
static inline int hc_ib_rndv_done(uint64_t seq, uint64_t cqes, uint64_t fins)
{
    return seq < cqes && seq < fins;
}
/* The peer's report of reads finished: 0, or -1 when it goes back or counts
 * more rendezvous requests than were posted. */
int hc_ib_rndv_fin_check(uint64_t prev, uint64_t now, uint64_t posted);

/* ---- chunks ---- */

/* Chunks of chunk bytes in a message of len (> 0) bytes. */
uint64_t hc_ib_chunks(uint64_t len, uint64_t chunk);
/* Chunk j's offset (*off) and length. */
uint64_t hc_ib_chunk_span(uint64_t len, uint64_t chunk, uint64_t j, uint64_t *off);

/* ---- work request ids ---- */

enum {
    HC_IB_WR_RECV = 1, /* a posted receive (consumed by a slot write) */
    HC_IB_WR_SLOT,     /* a write into the peer's slot (eager or RTS) */
    HC_IB_WR_CTRL,     /* a write of the credit words */
    HC_IB_WR_READ,     /* a rendezvous read */
};
#define HC_IB_EP_ID_MAX ((1u << 24) - 1)

static inline uint64_t hc_ib_wr_id(uint32_t ep, unsigned kind, unsigned rail, uint32_t chunk)
{
    return (uint64_t)chunk << 32 | (uint64_t)(ep & HC_IB_EP_ID_MAX) << 8 | (rail & 15u) << 4 |
           (kind & 15u);
}
static inline unsigned hc_ib_wr_kind(uint64_t id)
{
    return (unsigned)(id & 15u);
}
static inline unsigned hc_ib_wr_rail(uint64_t id)
{
    return (unsigned)(id >> 4 & 15u);
}
static inline uint32_t hc_ib_wr_ep(uint64_t id)
{
    return (uint32_t)(id >> 8) & HC_IB_EP_ID_MAX;
}
static inline uint32_t hc_ib_wr_chunk(uint64_t id)
{
    return (uint32_t)(id >> 32);
}

#endif
