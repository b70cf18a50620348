/* watch_query.c - the asking side of watch.h: many ranks at once, bounded by
 * one deadline; where every rank is, and the verdict when an operation times
 * out; every rank's arrivals, for rank 0's slow-rank test (core/health.h). */
#include "core/watch.h"
#include "core/watch_wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "core/ops.h"

#define QUERY_WINDOW 64 /* queries in flight at once: the fd budget of a big job */

enum { Q_CONNECT = -1, Q_CHALLENGE, Q_ANSWER }; /* what a query waits for */

typedef struct query {
    int              rank, fd, stage;
    int              left; /* 1: refused (its listener closed), 2: hung up unanswered */
    size_t           got, want;
    double           t_proof; /* when the proof left: the answer comes after it */
    hc_gate_client_t cl;
    uint8_t          buf[HC_WATCH_ANSWER_MAX];
} query_t;

static hc_sock_peer_t query_peer(int rank)
{
    hc_sock_peer_t p = {.subsys = HC_SUBSYS(COLL), .rank = rank, .listening = 1, .quiet_close = 1};
    return p;
}

/* How many bytes the answer to kind has, from what arrived (got bytes). */
static size_t answer_len(hcomm_comm_t c, int kind, const uint8_t *buf, size_t got)
{
    hc_watch_arrivals_t h;
    if (kind == HC_WATCH_SHRINK)
        return hc_watch_shrink_answer_len(c->nranks);
    if (kind != HC_WATCH_ARRIVALS)
        return sizeof(hc_watch_reply_t);
    if (got < sizeof(h))
        return sizeof(h);
    memcpy(&h, buf, sizeof(h));
    size_t len = hc_watch_arrivals_len(ntohl(h.n), ntohl(h.nlinks));
    return len > 0 ? len : sizeof(h); /* too large: the header alone, refused as it is read */
}

/* Sends the hello on a connected socket: 0, or -1. */
static int query_hello(hcomm_comm_t c, query_t *q, int kind, double deadline)
{
    hc_watch_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic  = htonl(HC_WATCH_HELLO_MAGIC);
    h.rank   = (int32_t)htonl((uint32_t)c->rank);
    h.kind   = htonl((uint32_t)kind);
    q->stage = Q_CHALLENGE;
    hcomm_status_t st =
        hc_gate_client_start(&q->cl, q->fd, &h, sizeof(h), deadline, query_peer(q->rank));
    return st == HCOMM_SUCCESS ? 0 : -1;
}

/* Starts connecting, without waiting for it (a host that drops the SYNs must
 * not hold up the others), and sends the hello if connected at once: 0; -2
 * when that rank's communicator is gone (refused), -1 when it cannot be asked. */
static int query_start(hcomm_comm_t c, query_t *q, int rank, int kind, double deadline)
{
    const hc_bootstrap_wire_addr_t *a = &c->watch->addrs[rank];
    struct sockaddr_storage         ss;
    socklen_t                       len;
    q->rank = rank, q->fd = -1, q->stage = Q_CONNECT, q->left = 0, q->got = 0;
    q->want = answer_len(c, kind, NULL, 0);
    if (a->family == 0 || hc_bootstrap_addr_from_wire(a, &ss, &len) != HCOMM_SUCCESS)
        return -1; /* that rank does not watch (HCOMM_WATCH=0) */
    hcomm_status_t st =
        hc_sock_connect_start((struct sockaddr *)&ss, len, 0, query_peer(rank), &q->fd);
    if (st == HCOMM_IN_PROGRESS)
        return 0;
    if (st != HCOMM_SUCCESS) /* refused: its listener closed with its communicator */
        return st == HCOMM_ERR_REMOTE ? -2 : -1;
    if (query_hello(c, q, kind, deadline) != 0) {
        close(q->fd);
        return -1;
    }
    return 0;
}

/* Acts on what poll found: 1 while the query goes on, 0 once it ended (the
 * answer handed to fn when whole). */
