/* health.h - which rank is slow. Every rank notes when it entered each
 * collective (its issue time, the coarse clock: a few ms) in a ring of the
 * last HC_ARRIVALS. Rank 0's watch thread asks every rank for its ring each
 * HCOMM_HEALTH_PERIOD over the watch channel (core/watch.h), estimating each
 * rank's clock offset from the same exchange, and over the last
 * HCOMM_HEALTH_WINDOW collectives that every rank entered computes each
 * rank's mean lateness (its arrival minus the median arrival). Grubbs' test
 * (generalized ESD, base/grubbs.h, one-sided at HCOMM_HEALTH_ALPHA) flags the
 * ranks whose mean lateness is an outlier; a flagged rank must also be late
 * by a share of the time between collectives (HCOMM_HEALTH_MIN_LATE) and by
 * a couple of clock ticks, in two evaluations in a row, before rank 0 warns
 * "slow rank R". hcomm_comm_get_health reads the last verdict. */
#ifndef HC_CORE_HEALTH_H
#define HC_CORE_HEALTH_H

#include <stdint.h>

#include "hcomm.h"

#define HC_ARRIVALS 256 /* collectives whose arrival a rank remembers */

struct hcomm_comm;

/* One collective's arrival: written by the rank's own thread, read by the
 * watch thread (cseq 0 while it changes). */
typedef struct hc_arrival {
    uint64_t cseq;
    uint64_t t; /* CLOCK_MONOTONIC(_COARSE) ns */
} hc_arrival_t;

/* Notes collective cseq's arrival at t (hc_ops_end). */
static inline void hc_arrival_note(hc_arrival_t *ring, uint64_t cseq, uint64_t t)
{
    hc_arrival_t *a = &ring[cseq & (HC_ARRIVALS - 1)];
    __atomic_store_n(&a->cseq, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&a->t, t, __ATOMIC_RELAXED);
    __atomic_store_n(&a->cseq, cseq, __ATOMIC_RELEASE);
}

/* Copies the ring's whole entries, in cseq order, into out[HC_ARRIVALS];
 * returns how many. Any thread. */
int hc_arrivals_read(const hc_arrival_t *ring, hc_arrival_t *out);

/* Rank 0's detector: allocated at the first evaluation, freed with comm. */
typedef struct hc_health hc_health_t;

/* comm->health for rank 0 of 3 ranks or more, unless HCOMM_HEALTH=0; else
 * nothing (before the watch thread sees comm). */
hcomm_status_t hc_health_create(struct hcomm_comm *c);
/* One evaluation (the watch thread): begin; every rank's arrivals and clock
 * offset from the caller (watch.c, which owns the channel) through
 * hc_health_feed; then hc_health_judge decides and warns. */
void hc_health_begin(struct hcomm_comm *c);
void hc_health_feed(struct hcomm_comm *c, int rank, const hc_arrival_t *a, int n, double offset_ns,
                    double rtt_ns);
void hc_health_judge(struct hcomm_comm *c);
void hc_health_free(struct hcomm_comm *c);

/* The last verdict into h (hcomm_comm_get_health); comm's health lock. */
void hc_health_get(struct hcomm_comm *c, hcomm_health_t *h);

#endif
