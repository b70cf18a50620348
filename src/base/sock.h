/* sock.h - TCP sockets as the bootstrap and the tcp transport use them:
 * addresses and interfaces, listeners, connects that retry while the peer is
 * not listening yet, and I/O bounded by a deadline. Sockets are non-blocking
 * and close-on-exec; waits go through poll(). Deadlines are absolute
 * hc_clock_now() seconds. A failure is logged once, here, as its caller's
 * subsystem and naming the peer. */
#ifndef HC_BASE_SOCK_H
#define HC_BASE_SOCK_H

#include <stddef.h>
#include <sys/socket.h>

#include "hcomm.h"

#define HC_SOCK_ADDRSTRLEN 64 /* "[v6%scope]:port" */

/* Whom a socket talks to, for the log line of a failure. */
typedef struct hc_sock_peer {
    unsigned    subsys; /* HC_SUBSYS(BOOT), HC_SUBSYS(NET): whose line it is */
    int         rank;   /* the peer's rank, or -1 */
    const char *name;   /* the peer when rank is -1 ("the root") */
    /* hc_sock_connect: the peer listened before anyone learned its address
     * (a transport's listener, opened at init), so a refusal means it closed
     * the listener (it failed, was destroyed or died): HCOMM_ERR_REMOTE at
     * once. 0: a refusal is retried (a root or ring peer not up yet). */
    int listening;
    /* 1: the caller handles a connection the peer closes (connects again),
     * or a listening peer's refusal, so these log at debug, not as errors */
    int quiet_close;
} hc_sock_peer_t;

/* The status an errno means (ECONNRESET: the peer, ETIMEDOUT: a timeout...). */
hcomm_status_t hc_sock_status(int err);

/* "ip:port", "[v6]:port" or "name:port" to a socket address (IPv4 preferred);
 * an empty host is the wildcard. Logs as subsys. */
hcomm_status_t hc_sock_parse_addr(const char *host_port, unsigned subsys,
                                  struct sockaddr_storage *ss, socklen_t *len);
/* "ip:port" or "[v6]:port"; "?" when sa is not AF_INET/AF_INET6. */
void hc_sock_addr_str(const struct sockaddr *sa, char *buf, size_t size);
/* The numeric IP of sa, without the port. */
void hc_sock_ip_str(const struct sockaddr *sa, char *buf, size_t size);
/* The address (port 0) of the interface that spec selects: a comma list of
 * name prefixes (= exact names), ^ excludes them; NULL or "" = the first
 * non-loopback interface that is up, else loopback. Interfaces with carrier
 * first; without a list of names, IPoIB (ib*) first and container or VM
 * bridges (docker*, virbr*) last. IPv4 preferred. */
hcomm_status_t hc_sock_if_addr(const char *spec, unsigned subsys, struct sockaddr_storage *ss,
                               socklen_t *len);
/* hc_sock_if_addr's choice among ifs (getifaddrs' list), or NULL. */
struct ifaddrs;
const struct ifaddrs *hc_sock_if_pick(const struct ifaddrs *ifs, const char *spec);

/* TCP_NODELAY, and send and receive buffers of sockbuf bytes unless 0; best
 * effort: only speed depends on them. */
void hc_sock_tune(int fd, int sockbuf);

/* Binds (SO_REUSEADDR) and listens, the socket tuned with sockbuf (accepted
 * sockets inherit it); *bound gets the address with its port. */
hcomm_status_t hc_sock_listen(const struct sockaddr *sa, socklen_t len, int sockbuf,
                              unsigned subsys, int *fd_p, struct sockaddr_storage *bound,
                              socklen_t *bound_len);
/* Connects a socket tuned with sockbuf, retrying with a growing pause while
 * the peer refuses (not listening yet; unless peer.listening) or the attempt
 * times out, until the deadline. */
hcomm_status_t hc_sock_connect(const struct sockaddr *sa, socklen_t len, int sockbuf,
                               double deadline, hc_sock_peer_t peer, int *fd_p);
/* One attempt that does not wait (a socket tuned with sockbuf, to a peer
 * that listens: no retry): HCOMM_SUCCESS when connected at once,
 * HCOMM_IN_PROGRESS while the handshake goes on (poll *fd_p for POLLOUT, then
 * hc_sock_connect_end), else the failure, logged (at debug with
 * peer.quiet_close; a refusal is HCOMM_ERR_REMOTE). *fd_p is set on the first
 * two; the caller closes it. Many at once share one deadline this way: a peer
 * whose host drops the SYNs holds up no other. */
hcomm_status_t hc_sock_connect_start(const struct sockaddr *sa, socklen_t len, int sockbuf,
                                     hc_sock_peer_t peer, int *fd_p);
/* The outcome of a connect in progress once poll found its fd ready (POLLOUT,
 * POLLERR or POLLHUP): HCOMM_SUCCESS, or the failure as above (fd left open). */
hcomm_status_t hc_sock_connect_end(int fd, hc_sock_peer_t peer);
/* Accepts one connection before the deadline (TCP_NODELAY set). */
hcomm_status_t hc_sock_accept(int lfd, double deadline, hc_sock_peer_t peer, int *fd_p,
                              struct sockaddr_storage *peer_addr);

hcomm_status_t hc_sock_send_all(int fd, const void *buf, size_t len, double deadline,
                                hc_sock_peer_t peer);
hcomm_status_t hc_sock_recv_all(int fd, void *buf, size_t len, double deadline,
                                hc_sock_peer_t peer);

/* Sends sbuf on sfd while receiving rbuf on rfd, both of len bytes; fails when
 * neither side moves for timeout seconds. more: sfd (not rfd) carries nothing
 * back and its peer needs more than this from us, so its close is a failure:
 * HCOMM_ERR_REMOTE at once. */
hcomm_status_t hc_sock_exchange(int sfd, const void *sbuf, hc_sock_peer_t speer, int rfd,
                                void *rbuf, hc_sock_peer_t rpeer, size_t len, double timeout,
                                int more);

#endif
