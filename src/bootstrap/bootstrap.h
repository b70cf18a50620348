/* bootstrap.h - out-of-band rendezvous used at init: unique ids, the TCP root,
 * and a ring of sockets between the ranks for allgather and barrier. It never
 * carries collective payloads. */
#ifndef HC_BOOTSTRAP_H
#define HC_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"

typedef struct hc_bootstrap hc_bootstrap_t;

/* Layout of hcomm_unique_id_t (fits in HCOMM_UNIQUE_ID_BYTES). */
typedef struct hc_uid {
    uint32_t magic;        /* HC_UID_MAGIC */
    uint32_t version;
    uint8_t  cookie[16];   /* random; every connection presents it */
    uint8_t  root_addr[28]; /* struct sockaddr_in or sockaddr_in6 of the root */
    uint32_t root_addrlen;
    uint32_t flags; /* HC_UID_ROOT_UP */
} hc_uid_t;

#define HC_UID_MAGIC 0x68636d31u /* "hcm1" */
/* The root listened before the id existed (hc_bootstrap_root_start, not an
 * address agreed beforehand): a refused connect means it ended (it serves one
 * init, or its process died), not that it is not up yet. */
#define HC_UID_ROOT_UP 1u

/*
 * Starts a rendezvous root in a detached thread of this process, listening on
 * bind_addr ("ip:port", NULL = choose: HCOMM_SOCKET_IFNAME, else the first
 * non-loopback IPv4 interface that is up, else loopback; port 0 = any), and writes
 * a unique id carrying its address and cookie. The thread serves one
 * communicator, then exits; it gives up after HCOMM_TIMEOUT.
 */
hcomm_status_t hc_bootstrap_root_start(const char *bind_addr, const uint8_t cookie[16],
                                       hcomm_unique_id_t *id);
/* A root of this process that refused a rank refuses every rank, but it lives
 * only as long as the process: one whose own rank returns the refusal and exits
 * would leave the ranks still dialing to wait out their timeout. Waits, at most
 * max_seconds, until every such root has answered each rank of its job;
 * returns at once when none refused anyone. */
void hc_bootstrap_root_settle(double max_seconds);
/* The root of id, if this process runs it and no rank has joined it, ends
 * within a second, quietly: an id the caller will not use (the extra ids of
 * ncclCommInitRankScalable). Any other id: nothing. */
void hc_bootstrap_root_release(const hcomm_unique_id_t *id);
/* The same on lfd, a TCP socket a launcher bound and listens on for this
 * process (hcomm-run: HCOMM_ROOT_FD), so that no other process can take the
 * port between a choice and a bind; it must listen on host_port's port. The
 * root owns lfd once this succeeds. */
hcomm_status_t hc_bootstrap_root_adopt(int lfd, const char *host_port, const uint8_t cookie[16],
                                       hcomm_unique_id_t *id);

/* Fills a unique id for a root at "host:port" with a given cookie (no thread). */
hcomm_status_t hc_bootstrap_id_from_addr(const char *host_port, const uint8_t cookie[16],
                                         hcomm_unique_id_t *id);

/* Checks a unique id from outside (a user's bytes, an ncclUniqueId): magic,
 * version and root address; 0 and the decoded id in *uid (may be NULL), or
 * HCOMM_ERR_INVALID_ARG with one log line. Init checks with it before it
 * connects anywhere (tests/fuzz/fuzz_uid.c feeds it). */
hcomm_status_t hc_bootstrap_id_check(const hcomm_unique_id_t *id, hc_uid_t *uid);

/* Random bytes from getrandom(2). */
hcomm_status_t hc_bootstrap_random(void *buf, size_t len);

/*
 * Joins the rendezvous of id as rank of nranks: connects to the root, learns the
 * successor's address, and builds the ring (rank r connects to r+1, accepts r-1).
 * Every connection is checked against the cookie. Times out after timeout seconds.
 */
hcomm_status_t hc_bootstrap_init(const hcomm_unique_id_t *id, int nranks, int rank,
                                 double timeout, hc_bootstrap_t **bs_p);
void hc_bootstrap_destroy(hc_bootstrap_t *bs);

/* data holds nranks slots of size bytes; slot `rank` is ours; fills the others. */
hcomm_status_t hc_bootstrap_allgather(hc_bootstrap_t *bs, void *data, size_t size);
hcomm_status_t hc_bootstrap_barrier(hc_bootstrap_t *bs);

/* The numeric IP of the local interface this rank reaches the root through:
 * transports listen there. */
const char *hc_bootstrap_local_ip(const hc_bootstrap_t *bs);

/* The cookie of the rendezvous (from the id). */
const uint8_t *hc_bootstrap_cookie(const hc_bootstrap_t *bs);

#endif
