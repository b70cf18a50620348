/* tl_tcp_dial.c - the tcp dial never waits (transport.h's connect): against
 * a peer whose listener drops the SYNs (its accept queue full), every
 * connect call returns at once, HCOMM_IN_PROGRESS until the context's
 * timeout, then HCOMM_ERR_TIMEOUT, with no socket left behind; a pending
 * dial closes with its context; a closed listener fails the dial at once;
 * and a real peer still connects. Contexts in the cmocka parent, no world. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tl_suite.h"
#include "transport/tcp/tcp.h"

#define DROP_T 1.0    /* seconds of connection set-up timeout */
#define CALL_MAX 0.25 /* a blocking dial took DROP_T in one call */

typedef struct dial_env {
    hc_params_t    prm;
    hc_peer_info_t info[2];
    uint8_t        cookie[16];
} dial_env_t;

static void env_init(dial_env_t *e, const hc_tlt_variant_t *v)
{
    memset(e, 0, sizeof(*e));
    e->prm = hc_tlt_params(v);
    assert_int_equal(getrandom(e->cookie, sizeof(e->cookie), 0), (ssize_t)sizeof(e->cookie));
    for (int r = 0; r < 2; r++) {
        strcpy(e->info[r].hostname, "localhost");
        e->info[r].pid  = getpid();
        e->info[r].rank = r;
        assert_int_equal(getrandom(e->info[r].nonce, 16, 0), 16);
    }
}

static hc_tl_ctx_t *ctx_open(dial_env_t *e, int rank)
{
    hc_tl_params_t tp  = {.rank    = rank,
                          .nranks  = 2,
                          .bind_ip = "127.0.0.1",
                          .timeout = DROP_T,
                          .self    = &e->info[rank],
                          .params  = &e->prm};
    hc_tl_ctx_t   *ctx = NULL;

    memcpy(tp.cookie, e->cookie, sizeof(tp.cookie));
    assert_int_equal(hc_tl_tcp_ops.init(&ctx, &tp), HCOMM_SUCCESS);
    return ctx;
}

/* Whether a nonblocking connect to sa completes within ms. */
static int connects_within(const struct sockaddr_in *sa, int ms, int *fd_p)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
    assert_true(r == 0 || errno == EINPROGRESS);
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    int           ok = r == 0 || poll(&pf, 1, ms) == 1;
    *fd_p            = fd;
    return ok;
}

/* A fake rank 1 whose listener never accepts: listen(0) and one connection
 * waiting fill its accept queue, and Linux then drops further SYNs. 0 with
 * the listener and the filler, or -1 (skip) where the kernel answers anyway. */
static int full_listener(struct sockaddr_in *sa, int *lfd, int *filler)
{
    socklen_t l = sizeof(*sa);
    int       probe;

    memset(sa, 0, sizeof(*sa));
    sa->sin_family      = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *lfd                = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(*lfd >= 0);
    assert_int_equal(bind(*lfd, (struct sockaddr *)sa, sizeof(*sa)), 0);
    assert_int_equal(listen(*lfd, 0), 0);
    assert_int_equal(getsockname(*lfd, (struct sockaddr *)sa, &l), 0);
    assert_true(connects_within(sa, 5000, filler));
    int answered = connects_within(sa, 300, &probe);
    close(probe);
    if (!answered) /* closing a connect in SYN_SENT leaves nothing at the listener */
        return 0;
    close(*filler);
    close(*lfd);
    return -1;
}

static hcomm_status_t timed_connect(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer,
                                    const struct sockaddr_in *sa, hc_tl_ep_t **ep)
{
    double         t0 = hc_tlt_now();
    hcomm_status_t st = hc_tl_tcp_ops.connect(ctx, peer, sa, sizeof(*sa), ep);
    double         dt = hc_tlt_now() - t0;
    if (dt > CALL_MAX)
        fail_msg("connect to rank %d took %.3f s (%s): it waited", peer->rank, dt,
                 hcomm_status_name(st));
    return st;
}

