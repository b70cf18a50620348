/* test_tl_tcp.c - the tcp transport between forked processes on loopback.
 *
 * The parent forks the ranks and relays their address blobs over pipes; each
 * rank connects in ascending peer order as transport.h says, runs a body and
 * exits 0 on success. Checks inside ranks print and _exit(1): cmocka's own
 * asserts are for the parent only. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/params.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

#define MAXR    4
#define MIB     (1024u * 1024u)
#define WAIT_S  30.0

static int g_rank = -1;

#define CHECK(c)                                                                        \
    do {                                                                                \
        if (!(c)) {                                                                     \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", g_rank, __FILE__,     \
                    __LINE__, #c);                                                      \
            _exit(1);                                                                   \
        }                                                                               \
    } while (0)

typedef struct world {
    int             rank, nranks;
    hc_tl_ctx_t    *ctx;
    hc_tl_ep_t     *eps[MAXR];
    hc_peer_info_t  info[MAXR];
    uint8_t         addr[MAXR][HC_TL_ADDR_MAX];
    size_t          addrlen[MAXR];
    hc_params_t     prm;
} world_t;

typedef struct opts {
    int    nranks, nsocks;
    size_t stripe_min;
    void (*pre_connect)(world_t *w); /* after addresses are known */
    void (*body)(world_t *w);
    int    killed_rank; /* expected to die of SIGKILL; -1: none */
    const char *bind_ip; /* NULL: 127.0.0.1 */
} opts_t;

static const uint8_t test_cookie[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void xfer(int fd, void *buf, size_t len, int out)
{
    uint8_t *p = buf;
    double   t = now_s() + WAIT_S;
    while (len > 0) {
        struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        CHECK(now_s() < t);
        if (poll(&pf, 1, 100) <= 0)
            continue;
        ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
        CHECK(n > 0 || (n < 0 && errno == EINTR));
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        }
    }
}

static uint8_t pat(size_t k, int src, int dst, int tag)
{
    uint32_t x = (uint32_t)k * 2654435761u ^ ((uint32_t)src << 24 | (uint32_t)dst << 16 |
                                              (uint32_t)tag << 4);
    return (uint8_t)(x >> 13 ^ k >> 9);
}

static void fill(uint8_t *b, size_t len, int src, int dst, int tag)
{
    for (size_t k = 0; k < len; k++)
        b[k] = pat(k, src, dst, tag);
}

static int verify(const uint8_t *b, size_t len, int src, int dst, int tag)
{
    for (size_t k = 0; k < len; k++)
        if (b[k] != pat(k, src, dst, tag)) {
            fprintf(stderr, "rank %d: byte %zu of %zu from %d (tag %d) is %u, want %u\n",
                    dst, k, len, src, tag, b[k], pat(k, src, dst, tag));
            return 0;
        }
    return 1;
}

/* Progresses until every request is done; 0 when they are, -1 past the deadline. */
static int wait_reqs(world_t *w, hc_tl_req_t **reqs, size_t n, double secs)
{
    double t = now_s() + secs;
    for (size_t i = 0; i < n;) {
        if (reqs[i]->status != HCOMM_IN_PROGRESS) {
            i++;
            continue;
        }
        if (now_s() > t)
            return -1;
        if (hc_tl_tcp_ops.progress(w->ctx) == 0)
            sched_yield();
    }
    return 0;
}

static void wait_ok(world_t *w, hc_tl_req_t **reqs, size_t n)
{
    CHECK(wait_reqs(w, reqs, n, WAIT_S) == 0);
    for (size_t i = 0; i < n; i++)
        CHECK(reqs[i]->status == HCOMM_SUCCESS);
}

