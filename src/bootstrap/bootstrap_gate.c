/* bootstrap_gate.c - the bootstrap's challenge-response, both sides; the
 * server's side for many pending connections at once (bootstrap_gate.h). */
#include "bootstrap/bootstrap_gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"

static int gate_mac(const uint8_t *key, const char *label, const void *hello, size_t len,
                    const uint8_t *nonce, uint8_t *mac)
{
    hc_auth_part_t parts[2] = {{hello, len}, {nonce, HC_AUTH_NONCE_BYTES}};
    return hc_auth_mac(key, label, parts, 2, mac);
}

static int gate_check(const uint8_t *key, const char *label, const void *hello, size_t len,
                      const uint8_t *nonce, const uint8_t *mac)
{
    hc_auth_part_t parts[2] = {{hello, len}, {nonce, HC_AUTH_NONCE_BYTES}};
    return hc_auth_check(key, label, parts, 2, mac);
}

void hc_gate_init(hc_gate_t *g, int lfd, const uint8_t *key, uint32_t magic, size_t hello_len,
                  const char *what, hc_gate_admit_fn admit, void *arg)
{
    memset(g, 0, sizeof(*g));
    g->lfd       = lfd;
    g->key       = key;
    g->magic     = magic;
    g->hello_len = hello_len;
    g->what      = what;
    g->admit     = admit;
    g->arg       = arg;
}

/* The first refusal is a warning naming the peer; the rest are counted and
 * summed up at close, so a flood of strangers cannot flood the log. */
static void gate_refuse(hc_gate_t *g, int i, const char *why)
{
    hc_gate_conn_t *c = &g->conns[i];
    if (g->refused++ == 0)
        hc_warn(BOOT, "%s: refused a connection from %s: %s", g->what, c->peer, why);
    else
        hc_debug(BOOT, "%s: refused a connection from %s: %s", g->what, c->peer, why);
    close(c->fd);
    g->conns[i] = g->conns[--g->n];
}

/* A complete hello: answer with our nonce and MAC. */
static void gate_challenge(hc_gate_t *g, int i)
{
    hc_gate_conn_t *c = &g->conns[i];
    uint32_t        magic;
    memcpy(&magic, c->hello, sizeof(magic));
    if (ntohl(magic) != g->magic) {
        gate_refuse(g, i, "not an hcomm hello");
        return;
    }
    c->chal.magic = htonl(HC_GATE_CHALLENGE_MAGIC);
    if (hc_auth_random(c->chal.nonce, sizeof(c->chal.nonce)) != 0 ||
        gate_mac(g->key, HC_GATE_LABEL_SERVER, c->hello, g->hello_len, c->chal.nonce,
                 c->chal.mac) != 0) {
        gate_refuse(g, i, "no challenge could be made");
        return;
    }
    /* A fresh socket's buffer takes 52 bytes; one that does not is no client. */
    ssize_t n = send(c->fd, &c->chal, sizeof(c->chal), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != (ssize_t)sizeof(c->chal)) {
        gate_refuse(g, i, "the challenge could not be sent");
        return;
    }
    c->stage = 1;
    c->got   = 0;
}

/* Reads what connection i sent; moves it on when a message is complete. */
static void gate_read(hc_gate_t *g, int i)
{
    hc_gate_conn_t *c    = &g->conns[i];
    uint8_t        *to   = c->stage == 0 ? c->hello : c->proof.mac;
    size_t          want = c->stage == 0 ? g->hello_len : sizeof(c->proof);
    ssize_t         n    = recv(c->fd, to + c->got, want - c->got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        gate_refuse(g, i, n == 0 ? "closed before it proved itself" : strerror(errno));
        return;
    }
    c->got += (size_t)n;
    if (c->got < want)
        return;
    if (c->stage == 0) {
        gate_challenge(g, i);
        return;
    }
    if (!gate_check(g->key, HC_GATE_LABEL_CLIENT, c->hello, g->hello_len, c->chal.nonce,
                    c->proof.mac)) {
        gate_refuse(g, i, "wrong proof of the job secret");
        return;
    }
    hc_gate_conn_t ok = *c;
    g->conns[i]       = g->conns[--g->n];
    g->admit(g->arg, ok.fd, ok.hello, ok.peer);
}

/* Makes room for one more: the oldest connection that has not said a whole
 * hello goes, else the oldest. A real client sends its hello at once and its
 * proof as soon as the challenge comes, so a flood of silent connections
 * displaces each other, not it (stranger test: a rank displaced after its
 * proof saw its root connection close and failed init). */
static void gate_displace(hc_gate_t *g)
{
    int old = 0;
    for (int i = 1; i < g->n; i++) {
        const hc_gate_conn_t *c = &g->conns[i], *o = &g->conns[old];
        if (c->stage < o->stage || (c->stage == o->stage && c->deadline < o->deadline))
            old = i;
    }
    if (g->displaced++ == 0)
        hc_warn(BOOT, "%s: %d connections pending: the oldest make room for new ones", g->what,
                g->n);
    close(g->conns[old].fd);
    g->conns[old] = g->conns[--g->n];
}

