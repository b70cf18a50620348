/* watch.h - where every rank of a communicator is, asked over a channel that
 * does not share the data path: each communicator listens on a socket of its
 * own, served by one thread per process, which answers a peer that proves the
 * communicator's secret (bootstrap_gate.h) with what the communicator
 * published of itself (hc_ops_pub_t, read without its lock). A rank whose
 * operation times out asks all the others at once, names in one warn line the
 * ranks that have not reached it or do not answer (core/verdict.h), and writes
 * its flight recorder (core/flight.h). The thread also takes a dump signal
 * (HCOMM_DUMP_SIGNAL). HCOMM_WATCH=0: no socket, no thread. */
#ifndef HC_CORE_WATCH_H
#define HC_CORE_WATCH_H

#include "bootstrap/bootstrap_wire.h"
#include "core/comm.h"
#include "core/verdict.h"

/* Before the cards are exchanged: opens comm's listener on the bootstrap's
 * interface and writes its address (family 0: watch off). */
hcomm_status_t hc_watch_open(hcomm_comm_t comm, hc_bootstrap_wire_addr_t *addr);
/* After: keeps every rank's address (addrs[r]) and starts serving comm. */
hcomm_status_t hc_watch_start(hcomm_comm_t comm, const hc_bootstrap_wire_addr_t *addrs);
/* Stops serving comm and closes its listener (before comm is freed). */
void hc_watch_close(hcomm_comm_t comm);

/* Asks every rank but comm's own and those marked in skip (may be NULL)
 * the question kind (watch_wire.h), all at once, for at most seconds; fn
 * gets each whole answer with the time the proof left and the answer came
 * (hc_clock_now); left[r] (may be NULL) = 1 where a rank refused (its
 * communicator is gone), 2 where it hung up before answering (gone as it was
 * asked, or its watch too busy to prove the question). */
typedef void (*hc_watch_answer_fn)(void *arg, int rank, const void *answer, size_t len,
                                   double t_proof, double t_answer);
void hc_watch_ask(hcomm_comm_t comm, int kind, const unsigned char *skip, double seconds,
                  hc_watch_answer_fn fn, void *arg, unsigned char *left);

/* 1 when rank refuses the connection for comm's watch question (its
 * communicator is gone, or its process), asked for at most seconds; 0 when
 * it answers, hangs up, cannot be asked (HCOMM_WATCH=0) or says nothing in
 * time. */
int hc_watch_left(hcomm_comm_t comm, int rank, double seconds);

/* Tells every other rank that comm is revoked (hcomm_comm_revoke); waits at
 * most HCOMM_WATCH_TIMEOUT for their answers. */
void hc_watch_revoke(hcomm_comm_t comm);

/* Shrinking a failed communicator (watch_shrink.c). hc_watch_shrink_agree:
 * the candidates cand[r] = 1 (not excluded) agree over the watch channel
 * on who is alive (alive[r] = 1) and on the new rendezvous; at most comm's
 * timeout. The others answer the watch thread's questions: */
hcomm_status_t hc_watch_shrink_agree(hcomm_comm_t comm, const uint8_t *cand, uint8_t *alive,
                                     hcomm_unique_id_t *id);
size_t         hc_watch_shrink_answer(hcomm_comm_t comm, int asker, uint8_t *buf);
size_t         hc_watch_shrink_answer_len(int nranks);
void           hc_watch_shrink_free(hcomm_comm_t comm);
/* Watch lock held: comm's decided answer in a new block (*out; its length),
 * 0 when it decided nothing. */
size_t hc_watch_shrink_decision(hcomm_comm_t comm, uint8_t **out);
/* The lock the watch thread answers under. */
void hc_watch_lock(void);
void hc_watch_unlock(void);

/* Where comm is now, as its peers would be told. Any thread. */
void hc_watch_read(hcomm_comm_t comm, hc_rank_where_t *w);
/* Asks every other rank where it is, all at once, for at most seconds;
 * where[nranks]; comm's own entry from hc_watch_read. */
void hc_watch_gather(hcomm_comm_t comm, hc_rank_where_t *where, double seconds);

/* req failed on comm for want of a peer (status: it timed out, or a peer
 * failed or left): gathers, logs the verdict as one warn line ("stuck: ..."
 * or "failed: ...") and keeps it for the flight recorder. Returns the status
 * req fails with: status, or HCOMM_ERR_REVOKED when a rank that answered
 * knows comm revoked (a peer that left because of a revoke looks like a
 * failure from here). */
hcomm_status_t hc_watch_verdict(hcomm_comm_t comm, hcomm_request_t req, hcomm_status_t status);

#endif