static void rank_main(int r, const opts_t *o, int up, int down)
{
    /* cmocka's handlers would longjmp a crashed rank back into the test runner */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], SIG_DFL);
    g_rank     = r;
    world_t *w = calloc(1, sizeof(*w));
    CHECK(w != NULL);
    w->rank   = r;
    w->nranks = o->nranks;
    w->prm    = *hc_params_get();
    w->prm.tcp_nsocks     = o->nsocks;
    w->prm.tcp_stripe_min = o->stripe_min;
    hc_tl_params_t p = {.rank = r, .nranks = o->nranks, .timeout = 10,
                        .self = &w->info[r], .params = &w->prm};
    p.bind_ip = o->bind_ip != NULL ? o->bind_ip : "127.0.0.1";
    memcpy(p.cookie, test_cookie, sizeof(p.cookie));
    CHECK(hc_tl_tcp_ops.init(&w->ctx, &p) == HCOMM_SUCCESS);
    size_t len = HC_TL_ADDR_MAX;
    CHECK(hc_tl_tcp_ops.address(w->ctx, w->addr[r], &len) == HCOMM_SUCCESS);
    CHECK(len <= HC_TL_ADDR_MAX);
    xfer(up, &len, sizeof(len), 1);
    xfer(up, w->addr[r], len, 1);
    for (int q = 0; q < o->nranks; q++) {
        int32_t pid;
        xfer(down, &pid, sizeof(pid), 0);
        xfer(down, &w->addrlen[q], sizeof(size_t), 0);
        CHECK(w->addrlen[q] <= HC_TL_ADDR_MAX);
        xfer(down, w->addr[q], w->addrlen[q], 0);
        w->info[q].pid  = pid;
        w->info[q].rank = q;
        gethostname(w->info[q].hostname, sizeof(w->info[q].hostname) - 1);
    }
    if (o->pre_connect != NULL)
        o->pre_connect(w);
    for (int q = 0; q < o->nranks; q++) {
        if (q == r)
            continue;
        CHECK(hc_tl_tcp_ops.reachable(&w->info[r], &w->info[q]));
        CHECK(hc_tl_tcp_ops.connect(w->ctx, &w->info[q], w->addr[q], w->addrlen[q],
                                    &w->eps[q]) == HCOMM_SUCCESS);
    }
    o->body(w);
    hc_tl_tcp_ops.fini(w->ctx);
    free(w);
    fflush(stdout);
    _exit(0);
}

/* Forks the ranks, relays addresses, and checks how each one ended. */
static void run_world(const opts_t *o)
{
    int   up[MAXR][2], down[MAXR][2];
    pid_t pid[MAXR];
    fflush(NULL);
    for (int r = 0; r < o->nranks; r++)
        assert_int_equal(pipe(up[r]) | pipe(down[r]), 0);
    for (int r = 0; r < o->nranks; r++) {
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0) {
            for (int q = 0; q < o->nranks; q++) {
                close(up[q][0]);
                close(down[q][1]);
                if (q != r) {
                    close(up[q][1]);
                    close(down[q][0]);
                }
            }
            rank_main(r, o, up[r][1], down[r][0]);
        }
    }
    uint8_t addr[MAXR][HC_TL_ADDR_MAX];
    size_t  len[MAXR];
    for (int r = 0; r < o->nranks; r++) {
        close(up[r][1]);
        close(down[r][0]);
        xfer(up[r][0], &len[r], sizeof(size_t), 0);
        assert_true(len[r] <= HC_TL_ADDR_MAX);
        xfer(up[r][0], addr[r], len[r], 0);
    }
    for (int r = 0; r < o->nranks; r++) {
        for (int q = 0; q < o->nranks; q++) {
            int32_t p32 = pid[q];
            xfer(down[r][1], &p32, sizeof(p32), 1);
            xfer(down[r][1], &len[q], sizeof(size_t), 1);
            xfer(down[r][1], addr[q], len[q], 1);
        }
        close(up[r][0]);
        close(down[r][1]);
    }
    int    status[MAXR], left = o->nranks, timed_out = 0;
    double t = now_s() + 120;
    for (int r = 0; r < o->nranks; r++)
        status[r] = -1;
    while (left > 0 && !timed_out) {
        for (int r = 0; r < o->nranks; r++)
            if (status[r] == -1 && waitpid(pid[r], &status[r], WNOHANG) == pid[r])
                left--;
        timed_out = now_s() > t;
        usleep(5000);
    }
    for (int r = 0; r < o->nranks; r++) {
        if (status[r] == -1) {
            kill(pid[r], SIGKILL);
            waitpid(pid[r], NULL, 0);
        }
    }
    assert_false(timed_out);
    for (int r = 0; r < o->nranks; r++) {
        if (r == o->killed_rank) {
            assert_true(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL);
        } else {
            if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0)
                fprintf(stderr, "rank %d ended with status 0x%x\n", r, status[r]);
            assert_true(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0);
        }
    }
}