static int query_step(hcomm_comm_t c, query_t *q, int kind, double deadline, hc_watch_answer_fn fn,
                      void *arg)
{
    if (q->stage == Q_CONNECT) {
        hcomm_status_t st = hc_sock_connect_end(q->fd, query_peer(q->rank));
        q->left           = st == HCOMM_ERR_REMOTE;
        return st == HCOMM_SUCCESS && query_hello(c, q, kind, deadline) == 0;
    }
    if (q->stage == Q_CHALLENGE) {
        hcomm_status_t st = hc_gate_client_step(&q->cl, c->cookie, deadline, query_peer(q->rank));
        if (st == HCOMM_IN_PROGRESS)
            return 1;
        q->left = st == HCOMM_ERR_REMOTE ? 2 : 0;
        if (st != HCOMM_SUCCESS)
            return 0;
        q->stage   = Q_ANSWER;
        q->t_proof = hc_clock_now();
    }
    for (;;) {
        ssize_t n = recv(q->fd, q->buf + q->got, q->want - q->got, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 1;
        if (n <= 0) { /* hung up: its communicator went as it was asked */
            q->left = 2;
            return 0;
        }
        q->got += (size_t)n;
        size_t want = answer_len(c, kind, q->buf, q->got);
        if (q->got < want) {
            q->want = want;
            continue;
        }
        fn(arg, q->rank, q->buf, q->got, q->t_proof, hc_clock_now());
        return 0;
    }
}

/* Starts queries in the free slots of q, up to QUERY_WINDOW, from rank *next
 * on; returns how many are in flight. */
static int query_fill(hcomm_comm_t c, query_t *q, int n, int *next, int kind,
                      const unsigned char *skip, double deadline, unsigned char *left)
{
    for (; n < QUERY_WINDOW && *next < c->nranks; (*next)++) {
        int r  = *next;
        int rc = r != c->rank && !(skip && skip[r]) ? query_start(c, &q[n], r, kind, deadline) : -1;
        n += rc == 0;
        if (left != NULL)
            left[r] = rc == -2;
    }
    return n;
}

void hc_watch_ask(hcomm_comm_t c, int kind, const unsigned char *skip, double seconds,
                  hc_watch_answer_fn fn, void *arg, unsigned char *left)
{
    double        deadline = hc_clock_now() + seconds;
    struct pollfd pfd[QUERY_WINDOW];
    int           n = 0, next = 0;
    if (c->watch == NULL || c->watch->addrs == NULL)
        return;
    query_t *q = malloc(QUERY_WINDOW * sizeof(*q));
    if (q == NULL)
        return;
    /* every query moves as its own socket does: one that does not answer
     * holds only its slot, each slot freed goes to the next rank */
    while ((n = query_fill(c, q, n, &next, kind, skip, deadline, left)) > 0) {
        int ms = hc_clock_ms_left(deadline);
        if (ms < 0)
            break;
        for (int i = 0; i < n; i++)
            pfd[i] = (struct pollfd){.fd     = q[i].fd,
                                     .events = q[i].stage == Q_CONNECT ? POLLOUT : POLLIN};
        if (poll(pfd, (nfds_t)n, ms) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++)
            if (pfd[i].revents != 0 && query_step(c, &q[i], kind, deadline, fn, arg) == 0) {
                if (left != NULL && q[i].left)
                    left[q[i].rank] = (unsigned char)q[i].left;
                close(q[i].fd);
                q[i] = q[--n], pfd[i] = pfd[n];
                i--;
            }
    }
    for (int i = 0; i < n; i++) {    /* no answer in time: stopped, hung, or its host gone */
        if (q[i].stage == Q_CONNECT) /* debug: the health round asks every second */
            hc_debug(COLL, "watch: connect to rank %d: not answered in %g s", q[i].rank, seconds);
        close(q[i].fd);
    }
    free(q);
}

static void where_answer(void *arg, int rank, const void *buf, size_t len, double t0, double t1)
{
    hc_rank_where_t *where = arg;
    hc_watch_reply_t rep;
    (void)len, (void)t0, (void)t1;
    memcpy(&rep, buf, sizeof(rep)); /* buf has no alignment to speak of */
    if (hc_watch_reply_unpack(&rep, rank, &where[rank]) != 0)
        hc_warn(COLL, "watch: rank %d's answer is malformed; treated as none", rank);
}

static void revoke_answer(void *arg, int rank, const void *buf, size_t len, double t0, double t1)
{
    (void)buf, (void)len, (void)t0, (void)t1;
    ((unsigned char *)arg)[rank] = 1;
}

void hc_watch_revoke(hcomm_comm_t c)
{
    unsigned char *told = calloc((size_t)c->nranks, 1), *left = calloc((size_t)c->nranks, 1);
    if (c->watch == NULL || told == NULL || left == NULL) {
        hc_warn(COLL, "hcomm_comm_revoke: %s: the other ranks are not told",
                c->watch == NULL ? "HCOMM_WATCH=0" : "out of memory");
        free(told), free(left);
        return;
    }
    told[c->rank] = 1;
    hc_watch_ask(c, HC_WATCH_REVOKE, NULL, hc_params_get()->watch_timeout, revoke_answer, told,
                 left);
    int n = 0;
    for (int r = 0; r < c->nranks; r++)
        n += !told[r] && !left[r];
    if (n > 0)
        hc_warn(COLL, "hcomm_comm_revoke: %d ranks did not confirm in %g s (stopped or dead)", n,
                hc_params_get()->watch_timeout);
    free(told), free(left);
}

static void ignore_answer(void *arg, int rank, const void *buf, size_t len, double t0, double t1)
{
    (void)arg, (void)rank, (void)buf, (void)len, (void)t0, (void)t1;
}

int hc_watch_left(hcomm_comm_t c, int rank, double seconds)
{
    if (c->watch == NULL || rank < 0 || rank >= c->nranks)
        return 0;
    unsigned char *skip = malloc((size_t)c->nranks), *left = calloc((size_t)c->nranks, 1);
    int            gone = 0;
    if (skip != NULL && left != NULL) {
        memset(skip, 1, (size_t)c->nranks);
        skip[rank] = 0;
        hc_watch_ask(c, HC_WATCH_WHERE, skip, seconds, ignore_answer, NULL, left);
        gone = left[rank] == 1; /* refused; a hang-up may be a full or slow gate */
    }
    free(skip), free(left);
    return gone;
}

void hc_watch_gather(hcomm_comm_t c, hc_rank_where_t *where, double seconds)
{
    unsigned char *left = calloc((size_t)c->nranks, 1);
    memset(where, 0, (size_t)c->nranks * sizeof(*where));
    hc_watch_read(c, &where[c->rank]);
    hc_watch_ask(c, HC_WATCH_WHERE, NULL, seconds, where_answer, where, left);
    for (int r = 0; left != NULL && r < c->nranks; r++)
        where[r].left = left[r];
    free(left);
}

hcomm_status_t hc_watch_verdict(hcomm_comm_t c, hcomm_request_t req, hcomm_status_t status)
{
    const char *what = status == HCOMM_ERR_TIMEOUT ? "stuck" : "failed";
    hc_op_rec_t r;
    char        line[1024];
    hc_ops_rec(req, &r);
    if (c->watch == NULL) {
        hc_warn(COLL,
                "%s: %s #%llu: HCOMM_WATCH=0, so the other ranks were not asked where they are",
                what, hc_ops_coll_name(&r), (unsigned long long)r.seq);
        return status;
    }
    hc_rank_where_t *where = calloc((size_t)c->nranks, sizeof(*where));
    const char     **hosts = calloc((size_t)c->nranks, sizeof(*hosts));
    if (where == NULL || hosts == NULL) {
        free(where), free(hosts);
        return status;
    }
    double t0 = hc_clock_now();
    hc_watch_gather(c, where, hc_params_get()->watch_timeout);
    /* not a failure: the revoke reached others first, or reached this rank's
     * watch thread while it asked (a revoker leaves once all have confirmed,
     * so a peer that left may have been the revoker) */
    int revoked = __atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE);
    for (int i = 0; i < c->nranks; i++)
        revoked |= where[i].revoked;
    if (revoked) {
        __atomic_store_n(&c->revoked, 1, __ATOMIC_RELAXED);
        free(where), free(hosts);
        return HCOMM_ERR_REVOKED;
    }
    for (int i = 0; i < c->nranks; i++)
        hosts[i] = c->peers[i].hostname;
    hc_verdict_op_t op = {.coll  = r.coll,
                          .seq   = r.seq,
                          .cseq  = r.cseq,
                          .bytes = r.bytes,
                          .peer  = r.coll == HC_COLL_SEND || r.coll == HC_COLL_RECV ? r.peer : -1};
    hc_verdict_format(&op, where, hosts, c->nranks, 0, line, sizeof(line));
    hc_warn(COLL, "%s: %s", what, line);
    hc_debug(COLL, "%s: the ranks answered in %.1f ms", what, (hc_clock_now() - t0) * 1e3);
    if (c->verdict == NULL)
        c->verdict = strdup(line);
    free(where), free(hosts);
    return status;
}
