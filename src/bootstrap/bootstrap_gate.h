/* bootstrap_gate.h - how a bootstrap connection proves itself, and the gate
 * that checks many at once.
 *
 * The hand-shake is a mutual challenge-response keyed by the job's cookie,
 * which never crosses the wire:
 *   client -> server  hello: magic, the client's fresh nonce, then its fields
 *   server -> client  challenge: the server's fresh nonce, and
 *                     MAC("server", hello, server nonce)
 *   client -> server  proof: MAC("client", hello, server nonce)
 * The client checks the server's MAC before it answers, so a listener that
 * squats on the root's port learns nothing it can replay; the roles' labels
 * differ, so neither side's MAC serves as the other's.
 *
 * The gate runs the server side for every pending connection at once, each
 * with a short deadline, in bounded state: when it is full, a new connection
 * displaces the oldest that has not sent a whole hello, else the oldest
 * (whose client, if real, connects again).
 * So strangers, silent or talkative, cost the real ranks nothing but a retry. */
#ifndef HC_BOOTSTRAP_GATE_H
#define HC_BOOTSTRAP_GATE_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "base/auth.h"
#include "base/sock.h"
#include "hcomm.h"

#define HC_GATE_HELLO_MAX 64
#define HC_GATE_MAX_PENDING 128
#define HC_GATE_HELLO_TIMEOUT 2.0           /* seconds a connection has to prove itself */
#define HC_GATE_CHALLENGE_MAGIC 0x68636267u /* "hcbg" */
/* The MACs' labels, one per role (tests/fuzz computes MACs with them). */
#define HC_GATE_LABEL_SERVER "hcomm bootstrap server"
#define HC_GATE_LABEL_CLIENT "hcomm bootstrap client"

typedef struct hc_gate_challenge {
    uint32_t magic; /* network order */
    uint8_t  nonce[HC_AUTH_NONCE_BYTES];
    uint8_t  mac[HC_AUTH_MAC_BYTES];
} hc_gate_challenge_t;

typedef struct hc_gate_proof {
    uint8_t mac[HC_AUTH_MAC_BYTES];
} hc_gate_proof_t;

/* A connection that proved itself: fd is the callee's from here on. */
typedef void (*hc_gate_admit_fn)(void *arg, int fd, const void *hello, const char *peer);

typedef struct hc_gate_conn {
    int                 fd;
    int                 stage; /* 0: reading the hello, 1: reading the proof */
    size_t              got;
    double              deadline;
    uint8_t             hello[HC_GATE_HELLO_MAX];
    hc_gate_challenge_t chal;
    hc_gate_proof_t     proof;
    char                peer[HC_SOCK_ADDRSTRLEN];
} hc_gate_conn_t;

typedef struct hc_gate {
    int              lfd;
    const uint8_t   *key;
    size_t           hello_len; /* hellos start with a magic and the nonce */
    uint32_t         magic;
    const char      *what; /* "bootstrap root 10.0.0.1:1234": for log lines */
    hc_gate_admit_fn admit;
    void            *arg;
    unsigned long    refused, displaced; /* counted, logged once each */
    int              n;
    hc_gate_conn_t   conns[HC_GATE_MAX_PENDING];
} hc_gate_t;

void hc_gate_init(hc_gate_t *g, int lfd, const uint8_t *key, uint32_t magic, size_t hello_len,
                  const char *what, hc_gate_admit_fn admit, void *arg);
/* Fills pfd (room for 1 + HC_GATE_MAX_PENDING) with the listener and the
 * pending connections; lowers *until to the earliest connection deadline.
 * Returns how many it filled. */
int hc_gate_pollfds(const hc_gate_t *g, struct pollfd *pfd, double *until);
/* Acts on what poll found in the pfd that hc_gate_pollfds filled, then drops
 * connections past their deadline. */
void hc_gate_serve(hc_gate_t *g, const struct pollfd *pfd);
/* Closes the pending connections (not the listener), with one summary line. */
void hc_gate_close(hc_gate_t *g);

/* The client's side, one socket. */
typedef struct hc_gate_client {
    int                 fd;
    size_t              got;
    size_t              hello_len;
    uint8_t             hello[HC_GATE_HELLO_MAX];
    hc_gate_challenge_t chal;
} hc_gate_client_t;

/* Fills the nonce after hello's magic and sends the hello on fd. */
hcomm_status_t hc_gate_client_start(hc_gate_client_t *c, int fd, void *hello, size_t len,
                                    double deadline, hc_sock_peer_t peer);
/* Reads what arrived of the challenge (never waits): HCOMM_IN_PROGRESS until it
 * is complete; then checks it and sends the proof: HCOMM_SUCCESS. A server that
 * closed first: HCOMM_ERR_REMOTE (the caller may connect again); a wrong
 * MAC: HCOMM_ERR_AUTH. Logs only the latter. */
hcomm_status_t hc_gate_client_step(hc_gate_client_t *c, const uint8_t *key, double deadline,
                                   hc_sock_peer_t peer);
/* start, then step until done or the deadline (poll in between). */
hcomm_status_t hc_gate_client_run(hc_gate_client_t *c, int fd, const uint8_t *key, void *hello,
                                  size_t len, double deadline, hc_sock_peer_t peer);

#endif