static void run(int nranks, int nsocks, size_t stripe_min, void (*body)(world_t *))
{
    opts_t o = {.nranks = nranks, .nsocks = nsocks, .stripe_min = stripe_min, .body = body,
                .killed_rank = -1};
    run_world(&o);
}

/* Every rank sends sizes[] to every other rank and receives theirs, all posted
 * at once. With sink set, the receives go through check_sink. */
typedef struct sink_state {
    uint8_t *buf;
    size_t   next, calls;
    int      bad;
} sink_state_t;

static void check_sink(void *arg, size_t off, const void *data, size_t len)
{
    sink_state_t *s = arg;
    if (off != s->next || len == 0)
        s->bad = 1;
    memcpy(s->buf + off, data, len);
    s->next = off + len;
    s->calls++;
}

static void exchange(world_t *w, const size_t *sizes, int nsz, int use_sink)
{
    int           n   = w->nranks * nsz;
    hc_tl_req_t  *sr  = calloc((size_t)n, sizeof(*sr)), *rr = calloc((size_t)n, sizeof(*rr));
    hc_tl_req_t **all = calloc(2 * (size_t)n, sizeof(*all));
    uint8_t     **sb  = calloc((size_t)n, sizeof(*sb)), **rb = calloc((size_t)n, sizeof(*rb));
    sink_state_t *ss  = calloc((size_t)n, sizeof(*ss));
    int           na  = 0;
    CHECK(sr && rr && all && sb && rb && ss);
    for (int q = 0; q < w->nranks; q++) {
        for (int i = 0; q != w->rank && i < nsz; i++) {
            int k = q * nsz + i;
            sb[k] = malloc(sizes[i] + 1);
            rb[k] = malloc(sizes[i] + 1);
            CHECK(sb[k] && rb[k]);
            fill(sb[k], sizes[i], w->rank, q, i);
            memset(rb[k], 0xee, sizes[i] + 1);
            ss[k].buf = rb[k];
            CHECK(hc_tl_tcp_ops.isend(w->eps[q], sb[k], sizes[i], &sr[k]) == HCOMM_SUCCESS);
            CHECK(hc_tl_tcp_ops.irecv(w->eps[q], use_sink ? NULL : rb[k], sizes[i],
                                      use_sink ? check_sink : NULL, &ss[k], &rr[k]) ==
                  HCOMM_SUCCESS);
            all[na++] = &sr[k];
            all[na++] = &rr[k];
        }
    }
    wait_ok(w, all, (size_t)na);
    for (int q = 0; q < w->nranks; q++) {
        for (int i = 0; q != w->rank && i < nsz; i++) {
            int k = q * nsz + i;
            CHECK(verify(rb[k], sizes[i], q, w->rank, i));
            CHECK(rb[k][sizes[i]] == 0xee);
            CHECK(!use_sink || (ss[k].bad == 0 && ss[k].next == sizes[i]));
            CHECK(rr[k].done == sizes[i] && sr[k].done == sizes[i]);
            free(sb[k]);
            free(rb[k]);
        }
    }
    free(ss), free(rb), free(sb), free(all), free(rr), free(sr);
}

static const size_t basic_sizes[] = {0, 1, 7, 64 << 10, 8 * MIB + 3};

static void body_basic(world_t *w)
{
    exchange(w, basic_sizes, 5, 0);
    exchange(w, basic_sizes, 5, 1);
}