static void gate_accept(hc_gate_t *g)
{
    for (int k = 0; k < HC_GATE_MAX_PENDING; k++) { /* bounded: others get their turn */
        struct sockaddr_storage ss;
        socklen_t               len = sizeof(ss);
        int fd = accept4(g->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                /* Out of fds: a pending stranger's goes, the next accept may succeed. */
                if (g->n > 0) {
                    gate_displace(g);
                    continue;
                }
                hc_warn(BOOT, "%s: accept: %s", g->what, strerror(errno));
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                       errno != ECONNABORTED) {
                hc_warn(BOOT, "%s: accept: %s", g->what, strerror(errno));
            }
            return;
        }
        if (g->n == HC_GATE_MAX_PENDING)
            gate_displace(g);
        hc_gate_conn_t *c = &g->conns[g->n++];
        memset(c, 0, sizeof(*c));
        c->fd       = fd;
        c->deadline = hc_clock_now() + HC_GATE_HELLO_TIMEOUT;
        hc_sock_tune(fd, 0);
        hc_sock_addr_str((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
        /* A real client's hello is usually here already. */
        gate_read(g, g->n - 1);
    }
}

int hc_gate_pollfds(const hc_gate_t *g, struct pollfd *pfd, double *until)
{
    pfd[0] = (struct pollfd){.fd = g->lfd, .events = POLLIN};
    for (int i = 0; i < g->n; i++) {
        pfd[i + 1] = (struct pollfd){.fd = g->conns[i].fd, .events = POLLIN};
        if (g->conns[i].deadline < *until)
            *until = g->conns[i].deadline;
    }
    return g->n + 1;
}

void hc_gate_serve(hc_gate_t *g, const struct pollfd *pfd)
{
    int n = g->n;
    /* Backwards: dropping i moves the last one, already handled, into i. */
    for (int i = n - 1; i >= 0; i--)
        if (pfd[i + 1].revents != 0 && g->conns[i].fd == pfd[i + 1].fd)
            gate_read(g, i);
    double now = hc_clock_now();
    for (int i = g->n - 1; i >= 0; i--)
        if (g->conns[i].deadline <= now)
            gate_refuse(g, i, "did not prove itself in time");
    if (pfd[0].revents & POLLIN)
        gate_accept(g);
}

void hc_gate_close(hc_gate_t *g)
{
    for (int i = 0; i < g->n; i++)
        close(g->conns[i].fd);
    g->n = 0;
    if (g->refused > 1 || g->displaced > 1)
        hc_info(BOOT, "%s: refused %lu connections, displaced %lu pending ones", g->what,
                g->refused, g->displaced);
}

hcomm_status_t hc_gate_client_start(hc_gate_client_t *c, int fd, void *hello, size_t len,
                                    double deadline, hc_sock_peer_t peer)
{
    memset(c, 0, sizeof(*c));
    if (len > sizeof(c->hello) || len < 4 + HC_AUTH_NONCE_BYTES)
        return HCOMM_ERR_INVALID_ARG;
    if (hc_auth_random((uint8_t *)hello + 4, HC_AUTH_NONCE_BYTES) != 0)
        return HCOMM_ERR_SYSTEM;
    memcpy(c->hello, hello, len);
    c->hello_len = len;
    c->fd        = fd;
    return hc_sock_send_all(fd, hello, len, deadline, peer);
}

hcomm_status_t hc_gate_client_step(hc_gate_client_t *c, const uint8_t *key, double deadline,
                                   hc_sock_peer_t peer)
{
    ssize_t n = recv(c->fd, (uint8_t *)&c->chal + c->got, sizeof(c->chal) - c->got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return HCOMM_IN_PROGRESS;
    if (n <= 0)
        return HCOMM_ERR_REMOTE;
    c->got += (size_t)n;
    if (c->got < sizeof(c->chal))
        return HCOMM_IN_PROGRESS;
    if (ntohl(c->chal.magic) != HC_GATE_CHALLENGE_MAGIC ||
        !gate_check(key, HC_GATE_LABEL_SERVER, c->hello, c->hello_len, c->chal.nonce,
                    c->chal.mac)) {
        if (peer.rank < 0)
            hc_log_as(HC_LOG_ERROR, peer.subsys,
                      "%s does not know the job secret (wrong challenge): not answered", peer.name);
        else
            hc_log_as(HC_LOG_ERROR, peer.subsys,
                      "rank %d does not know the job secret (wrong challenge): not answered",
                      peer.rank);
        return HCOMM_ERR_AUTH;
    }
    hc_gate_proof_t proof;
    if (gate_mac(key, HC_GATE_LABEL_CLIENT, c->hello, c->hello_len, c->chal.nonce, proof.mac) != 0)
        return HCOMM_ERR_SYSTEM;
    return hc_sock_send_all(c->fd, &proof, sizeof(proof), deadline, peer);
}

hcomm_status_t hc_gate_client_run(hc_gate_client_t *c, int fd, const uint8_t *key, void *hello,
                                  size_t len, double deadline, hc_sock_peer_t peer)
{
    hcomm_status_t st = hc_gate_client_start(c, fd, hello, len, deadline, peer);
    if (st != HCOMM_SUCCESS)
        return st;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        double        ms  = (deadline - hc_clock_now()) * 1000.0;
        if (ms <= 0)
            return HCOMM_ERR_TIMEOUT;
        if (poll(&pfd, 1, ms > 1000 ? 1000 : (int)ms + 1) < 0 && errno != EINTR)
            return HCOMM_ERR_SYSTEM;
        st = hc_gate_client_step(c, key, deadline, peer);
        if (st != HCOMM_IN_PROGRESS)
            return st;
    }
}
