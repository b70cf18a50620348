/* op_rec.h - the record of one operation (a call, or a fused group): what it
 * does, its number, its state and when it was issued, started and ended. A
 * request carries its own from issue to end (core/ops.h); the communicator
 * keeps the last ones in a ring, which is what a flight recorder reads. */
#ifndef HC_CORE_OP_REC_H
#define HC_CORE_OP_REC_H

#include <stdint.h>

typedef enum {
    HC_OP_QUEUED = 0, /* issued, waiting for the operations before it */
    HC_OP_RUNNING,
    HC_OP_DONE,
    HC_OP_FAILED
} hc_op_state_t;

/* The coll of a fused group's record (one past hc_coll_t's). */
#define HC_OP_GROUP 0xffu

/* Which clock an operation's times come from: the coarse one (a few ms,
 * while nothing asks for more: one reading at issue), CLOCK_MONOTONIC (a profiler
 * is on), or hc_clock_ticks() (a trace file alone: converted when written). */
enum { HC_OP_CLOCK_COARSE = 0, HC_OP_CLOCK_NS, HC_OP_CLOCK_TICKS };

typedef struct hc_op_rec {
    uint64_t seq;  /* 1, 2, ... per communicator in issue order */
    uint64_t cseq; /* collectives only: 1, 2, ... alike on every rank; 0: send, recv, group */
    uint64_t t_issue, t_start, t_end; /* in its clock; 0: not reached */
    uint64_t count;                   /* elements as the call gave them; a group: its calls */
    uint64_t bytes;                   /* a group's: the sum over its calls (hc_op_bytes) */
    uint64_t sent;   /* bytes handed to transports: while running, the count it started at */
    int32_t  peer;   /* send, recv: the peer; broadcast, reduce: the root; else -1 */
    int32_t  status; /* hcomm_status_t at the end; HCOMM_IN_PROGRESS before */
    uint32_t nsteps; /* its schedule's steps */
    uint8_t  coll;   /* hc_coll_t, or HC_OP_GROUP */
    uint8_t  dtype, op;
    uint8_t  algo;  /* hc_algo_t (0, auto: a group's) */
    uint8_t  state; /* hc_op_state_t */
    uint8_t  clock; /* HC_OP_CLOCK_* */
} hc_op_rec_t;

/* What a thread other than the communicator's may read of it at any moment,
 * without its lock (core/watch.h answers peers' questions with it): the last
 * operation issued, the last collective, the last ended, and whom the running
 * one waits for. Written by whoever issues or progresses (the comm's lock held
 * once it is threaded) under a sequence lock: ver is odd while it changes;
 * every field is an atomic, so a reader gets whole values, and it reads again
 * when ver moved. */
typedef struct hc_ops_pub {
    uint64_t ver;
    uint64_t seq;     /* the last issued */
    uint64_t ccount;  /* collectives issued (cseq of the last) */
    uint64_t ended;   /* the last ended */
    uint64_t bytes;   /* the last issued's */
    uint64_t c_bytes; /* the last collective's */
    uint32_t desc;    /* the last issued's: coll | dtype << 8 */
    uint32_t c_desc;  /* the last collective's */
    int32_t  waiting; /* the running one's first unfinished transfer's peer; -1 */
} hc_ops_pub_t;

#endif