static void test_basic_2(void **state)
{
    (void)state;
    run(2, 1, MIB, body_basic);
}

static void test_basic_3(void **state)
{
    (void)state;
    run(3, 1, MIB, body_basic);
}

static void test_ipv6(void **state)
{
    (void)state;
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        printf("skipped: cannot bind ::1: %s\n", strerror(errno));
        skip();
    }
    opts_t o = {.nranks = 2, .nsocks = 2, .stripe_min = MIB, .body = body_basic,
                .killed_rank = -1, .bind_ip = "::1"};
    run_world(&o);
}

/* Many small messages both ways, all queued before any progress. */
static void body_small(world_t *w)
{
    enum { N = 20000 };
    int           q  = 1 - w->rank;
    size_t        total = 0;
    hc_tl_req_t  *rq = calloc(2 * N, sizeof(*rq));
    hc_tl_req_t **pp = calloc(2 * N, sizeof(*pp));
    for (int i = 0; i < N; i++)
        total += (size_t)(i % 61);
    uint8_t *sb = malloc(total), *rb = malloc(total);
    CHECK(rq && pp && sb && rb);
    fill(sb, total, w->rank, q, 0);
    memset(rb, 0, total);
    for (size_t i = 0, off = 0; i < N; off += i % 61, i++) {
        CHECK(hc_tl_tcp_ops.isend(w->eps[q], sb + off, i % 61, &rq[2 * i]) == HCOMM_SUCCESS);
        CHECK(hc_tl_tcp_ops.irecv(w->eps[q], rb + off, i % 61, NULL, NULL, &rq[2 * i + 1]) ==
              HCOMM_SUCCESS);
        pp[2 * i]     = &rq[2 * i];
        pp[2 * i + 1] = &rq[2 * i + 1];
    }
    /* Requests complete in order per direction: behind the first pending send
     * (receive) no later send (receive) may be done. */
    size_t first[2] = {0, 0};
    double t        = now_s() + WAIT_S;
    while (first[0] < N || first[1] < N) {
        CHECK(now_s() < t);
        if (hc_tl_tcp_ops.progress(w->ctx) == 0)
            sched_yield();
        for (int d = 0; d < 2; d++) {
            while (first[d] < N && rq[2 * first[d] + (size_t)d].status != HCOMM_IN_PROGRESS)
                CHECK(rq[2 * first[d]++ + (size_t)d].status == HCOMM_SUCCESS);
            for (size_t k = first[d] + 1; k < N && k < first[d] + 256; k++)
                CHECK(rq[2 * k + (size_t)d].status == HCOMM_IN_PROGRESS);
        }
    }
    CHECK(verify(rb, total, q, w->rank, 0));
    free(rb), free(sb), free(pp), free(rq);
}

static void test_small_many(void **state)
{
    (void)state;
    run(2, 1, MIB, body_small);
}

/* Each rank sends 32 MiB while receiving 32 MiB: needs both directions at once. */
static void body_duplex(world_t *w)
{
    size_t sizes[] = {32 * MIB, 32 * MIB + 1};
    exchange(w, sizes, 2, 0);
}

static void test_full_duplex(void **state)
{
    (void)state;
    run(2, 1, MIB, body_duplex);
    run(2, 4, MIB, body_duplex);
}

/* Striping over 4 sockets, around the threshold and mixed with small messages;
 * every socket must have carried data. */
