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
 * "slow rank R". hcomm_comm_get_health reads the last verdict.
 *
 * Which link is slow (health_link.c): a transport that streams a message
 * (tcp) stamps its first and last byte; every rank keeps, per peer it
 * receives from, the smoothed throughput of such messages and sends it with
 * its arrivals. Rank 0 tests the links of each class (transport, same host
 * or not) alike: a link whose throughput is a low outlier and a clear share
 * below its class's median, in two evaluations in a row, is named
 * "slow link S -> D". */
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
    uint64_t t; /* CLOCK_MONOTONIC(_COARSE) ns, or HC_ARRIVAL_TICKS | a trace's TSC ticks */
} hc_arrival_t;

/* A traced operation's time is in ticks (ops.h): the watch thread turns it
 * into ns when it reads the ring, off the operation's path. */
#define HC_ARRIVAL_TICKS (1ull << 63)

/* Notes collective cseq's arrival at t (hc_ops_end). */
static inline void hc_arrival_note(hc_arrival_t *ring, uint64_t cseq, uint64_t t)
{
    hc_arrival_t *a = &ring[cseq & (HC_ARRIVALS - 1)];
    __atomic_store_n(&a->cseq, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&a->t, t, __ATOMIC_RELAXED);
    __atomic_store_n(&a->cseq, cseq, __ATOMIC_RELEASE);
}

/* A link's throughput as its receiver sees it (comm->links[peer]): written by
 * the thread that progresses comm, read by the watch thread. Running sums:
 * rank 0 takes the difference between two evaluations. */
typedef struct hc_link_stat {
    uint64_t n;     /* messages timed (release: cls is set) */
    uint64_t bytes; /* timed bytes, and the ns they took */
    uint64_t ns;
    uint32_t cls; /* transport index * 2 + 1 when the peer shares the host */
} hc_link_stat_t;

/* What a rank reports of one link, and rank 0 judges. */
typedef struct hc_link_report {
    int32_t  peer; /* the sender; the reporting rank receives */
    uint32_t cls;
    uint64_t n, bytes, ns;
} hc_link_report_t;

#define HC_LINKS_REPORTED 64 /* links a rank reports at most */

/* A timed receive of len bytes from peer took ns (the executor). */
void hc_link_note(struct hcomm_comm *c, int peer, size_t len, uint64_t ns);
/* comm's links that have a measure, at most HC_LINKS_REPORTED; how many. Any thread. */
int hc_links_read(const struct hcomm_comm *c, hc_link_report_t *out);

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
void hc_health_feed_links(struct hcomm_comm *c, int rank, const hc_link_report_t *l, int n);
void hc_health_judge(struct hcomm_comm *c);
void hc_health_free(struct hcomm_comm *c);

/* Rank 0's link test (health_link.c), owned by hc_health_t. */
typedef struct hc_links hc_links_t;
hc_links_t             *hc_links_create(int nranks);
void                    hc_links_begin(hc_links_t *l);
void                    hc_links_feed(hc_links_t *l, int rank, const hc_link_report_t *r, int n);
/* Tests the links fed since begin, warns, and writes its part of v. */
void hc_links_judge(hc_links_t *l, struct hcomm_comm *c, hcomm_health_t *v);
void hc_links_free(hc_links_t *l);

/* The last verdict into h (hcomm_comm_get_health); comm's health lock. */
void hc_health_get(struct hcomm_comm *c, hcomm_health_t *h);

#endif
