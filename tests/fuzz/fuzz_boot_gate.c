/* fuzz_boot_gate.c - the server's side of the bootstrap's gate
 * (hc_gate_serve), and behind it the root's admission (hc_bootstrap_roll_admit):
 * up to 8 clients connect to an abstract unix listener that the gate serves,
 * and send what the input says, in any split and order. The first byte picks
 * the gate: the root's (52-byte hellos, admitted into a roll) or the ring's (24).
 * Then one operation per byte, op % 5 what, op / 8 which client:
 *   0 connect a new client     1 write 1 + next % 64 raw bytes
 *   2 write a hello: the right magic, the rest from the input (the root's:
 *     nonce, then rank, rank count and address family from one byte each)
 *   3 read the challenge and answer with the proof the job key makes (op & 4:
 *     with the server's label instead, which must not pass)
 *   4 hang up
 * After each, one round of poll and hc_gate_serve. The gate must answer a
 * whole hello with a challenge that verifies as the server's over it; admit
 * exactly the clients whose bytes after their hello are the right proof, and
 * hang up on a wrong hello or a whole wrong proof at once; and the roll must
 * admit or refuse each as its rules say (after one refusal, every hello), a
 * refusal reaching the client as a reply that hc_bootstrap_reply_check
 * refuses. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bootstrap/bootstrap_gate.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/bootstrap_wire.h"
#include "fuzz.h"

#define MAXC 8
#define STREAM_MAX 128 /* bytes of a client's stream the harness keeps */

static const uint8_t key[HC_AUTH_KEY_BYTES] = "fuzz job secret"; /* 15 + NUL */

typedef struct client {
    int     fd, server_fd; /* server_fd: the gate's end, -1 until known or once gone */
    size_t  sent, heard;   /* bytes written; bytes of the challenge read */
    uint8_t stream[STREAM_MAX];
    uint8_t chal[sizeof(hc_gate_challenge_t)];
    int     admitted;
} client_t;

static int                 lfd = -1;
static struct sockaddr_un  addr;
static socklen_t           addrlen;
static hc_gate_t           gate;
static hc_bootstrap_roll_t roll;
static client_t            cl[MAXC];
static int                 ncl, root;
static size_t              hlen;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX; /* abstract: nothing in the file system */
    int n   = snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "hc-fuzz-gate-%d", getpid());
    addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, addrlen) != 0 || listen(lfd, 64) != 0) {
        perror("fuzz_boot_gate: listener");
        abort();
    }
    return 0;
}

static client_t *by_server_fd(int fd)
{
    for (int i = 0; i < ncl; i++)
        if (cl[i].server_fd == fd)
            return &cl[i];
    return NULL;
}

/* Reads what arrived of c's challenge; 1 once whole. */
static int hear(client_t *c)
{
    while (c->heard < sizeof(c->chal)) {
        ssize_t n = recv(c->fd, c->chal + c->heard, sizeof(c->chal) - c->heard, MSG_DONTWAIT);
        if (n <= 0)
            return 0;
        c->heard += (size_t)n;
    }
    return 1;
}

/* The proof for c's hello and its challenge (which must be the server's). */
static void proof_for(client_t *c, const char *label, uint8_t *mac)
{
    const hc_gate_challenge_t *ch       = (const hc_gate_challenge_t *)c->chal;
    hc_auth_part_t             parts[2] = {{c->stream, hlen}, {ch->nonce, HC_AUTH_NONCE_BYTES}};
    FUZZ_ASSERT(c->sent >= hlen && ntohl(ch->magic) == HC_GATE_CHALLENGE_MAGIC);
    FUZZ_ASSERT(hc_auth_check(key, HC_GATE_LABEL_SERVER, parts, 2, ch->mac));
    FUZZ_ASSERT(hc_auth_mac(key, label, parts, 2, mac) == 0);
}

static int magic_ok(const client_t *c)
{
    uint32_t m;
    memcpy(&m, c->stream, sizeof(m));
    return ntohl(m) == (root ? HC_BOOTSTRAP_HELLO_MAGIC : HC_BOOTSTRAP_RING_MAGIC);
}

/* Whether c's bytes earn admission: its hello, then the right proof. */
static int deserves(client_t *c)
{
    uint8_t mac[HC_AUTH_MAC_BYTES];
    if (c->sent < hlen + sizeof(mac) || !magic_ok(c) || !hear(c))
        return 0;
    proof_for(c, HC_GATE_LABEL_CLIENT, mac);
    return memcmp(c->stream + hlen, mac, sizeof(mac)) == 0;
}

