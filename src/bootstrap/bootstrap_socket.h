/* bootstrap_socket.h - socket helpers and wire messages of the bootstrap.
 * Every wait takes an absolute deadline (hc_clock_now() seconds); failures
 * are logged once here, with the peer rank (-1: the root or an unknown peer). */
#ifndef HC_BOOTSTRAP_SOCKET_H
#define HC_BOOTSTRAP_SOCKET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "hcomm.h"

#define HC_BOOTSTRAP_HELLO_MAGIC 0x68636268u /* "hcbh": rank -> root */
#define HC_BOOTSTRAP_REPLY_MAGIC 0x68636272u /* "hcbr": root -> rank */
#define HC_BOOTSTRAP_RING_MAGIC 0x68636263u  /* "hcbc": rank -> successor */
#define HC_BOOTSTRAP_ADDRSTRLEN 64           /* "[v6%scope]:port" */

/* An address on the wire: portable across byte orders. */
typedef struct hc_bootstrap_wire_addr {
    uint8_t  family; /* 4 or 6 */
    uint8_t  pad;
    uint16_t port;     /* network order */
    uint32_t scope_id; /* network order */
    uint8_t  ip[16];
} hc_bootstrap_wire_addr_t;

/* Integers in network order. */
typedef struct hc_bootstrap_hello {
    uint32_t                 magic;
    uint8_t                  cookie[16];
    int32_t                  rank;
    int32_t                  nranks;
    hc_bootstrap_wire_addr_t addr; /* the rank's ring listener */
} hc_bootstrap_hello_t;

typedef struct hc_bootstrap_reply {
    uint32_t                 magic;
    int32_t                  status; /* hcomm_status_t; 0: succ is valid */
    int32_t                  njoined;
    uint8_t                  cookie[16]; /* zero unless the hello was accepted */
    hc_bootstrap_wire_addr_t succ;
} hc_bootstrap_reply_t;

typedef struct hc_bootstrap_ring_hello {
    uint32_t magic;
    uint8_t  cookie[16];
    int32_t  rank;
} hc_bootstrap_ring_hello_t;


/* Non-zero when the 16-byte cookies match (constant time). */
int hc_bootstrap_cookie_eq(const uint8_t *a, const uint8_t *b);

/* "ip:port", "[v6]:port" or "name:port" to a socket address (IPv4 preferred). */
hcomm_status_t hc_bootstrap_parse_addr(const char *host_port, struct sockaddr_storage *ss,
                                       socklen_t *len);
/* "ip:port" or "[v6]:port"; "?" when sa is not AF_INET/AF_INET6. */
void hc_bootstrap_addr_str(const struct sockaddr *sa, char *buf, size_t size);
/* The numeric IP of sa, without the port. */
void hc_bootstrap_ip_str(const struct sockaddr *sa, char *buf, size_t size);

hcomm_status_t hc_bootstrap_addr_to_wire(const struct sockaddr *sa, hc_bootstrap_wire_addr_t *w);
hcomm_status_t hc_bootstrap_addr_from_wire(const hc_bootstrap_wire_addr_t *w,
                                           struct sockaddr_storage *ss, socklen_t *len);

/* The address (port 0) of the interface that spec selects: comma list of
 * name prefixes, a leading ^ excludes them; NULL or "" = the first
 * non-loopback interface that is up, else loopback. IPv4 preferred. */
hcomm_status_t hc_bootstrap_if_addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len);

/* Binds (SO_REUSEADDR) and listens; *bound gets the address with its port. */
hcomm_status_t hc_bootstrap_listen(const struct sockaddr *sa, socklen_t len, int *fd_p,
                                   struct sockaddr_storage *bound, socklen_t *bound_len);

/* Connects, retrying while the peer refuses, until the deadline. */
hcomm_status_t hc_bootstrap_connect(const struct sockaddr *sa, socklen_t len, double deadline,
                                    int peer, int *fd_p);

/* Accepts one connection (non-blocking, close-on-exec) before the deadline;
 * peer is the rank expected, for the log. */
hcomm_status_t hc_bootstrap_accept(int lfd, double deadline, int peer, int *fd_p,
                                   struct sockaddr_storage *peer_addr);

hcomm_status_t hc_bootstrap_send_all(int fd, const void *buf, size_t len, double deadline,
                                     int peer);
hcomm_status_t hc_bootstrap_recv_all(int fd, void *buf, size_t len, double deadline, int peer);

/* Sends sbuf on sfd while receiving rbuf on rfd, both of len bytes; fails when
 * neither side moves for timeout seconds. */
hcomm_status_t hc_bootstrap_exchange(int sfd, const void *sbuf, int speer, int rfd, void *rbuf,
                                     int rpeer, size_t len, double timeout);

#endif
