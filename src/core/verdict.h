/* verdict.h - which rank a stuck operation waits for, in one line:
 *   allreduce #1042 (16 MiB): rank 3 (host h2) is at #1041 broadcast (done);
 *   ranks 0-2, 4-7 waiting
 * from where every rank is (its answer to a watch query, core/watch.h, or
 * what its flight recorder file says, tools/hcomm_trace.c). Pure: no
 * communicator, so the offline tool prints the same verdict as the live one. */
#ifndef HC_CORE_VERDICT_H
#define HC_CORE_VERDICT_H

#include <stddef.h>
#include <stdint.h>

#include "core/op_rec.h"

/* Where one rank is. Numbers as in op_rec.h (hc_ops_pub_t). */
typedef struct hc_rank_where {
    int      known;   /* 0: no answer (live) or no file (offline) */
    int      left;    /* not known: its communicator is gone (refused) */
    uint64_t seq;     /* operations issued */
    uint64_t ccount;  /* collectives issued */
    uint64_t ended;   /* the last ended operation's seq */
    uint64_t c_bytes; /* the last collective's */
    uint32_t c_desc;  /* the last collective's coll | dtype << 8 */
    int32_t  waiting; /* its running operation waits for this rank; -1 */
    int      revoked; /* it knows the communicator revoked */
} hc_rank_where_t;

/* The operation that did not finish, as the rank that reports saw it. */
typedef struct hc_verdict_op {
    uint8_t  coll; /* hc_coll_t, or HC_OP_GROUP */
    uint64_t seq;  /* its number on the reporting rank */
    uint64_t cseq; /* a collective's number, alike on every rank; 0: send, recv, group */
    uint64_t bytes;
    int32_t  peer; /* send, recv: the peer; else -1 */
} hc_verdict_op_t;

/* Formats the verdict about op from where[nranks] (hosts[r]: rank r's host
 * name, may be NULL) into buf; offline: where[r].known == 0 reads "left no
 * record" rather than "does not answer". Returns how many ranks it names as
 * the cause (missing, silent, or, when every rank reached op, the rank the
 * others wait for). */
int hc_verdict_format(const hc_verdict_op_t *op, const hc_rank_where_t *where,
                      const char *const *hosts, int nranks, int offline, char *buf, size_t size);

/* "16 MiB", "4 B": bytes for a person. */
void hc_verdict_bytes(uint64_t bytes, char *buf, size_t size);

#endif