/* What the roll's rules say of hello h, before it is admitted. */
static hcomm_status_t roll_rule(const hc_bootstrap_hello_t *h)
{
    int rank = (int32_t)ntohl((uint32_t)h->rank), nranks = (int32_t)ntohl((uint32_t)h->nranks);
    if (roll.doomed != HCOMM_SUCCESS) /* an earlier refusal refuses every later hello */
        return roll.doomed;
    if (nranks < 1 || nranks > HC_BOOTSTRAP_MAX_RANKS || (roll.nranks > 0 && nranks != roll.nranks))
        return HCOMM_ERR_INVALID_ARG;
    if (rank < 0 || rank >= nranks || (roll.nranks > 0 && roll.rank_fd[rank] >= 0))
        return HCOMM_ERR_INVALID_RANK;
    return h->addr.family == 4 || h->addr.family == 6 ? HCOMM_SUCCESS : HCOMM_ERR_PROTOCOL;
}

static void admit(void *arg, int fd, const void *hello, const char *peer)
{
    (void)arg;
    client_t *c = by_server_fd(fd);
    FUZZ_ASSERT(c != NULL && !c->admitted && deserves(c));
    FUZZ_ASSERT(memcmp(hello, c->stream, hlen) == 0);
    c->admitted = 1;
    if (!root) {
        close(fd);
        return;
    }
    hc_bootstrap_hello_t h;
    memcpy(&h, hello, sizeof(h));
    hcomm_status_t want   = roll_rule(&h);
    int            joined = roll.njoined;
    hc_bootstrap_roll_admit(&roll, fd, hello, peer);
    int rank = (int32_t)ntohl((uint32_t)h.rank);
    if (want == HCOMM_SUCCESS) {
        FUZZ_ASSERT(roll.njoined == joined + 1 && roll.rank_fd[rank] == fd);
        return;
    }
    FUZZ_ASSERT(roll.njoined == joined);
    c->server_fd = -1; /* closed, with a reply */
    hc_bootstrap_reply_t    rep;
    struct sockaddr_storage ss;
    socklen_t               len;
    FUZZ_ASSERT(recv(c->fd, &rep, sizeof(rep), MSG_DONTWAIT) == sizeof(rep));
    FUZZ_ASSERT(hc_bootstrap_reply_check(&rep, 0, 1, &ss, &len) == want);
}

static void serve(void)
{
    struct pollfd pfd[HC_GATE_MAX_PENDING + 1];
    double        until = 1e300;
    FUZZ_ASSERT(gate.n >= 0 && gate.n <= HC_GATE_MAX_PENDING);
    int n = hc_gate_pollfds(&gate, pfd, &until), r;
    while ((r = poll(pfd, (nfds_t)n, 0)) < 0 && errno == EINTR)
        ; /* libFuzzer's timer */
    FUZZ_ASSERT(r >= 0);
    hc_gate_serve(&gate, pfd);
}

static void send_bytes(client_t *c, const uint8_t *p, size_t n)
{
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w <= 0)
        return; /* the gate hung up */
    if (c->sent < STREAM_MAX) {
        size_t keep = STREAM_MAX - c->sent;
        memcpy(c->stream + c->sent, p, (size_t)w < keep ? (size_t)w : keep);
    }
    c->sent += (size_t)w;
}

static void new_client(void)
{
    if (ncl == MAXC)
        return;
    client_t *c = &cl[ncl];
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_ASSERT(c->fd >= 0 && connect(c->fd, (struct sockaddr *)&addr, addrlen) == 0);
    /* a round that only accepts: the newest pending connection is its */
    struct pollfd pfd[HC_GATE_MAX_PENDING + 1];
    double        until = 1e300;
    int           n = hc_gate_pollfds(&gate, pfd, &until), before = gate.n;
    for (int k = 0; k < n; k++)
        pfd[k].revents = 0;
    pfd[0].revents = POLLIN;
    hc_gate_serve(&gate, pfd);
    FUZZ_ASSERT(gate.n == before + 1);
    /* no reachable deadline: an input must not depend on how fast it runs (a
     * starved run once saw earlier connections expire inside this serve);
     * rising, so that the oldest is still displaced first */
    static double later = 1e12;
    gate.conns[gate.n - 1].deadline = later++;
    c->server_fd = gate.conns[gate.n - 1].fd;
    for (int i = 0; i < ncl; i++) /* an fd number the gate closed may come again */
        if (cl[i].server_fd == c->server_fd)
            cl[i].server_fd = -1;
    ncl++;
}

