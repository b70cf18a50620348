/* watch_wire.h - a communicator's watch (private to watch*.c) and what its
 * queries and answers look like on the wire (integers in network order). */
#ifndef HC_CORE_WATCH_WIRE_H
#define HC_CORE_WATCH_WIRE_H

#include <arpa/inet.h>
#include <endian.h>
#include <stdint.h>

#include "bootstrap/bootstrap_gate.h"
#include "core/health.h"
#include "core/verdict.h"

#define HC_WATCH_HELLO_MAGIC 0x68637771u    /* "hcwq" */
#define HC_WATCH_REPLY_MAGIC 0x68637772u    /* "hcwr" */
#define HC_WATCH_ARRIVALS_MAGIC 0x68637761u /* "hcwa" */

/* What a query asks for. */
enum {
    HC_WATCH_WHERE    = 0,
    HC_WATCH_ARRIVALS = 1,
    HC_WATCH_REVOKE   = 2, /* answered as WHERE */
    HC_WATCH_SHRINK   = 3  /* watch_shrink.c */
};

#define HC_WATCH_SHRINK_MAGIC 0x68637773u /* "hcws" */
#define HC_WATCH_SHRINK_MAX 65536         /* ranks a failed communicator may have to shrink */

/* The answer to HC_WATCH_SHRINK: this header, then a bitmap of the ranks
 * alive (bit r of byte r / 8), nranks bits, meaningful once decided. */
enum { HC_SHRINK_NOT_YET = 0, HC_SHRINK_JOINED = 1, HC_SHRINK_DECIDED = 2 };
typedef struct hc_watch_shrink {
    uint32_t          magic;
    int32_t           rank;
    uint32_t          status; /* HC_SHRINK_* */
    uint32_t          pad;
    hcomm_unique_id_t id; /* the new communicator's, once decided */
} hc_watch_shrink_t;

typedef struct hc_watch {
    struct hcomm_comm        *comm; /* NULL: a relic, below */
    int                       lfd;
    int                       serving;   /* in the thread's list */
    int                       pfd_first; /* its entries in the thread's poll round */
    hc_bootstrap_wire_addr_t *addrs;     /* every rank's listener */
    char                      what[32];
    uint8_t                   key[16]; /* the communicator's cookie: the gate's key */
    hc_gate_t                 gate;
    /* a relic: the listener of a communicator gone after its shrink decided,
     * kept answering that decision to late joiners until relic_until */
    uint8_t *relic;
    size_t   relic_len;
    double   relic_until;
} hc_watch_t;

/* A gate hello: the magic and nonce first (bootstrap_gate.h). */
typedef struct hc_watch_hello {
    uint32_t magic;
    uint8_t  nonce[16];
    int32_t  rank; /* who asks */
    uint32_t kind; /* HC_WATCH_* */
} hc_watch_hello_t;

/* The answer to HC_WATCH_ARRIVALS: this header, then n pairs of big-endian
 * u64 (cseq, t), oldest first, then nlinks hc_watch_link_t. now: the
 * answerer's CLOCK_MONOTONIC ns as it answered, for the asker's estimate of
 * the clock offset. */
typedef struct hc_watch_arrivals {
    uint32_t magic;
    int32_t  rank;
    uint32_t n;
    uint32_t nlinks;
    uint64_t now;
} hc_watch_arrivals_t;

/* What the answerer measured of one peer's link to it (core/health.h). */
typedef struct hc_watch_link {
    int32_t  peer;
    uint32_t cls;
    uint64_t n, bytes, ns;
} hc_watch_link_t;

/* The answer's length, from its header's counts; 0 when they are too large. */
static inline size_t hc_watch_arrivals_len(uint32_t n, uint32_t nlinks)
{
    if (n > HC_ARRIVALS || nlinks > HC_LINKS_REPORTED)
        return 0;
    return sizeof(hc_watch_arrivals_t) + n * sizeof(hc_arrival_t) +
           nlinks * sizeof(hc_watch_link_t);
}

#define HC_WATCH_ARRIVALS_MAX                                                                      \
    (sizeof(hc_watch_arrivals_t) + HC_ARRIVALS * sizeof(hc_arrival_t) +                            \
     HC_LINKS_REPORTED * sizeof(hc_watch_link_t))
#define HC_WATCH_SHRINK_ANSWER_MAX (sizeof(hc_watch_shrink_t) + HC_WATCH_SHRINK_MAX / 8)
#define HC_WATCH_ANSWER_MAX                                                                        \
    (HC_WATCH_ARRIVALS_MAX > HC_WATCH_SHRINK_ANSWER_MAX ? HC_WATCH_ARRIVALS_MAX                    \
                                                        : HC_WATCH_SHRINK_ANSWER_MAX)

typedef struct hc_watch_reply {
    uint32_t magic;
    int32_t  rank;
    uint32_t c_desc;
    int32_t  waiting;
    uint32_t flags; /* HC_WATCH_REVOKED */
    uint32_t pad;
    uint64_t seq, ccount, ended, c_bytes;
} hc_watch_reply_t;

#define HC_WATCH_REVOKED 1u

static inline void hc_watch_reply_pack(hc_watch_reply_t *r, int rank, const hc_rank_where_t *w)
{
    r->magic   = htonl(HC_WATCH_REPLY_MAGIC);
    r->rank    = (int32_t)htonl((uint32_t)rank);
    r->c_desc  = htonl(w->c_desc);
    r->waiting = (int32_t)htonl((uint32_t)w->waiting);
    r->flags   = htonl(w->revoked ? HC_WATCH_REVOKED : 0);
    r->pad     = 0;
    r->seq     = htobe64(w->seq);
    r->ccount  = htobe64(w->ccount);
    r->ended   = htobe64(w->ended);
    r->c_bytes = htobe64(w->c_bytes);
}

/* 0, or -1 when r is not rank's answer. */
static inline int hc_watch_reply_unpack(const hc_watch_reply_t *r, int rank, hc_rank_where_t *w)
{
    if (ntohl(r->magic) != HC_WATCH_REPLY_MAGIC || (int32_t)ntohl((uint32_t)r->rank) != rank)
        return -1;
    w->known   = 1;
    w->c_desc  = ntohl(r->c_desc);
    w->waiting = (int32_t)ntohl((uint32_t)r->waiting);
    w->revoked = (ntohl(r->flags) & HC_WATCH_REVOKED) != 0;
    w->seq     = be64toh(r->seq);
    w->ccount  = be64toh(r->ccount);
    w->ended   = be64toh(r->ended);
    w->c_bytes = be64toh(r->c_bytes);
    return 0;
}

#endif