static void body_striped(world_t *w)
{
    static const size_t sizes[] = {0, 5, MIB - 1, MIB, MIB + 1, 100, 8 * MIB + 3, 3 * MIB + 17, 1};
    exchange(w, sizes, 9, 0);
    exchange(w, sizes, 9, 1);
    for (int q = 0; q < w->nranks; q++) {
        if (q == w->rank)
            continue;
        CHECK(w->eps[q]->nsocks == 4);
        for (int s = 0; s < 4; s++) {
            struct tcp_info ti;
            socklen_t       l = sizeof(ti);
            CHECK(getsockopt(w->eps[q]->sock[s].fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0);
            CHECK(ti.tcpi_bytes_received > MIB);
        }
    }
    /* a last exchange as a barrier: no rank closes its sockets (and fails the
     * peer's endpoints) while the peer still reads their statistics */
    static const size_t last[] = {1};
    exchange(w, last, 1, 0);
}

static void test_striped(void **state)
{
    (void)state;
    run(2, 4, MIB, body_striped);
    run(3, 4, MIB, body_striped);
}

/* A receive posted for another length fails the endpoint on both sides. */
static void body_mismatch(world_t *w)
{
    uint8_t     buf[100] = {0};
    hc_tl_req_t req, req2;
    hc_tl_req_t *p = &req;
    if (w->rank == 0) {
        CHECK(hc_tl_tcp_ops.isend(w->eps[1], buf, 100, &req) == HCOMM_SUCCESS);
        CHECK(hc_tl_tcp_ops.irecv(w->eps[1], buf, 10, NULL, NULL, &req2) == HCOMM_SUCCESS);
        p = &req2;
        CHECK(wait_reqs(w, &p, 1, WAIT_S) == 0);
        CHECK(req2.status == HCOMM_ERR_REMOTE);
        CHECK(hc_tl_tcp_ops.ep_status(w->eps[1]) == HCOMM_ERR_REMOTE);
        return;
    }
    CHECK(hc_tl_tcp_ops.irecv(w->eps[0], buf, 50, NULL, NULL, &req) == HCOMM_SUCCESS);
    CHECK(hc_tl_tcp_ops.irecv(w->eps[0], buf, 100, NULL, NULL, &req2) == HCOMM_SUCCESS);
    CHECK(wait_reqs(w, &p, 1, WAIT_S) == 0);
    CHECK(req.status == HCOMM_ERR_PROTOCOL);
    CHECK(req2.status == HCOMM_ERR_PROTOCOL);
    CHECK(hc_tl_tcp_ops.ep_status(w->eps[0]) == HCOMM_ERR_PROTOCOL);
    CHECK(hc_tl_tcp_ops.irecv(w->eps[0], buf, 100, NULL, NULL, &req) == HCOMM_ERR_PROTOCOL);
}

static void test_length_mismatch(void **state)
{
    (void)state;
    run(2, 1, MIB, body_mismatch);
}

/* Before rank 0 connects for real, it dials rank 1 three times: one client that
 * never speaks, one with a wrong cookie, one with a bad magic. Rank 1 logs two
 * refusals to its (redirected) stderr and still connects within the timeout. */
static char logpath[64];
static int  saved_stderr = -1;
static int  silent_fd    = -1;

static int raw_dial(const world_t *w, int q)
{
    struct sockaddr_storage ss;
    memcpy(&ss, w->addr[q], w->addrlen[q]);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    CHECK(connect(fd, (struct sockaddr *)&ss, (socklen_t)w->addrlen[q]) == 0);
    return fd;
}

static void pre_cookie(world_t *w)
{
    if (w->rank == 1) {
        fflush(stderr);
        saved_stderr = dup(2);
        int fd       = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(saved_stderr >= 0 && fd >= 0 && dup2(fd, 2) == 2);
        close(fd);
        return;
    }
    silent_fd = raw_dial(w, 1);
    uint8_t hello[HC_TCP_HELLO_BYTES];
    hc_tcp_hello_encode(w->ctx, 0, hello);
    hello[12] ^= 0x5a;
    int fd = raw_dial(w, 1);
    CHECK(write(fd, hello, sizeof(hello)) == (ssize_t)sizeof(hello));
    close(fd);
    hc_tcp_hello_encode(w->ctx, 0, hello);
    hello[0] ^= 1;
    fd = raw_dial(w, 1);
    CHECK(write(fd, hello, sizeof(hello)) == (ssize_t)sizeof(hello));
    close(fd);
    usleep(100000);
}

static void body_cookie(world_t *w)
{
    if (w->rank == 1) {
        fflush(stderr);
        CHECK(dup2(saved_stderr, 2) == 2);
        close(saved_stderr);
        FILE *f = fopen(logpath, "r");
        CHECK(f != NULL);
        char line[2048];
        int  refused = 0;
        while (fgets(line, sizeof(line), f) != NULL)
            refused += strstr(line, "refused connection from 127.0.0.1:") != NULL &&
                       strstr(line, "wrong cookie") != NULL;
        fclose(f);
        unlink(logpath);
        CHECK(refused == 2);
    }
    size_t sizes[] = {7, 64 << 10};
    exchange(w, sizes, 2, 0);
    if (silent_fd >= 0)
        close(silent_fd);
}

static void test_wrong_cookie(void **state)
{
    (void)state;
    snprintf(logpath, sizeof(logpath), "/tmp/test_tl_tcp.%d.log", (int)getpid());
    opts_t o = {.nranks = 2, .nsocks = 2, .stripe_min = MIB, .pre_connect = pre_cookie,
                .body = body_cookie, .killed_rank = -1};
    double t = now_s();
    run_world(&o);
    assert_true(now_s() - t < 8.0); /* the silent client did not hold anyone up */
}

/* Sends to a dead peer without the liveness check: the sends fail with
 * HCOMM_ERR_REMOTE, and no SIGPIPE kills the process. */
static void send_to_dead(world_t *w, hc_tl_ep_t *ep)
{
    struct pollfd pf = {.fd = ep->sock[0].fd, .events = POLLRDHUP};
    CHECK(poll(&pf, 1, 5000) == 1);
    size_t       len = 8 * MIB;
    uint8_t     *b   = calloc(1, len);
    hc_tl_req_t  req;
    double       t = now_s() + 2;
    CHECK(b != NULL);
    CHECK(hc_tl_tcp_ops.isend(ep, b, len, &req) == HCOMM_SUCCESS);
    while (req.status == HCOMM_IN_PROGRESS && now_s() < t)
        if (hc_tcp_tx_progress(ep) == 0)
            usleep(1000);
    CHECK(req.status == HCOMM_ERR_REMOTE);
    CHECK(hc_tl_tcp_ops.ep_status(ep) == HCOMM_ERR_REMOTE);
    free(b);
    (void)w;
}

/* Rank 1 kills rank 0 with a receive pending: it fails with HCOMM_ERR_REMOTE
 * within 1 s. Rank 2, idle towards rank 0, notices too; rank 3 sends to it. */
static void body_kill(world_t *w)
{
    if (w->rank == 0) {
        double t = now_s() + WAIT_S;
        while (now_s() < t)
            usleep(10000);
        CHECK(!"rank 0 was not killed");
    }
    uint8_t      buf[64];
    hc_tl_req_t  req;
    hc_tl_req_t *p = &req;
    if (w->rank == 1) {
        CHECK(hc_tl_tcp_ops.irecv(w->eps[0], buf, sizeof(buf), NULL, NULL, &req) ==
              HCOMM_SUCCESS);
        CHECK(wait_reqs(w, &p, 1, 0.05) == -1);
        double t0 = now_s();
        CHECK(kill(w->info[0].pid, SIGKILL) == 0);
        CHECK(wait_reqs(w, &p, 1, 1.0) == 0);
        printf("tcp: receive failed %.1f ms after SIGKILL of its peer\n", (now_s() - t0) * 1e3);
        CHECK(req.status == HCOMM_ERR_REMOTE);
        CHECK(hc_tl_tcp_ops.isend(w->eps[0], buf, 1, &req) == HCOMM_ERR_REMOTE);
    } else if (w->rank == 2) {
        double t = now_s() + 5;
        while (hc_tl_tcp_ops.ep_status(w->eps[0]) == HCOMM_SUCCESS && now_s() < t)
            if (hc_tl_tcp_ops.progress(w->ctx) == 0)
                usleep(1000);
    } else {
        send_to_dead(w, w->eps[0]);
        return;
    }
    CHECK(hc_tl_tcp_ops.ep_status(w->eps[0]) == HCOMM_ERR_REMOTE);
    CHECK(hc_tl_tcp_ops.irecv(w->eps[0], buf, 1, NULL, NULL, &req) == HCOMM_ERR_REMOTE);
    size_t sizes[] = {1, 3 * MIB};
    int    q       = 3 - w->rank; /* 1 <-> 2 still work */
    hc_tl_req_t sr, rr, *pp[2] = {&sr, &rr};
    uint8_t    *sb = malloc(sizes[1]), *rb = malloc(sizes[1]);
    CHECK(sb && rb);
    fill(sb, sizes[1], w->rank, q, 9);
    CHECK(hc_tl_tcp_ops.isend(w->eps[q], sb, sizes[1], &sr) == HCOMM_SUCCESS);
    CHECK(hc_tl_tcp_ops.irecv(w->eps[q], rb, sizes[1], NULL, NULL, &rr) == HCOMM_SUCCESS);
    wait_ok(w, pp, 2);
    CHECK(verify(rb, sizes[1], q, w->rank, 9));
    free(sb), free(rb);
}

static void test_peer_killed(void **state)
{
    (void)state;
    opts_t o = {.nranks = 4, .nsocks = 2, .stripe_min = MIB, .body = body_kill,
                .killed_rank = 0};
    run_world(&o);
}

/* 64 MiB one way as 16 messages of 4 MiB; prints the best of 3 (no assertion). */
static void body_bw(world_t *w)
{
    enum { NMSG = 16 };
    size_t       msz = 4 * MIB;
    uint8_t     *buf = malloc(msz * NMSG);
    hc_tl_req_t  rq[NMSG], *pp[NMSG];
    double       best = 1e9;
    CHECK(buf != NULL);
    memset(buf, w->rank, msz * NMSG);
    for (int it = 0; it < 4; it++) {
        hc_tl_req_t sync, *ps = &sync;
        uint8_t     b = 0;
        if (w->rank == 0) /* a ping from rank 1 starts each round */
            CHECK(hc_tl_tcp_ops.irecv(w->eps[1], &b, 1, NULL, NULL, &sync) == HCOMM_SUCCESS);
        else
            CHECK(hc_tl_tcp_ops.isend(w->eps[0], &b, 1, &sync) == HCOMM_SUCCESS);
        wait_ok(w, &ps, 1);
        double t = now_s();
        for (int i = 0; i < NMSG; i++) {
            pp[i] = &rq[i];
            CHECK((w->rank == 0
                       ? hc_tl_tcp_ops.isend(w->eps[1], buf + i * msz, msz, &rq[i])
                       : hc_tl_tcp_ops.irecv(w->eps[0], buf + i * msz, msz, NULL, NULL, &rq[i]))
                  == HCOMM_SUCCESS);
        }
        wait_ok(w, pp, NMSG);
        if (it > 0 && now_s() - t < best)
            best = now_s() - t;
    }
    if (w->rank == 1)
        printf("tcp: 64 MiB one-way stream, %d socket(s): %.2f GB/s\n", w->prm.tcp_nsocks,
               (double)(msz * NMSG) / best / 1e9);
    free(buf);
}

static void test_bandwidth(void **state)
{
    (void)state;
    run(2, 1, MIB, body_bw);
    run(2, 4, MIB, body_bw);
}

static int setup_loopback(void **state)
{
    (void)state;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        printf("skipped: cannot bind 127.0.0.1: %s\n", strerror(errno));
        exit(77);
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_2),         cmocka_unit_test(test_basic_3),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_small_many),      cmocka_unit_test(test_full_duplex),
        cmocka_unit_test(test_striped),         cmocka_unit_test(test_length_mismatch),
        cmocka_unit_test(test_wrong_cookie),    cmocka_unit_test(test_peer_killed),
        cmocka_unit_test(test_bandwidth),
    };
    return cmocka_run_group_tests(tests, setup_loopback, NULL);
}