void hc_tlt_tcp_dial_dropped(const hc_tlt_variant_t *v)
{
    dial_env_t         e;
    struct sockaddr_in sa;
    struct pollfd      pf[HC_TCP_MAX_SOCKS];
    hc_tl_ep_t        *ep = NULL;
    int                lfd, filler, calls = 0;
    hcomm_status_t     st;

    env_init(&e, v);
    if (full_listener(&sa, &lfd, &filler) != 0) {
        printf("[%s] skipped: a full accept queue does not drop SYNs here\n", v->name);
        skip();
    }
    hc_tl_ctx_t *ctx  = ctx_open(&e, 0);
    int          fds0 = hc_tlt_fd_count();
    double       t0   = hc_tlt_now();
    /* every call at once; the timeout from the first, not from each */
    while ((st = timed_connect(ctx, &e.info[1], &sa, &ep)) == HCOMM_IN_PROGRESS) {
        if (calls++ == 0) { /* its sockets connecting: the idle wait sleeps on them */
            assert_int_equal(hc_tl_tcp_ops.wait_fds(ctx, pf, HC_TCP_MAX_SOCKS), ctx->nsocks);
            assert_true(pf[0].events & POLLOUT);
            assert_int_equal(hc_tl_tcp_ops.wait_fds(ctx, pf, 0), -1);
        }
        assert_true(hc_tlt_now() - t0 < DROP_T + 5);
        hc_tl_tcp_ops.progress(ctx);
        usleep(10000);
    }
    double dt = hc_tlt_now() - t0;
    assert_string_equal(hcomm_status_name(st), hcomm_status_name(HCOMM_ERR_TIMEOUT));
    assert_true(calls > 10);
    if (dt < DROP_T * 0.9 || dt > DROP_T + 2)
        fail_msg("timed out after %.2f s, the timeout is %.1f s", dt, DROP_T);
    assert_null(ep);
    assert_int_equal(hc_tlt_fd_count(), fds0); /* the dial's sockets closed */
    assert_int_equal(hc_tl_tcp_ops.wait_fds(ctx, pf, HC_TCP_MAX_SOCKS), 0);
    hc_tl_tcp_ops.fini(ctx);

    /* a context closed with its dial pending closes the dial's sockets */
    int fds1 = hc_tlt_fd_count();
    ctx      = ctx_open(&e, 0);
    st       = timed_connect(ctx, &e.info[1], &sa, &ep);
    assert_string_equal(hcomm_status_name(st), hcomm_status_name(HCOMM_IN_PROGRESS));
    assert_true(hc_tlt_fd_count() > fds1 + 1);
    hc_tl_tcp_ops.fini(ctx);
    assert_int_equal(hc_tlt_fd_count(), fds1);

    /* the listener closed (the peer failed or left): refused at once */
    close(filler);
    close(lfd);
    fds1 = hc_tlt_fd_count();
    ctx  = ctx_open(&e, 0);
    t0   = hc_tlt_now();
    while ((st = timed_connect(ctx, &e.info[1], &sa, &ep)) == HCOMM_IN_PROGRESS &&
           hc_tlt_now() - t0 < DROP_T / 2)
        usleep(1000);
    assert_string_equal(hcomm_status_name(st), hcomm_status_name(HCOMM_ERR_REMOTE));
    hc_tl_tcp_ops.fini(ctx);
    assert_int_equal(hc_tlt_fd_count(), fds1);
}

/* A real rank 1: both sides call connect, each call at once, until both have
 * their endpoint; then a message (striped with the variant's sockets). */
void hc_tlt_tcp_dial_real(const hc_tlt_variant_t *v)
{
    dial_env_t         e;
    struct sockaddr_in sa[2];
    size_t             len[2];
    hc_tl_ep_t        *ep[2] = {NULL, NULL};
    hc_tl_ctx_t       *ctx[2];
    size_t             n  = 3 * HC_TLT_MIB + 5;
    uint8_t           *tx = hc_tlt_alloc(n), *rx = hc_tlt_alloc(n);
    hc_tl_req_t        req[2];

    env_init(&e, v);
    for (int r = 0; r < 2; r++) {
        ctx[r] = ctx_open(&e, r);
        len[r] = sizeof(sa[r]);
        assert_int_equal(hc_tl_tcp_ops.address(ctx[r], &sa[r], &len[r]), HCOMM_SUCCESS);
        assert_int_equal(len[r], sizeof(sa[r]));
    }
    for (double t0 = hc_tlt_now(); ep[0] == NULL || ep[1] == NULL;) {
        for (int r = 0; r < 2; r++) {
            if (ep[r] != NULL)
                continue;
            hcomm_status_t st = timed_connect(ctx[r], &e.info[1 - r], &sa[1 - r], &ep[r]);
            if (st != HCOMM_IN_PROGRESS)
                assert_string_equal(hcomm_status_name(st), hcomm_status_name(HCOMM_SUCCESS));
        }
        assert_true(hc_tlt_now() - t0 < 10);
    }
    assert_int_equal(ep[0]->nsocks, e.prm.tcp_nsocks);
    hc_tlt_fill(tx, 0, n, hc_tlt_seed(0, 1, 0));
    assert_int_equal(hc_tl_tcp_ops.isend(ep[0], tx, n, &req[0]), HCOMM_SUCCESS);
    assert_int_equal(hc_tl_tcp_ops.irecv(ep[1], rx, n, NULL, NULL, &req[1]), HCOMM_SUCCESS);
    for (double t0 = hc_tlt_now();
         req[0].status == HCOMM_IN_PROGRESS || req[1].status == HCOMM_IN_PROGRESS;) {
        hc_tl_tcp_ops.progress(ctx[0]);
        hc_tl_tcp_ops.progress(ctx[1]);
        assert_true(hc_tlt_now() - t0 < 30);
    }
    assert_int_equal(req[0].status, HCOMM_SUCCESS);
    assert_int_equal(req[1].status, HCOMM_SUCCESS);
    assert_int_equal(hc_tlt_check(rx, 0, n, hc_tlt_seed(0, 1, 0)), n);
    for (int r = 0; r < 2; r++)
        hc_tl_tcp_ops.fini(ctx[r]);
    hc_tlt_free(tx, n);
    hc_tlt_free(rx, n);
}
