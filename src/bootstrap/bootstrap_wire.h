/* bootstrap_wire.h - the bootstrap's messages on the wire (root hello and
 * reply, ring hello) and the addresses inside them; the sockets that carry
 * them are base/sock.h's. */
#ifndef HC_BOOTSTRAP_WIRE_H
#define HC_BOOTSTRAP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/sock.h"
#include "hcomm.h"

/* Version 2: the cookie no longer crosses the wire (bootstrap_gate.h). */
#define HC_BOOTSTRAP_HELLO_MAGIC 0x68636248u /* "hcbH": rank -> root */
#define HC_BOOTSTRAP_REPLY_MAGIC 0x68636252u /* "hcbR": root -> rank */
#define HC_BOOTSTRAP_RING_MAGIC 0x68636243u  /* "hcbC": rank -> successor */

/* An address on the wire: portable across byte orders. */
typedef struct hc_bootstrap_wire_addr {
    uint8_t  family; /* 4 or 6 */
    uint8_t  pad;
    uint16_t port;     /* network order */
    uint32_t scope_id; /* network order */
    uint8_t  ip[16];
} hc_bootstrap_wire_addr_t;

/* Integers in network order. A hello starts as the gate's do: the magic, then
 * the client's nonce. */
typedef struct hc_bootstrap_hello {
    uint32_t                 magic;
    uint8_t                  nonce[16];
    int32_t                  rank;
    int32_t                  nranks;
    hc_bootstrap_wire_addr_t addr; /* the rank's ring listener */
} hc_bootstrap_hello_t;

typedef struct hc_bootstrap_reply {
    uint32_t                 magic;
    int32_t                  status; /* hcomm_status_t; 0: succ is valid */
    int32_t                  njoined;
    hc_bootstrap_wire_addr_t succ;
} hc_bootstrap_reply_t;

typedef struct hc_bootstrap_ring_hello {
    uint32_t magic;
    uint8_t  nonce[16];
    int32_t  rank;
} hc_bootstrap_ring_hello_t;

/* A bootstrap peer for the log lines of base/sock.h: rank, or -1 for the root. */
static inline hc_sock_peer_t hc_bootstrap_peer(int rank)
{
    hc_sock_peer_t p = {.subsys = HC_SUBSYS(BOOT), .rank = rank, .name = "the root"};
    return p;
}

/* The same peer known to be listening already (a ring successor, whose
 * listener opened before its address went to the root; the root once it
 * answered): a refusal then means it ended, and fails the connect at once. */
static inline hc_sock_peer_t hc_bootstrap_peer_up(int rank)
{
    hc_sock_peer_t p = hc_bootstrap_peer(rank);
    p.listening      = 1;
    return p;
}

/* A socket address in the wire format, and back. */
hcomm_status_t hc_bootstrap_addr_to_wire(const struct sockaddr *sa, hc_bootstrap_wire_addr_t *w);
hcomm_status_t hc_bootstrap_addr_from_wire(const hc_bootstrap_wire_addr_t *w,
                                           struct sockaddr_storage *ss, socklen_t *len);

/* The root's reply to rank of nranks: HCOMM_SUCCESS and the successor's
 * address, or the root's refusal (a status of hcomm.h's list; anything else
 * is HCOMM_ERR_PROTOCOL), logged. */
hcomm_status_t hc_bootstrap_reply_check(const hc_bootstrap_reply_t *rep, int rank, int nranks,
                                        struct sockaddr_storage *succ, socklen_t *succ_len);

#endif