/* A hello with the right magic; the root's fields from a few bytes. */
static void write_hello(client_t *c, const uint8_t **p, const uint8_t *end)
{
    uint8_t  h[HC_GATE_HELLO_MAX] = {0};
    uint32_t m = htonl(root ? HC_BOOTSTRAP_HELLO_MAGIC : HC_BOOTSTRAP_RING_MAGIC);
    memcpy(h, &m, sizeof(m));
    size_t n = (size_t)(end - *p) < hlen - 4 ? (size_t)(end - *p) : hlen - 4;
    memcpy(h + 4, *p, n);
    *p += n;
    if (root) {
        hc_bootstrap_hello_t *b = (hc_bootstrap_hello_t *)h;
        b->rank                 = (int32_t)htonl((uint32_t)(int32_t)(int8_t)h[20]);
        b->nranks               = (int32_t)htonl((uint32_t)(int32_t)(int8_t)h[24]);
        b->addr.family          = h[28] % 8;
    }
    send_bytes(c, h, hlen);
}

static void prove(client_t *c, int wrong_label)
{
    uint8_t mac[HC_AUTH_MAC_BYTES];
    if (c->sent != hlen || !hear(c))
        return;
    proof_for(c, wrong_label ? HC_GATE_LABEL_SERVER : HC_GATE_LABEL_CLIENT, mac);
    send_bytes(c, mac, sizeof(mac));
}

/* Whether the gate closed c's connection (after its challenge, if any): an
 * end of stream, or a reset when it left bytes of ours unread. */
static int hung_up(client_t *c)
{
    uint8_t b;
    (void)hear(c);
    ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void hang_up(int i)
{
    close(cl[i].fd);
    cl[i] = cl[--ncl];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    root = data[0] & 1;
    hlen = root ? sizeof(hc_bootstrap_hello_t) : sizeof(hc_bootstrap_ring_hello_t);
    hc_gate_init(&gate, lfd, key, root ? HC_BOOTSTRAP_HELLO_MAGIC : HC_BOOTSTRAP_RING_MAGIC, hlen,
                 "fuzz gate", admit, NULL);
    memset(&roll, 0, sizeof(roll));
    ncl              = 0;
    const uint8_t *p = data + 1, *end = data + size;
    while (p < end) {
        int op = *p++, what = op % 5;
        if (what == 0 || ncl == 0) {
            new_client();
            continue;
        }
        int i = (op / 8) % ncl;
        if (what == 1 && p < end) {
            size_t n = 1 + *p++ % 64;
            n        = n < (size_t)(end - p) ? n : (size_t)(end - p);
            send_bytes(&cl[i], p, n);
            p += n;
        } else if (what == 2) {
            write_hello(&cl[i], &p, end);
        } else if (what == 3) {
            prove(&cl[i], op & 4);
        } else if (what == 4) {
            hang_up(i);
        }
        serve();
        /* a whole hello is answered at once, with the server's challenge */
        for (int k = 0; k < ncl; k++)
            if (cl[k].sent >= hlen && cl[k].server_fd >= 0 && magic_ok(&cl[k]) && hear(&cl[k])) {
                uint8_t mac[HC_AUTH_MAC_BYTES];
                proof_for(&cl[k], HC_GATE_LABEL_CLIENT, mac);
            }
    }
    /* one read per connection per round: two more, and all that was sent is read */
    serve();
    serve();
    for (int k = 0; k < ncl; k++) {
        client_t *c = &cl[k];
        int       d = deserves(c);
        FUZZ_ASSERT(c->admitted == d); /* nobody who earned admission was left out */
        /* a wrong hello or a whole wrong proof: the gate hung up at once */
        if (!d && c->sent >= hlen && (!magic_ok(c) || c->sent >= hlen + HC_AUTH_MAC_BYTES))
            FUZZ_ASSERT(hung_up(c));
    }
    hc_gate_close(&gate);
    hc_bootstrap_roll_free(&roll);
    while (ncl > 0)
        hang_up(ncl - 1);
    return 0;
}
