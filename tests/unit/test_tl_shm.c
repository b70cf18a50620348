/* test_tl_shm.c - the shared-memory transport between real processes.
 *
 * The parent forks the ranks; they learn nothing but each other's pids (through
 * a pipe) and share a cookie made before the fork. Checks run in the children
 * (CHK exits non-zero); the parent asserts on their exit codes and that nothing
 * of the test's cookie is left in /dev/shm.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/params.h"
#include "transport/shm/shm.h"
#include "transport/transport.h"

#define MAXR 4
#define MIB ((size_t)1 << 20)
#define SKIP_CODE 77

#define CHK(c)                                                                                     \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", g_rank, __FILE__, __LINE__, #c); \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

static const hc_tl_ops_t *ops = &hc_tl_shm_ops;
static uint8_t            g_cookie[16];
static int                g_rank = -1;

typedef struct {
    int                rank, nranks;
    hc_tl_ctx_t       *ctx;
    hc_tl_ep_t        *eps[MAXR];
    const hc_params_t *prm;
} env_t;

typedef int (*body_fn_t)(env_t *env, void *arg); /* 0 pass, SKIP_CODE skip */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint8_t pat(size_t i, int src, int dst, int tag)
{
    return (uint8_t)(i * 131u + (i >> 9) + (unsigned)src * 17u + (unsigned)dst * 29u +
                     (unsigned)tag * 7u);
}

static void fill(uint8_t *p, size_t n, int src, int dst, int tag)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(i, src, dst, tag);
}

static int check(const uint8_t *p, size_t n, int src, int dst, int tag)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(i, src, dst, tag))
            return 0;
    return 1;
}

/* Progresses until every request completes; fails the rank after limit seconds. */
static void wait_all(env_t *env, hc_tl_req_t *reqs, int n, double limit)
{
    double deadline = now_s() + limit;

    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++)
            pending += reqs[i].status == HCOMM_IN_PROGRESS;
        if (pending == 0)
            return;
        if (ops->progress(env->ctx) == 0 && env->nranks > 2)
            sched_yield(); /* more ranks than cores */
        CHK(now_s() < deadline);
    }
}

/* Two rounds of empty messages between every pair: afterwards both sides of
 * every pair have probed single-copy reads and seen each other's verdicts. */
static void sync_all(env_t *env)
{
    hc_tl_req_t reqs[2 * MAXR];

    for (int round = 0; round < 2; round++) {
        int n = 0;
        for (int p = 0; p < env->nranks; p++) {
            if (p == env->rank)
                continue;
            CHK(ops->irecv(env->eps[p], NULL, 0, NULL, NULL, &reqs[n++]) == HCOMM_SUCCESS);
            CHK(ops->isend(env->eps[p], NULL, 0, &reqs[n++]) == HCOMM_SUCCESS);
        }
        wait_all(env, reqs, n, 10);
        for (int i = 0; i < n; i++)
            CHK(reqs[i].status == HCOMM_SUCCESS);
    }
}

static int child_main(int rank, int nranks, int rfd, const hc_params_t *prm, body_fn_t fn,
                      void *arg)
{
    pid_t          pids[MAXR];
    hc_peer_info_t info[MAXR];
    hc_tl_params_t tp;
    env_t          env = {.rank = rank, .nranks = nranks, .prm = prm};
    int            rc;

    g_rank = rank;
    CHK(read(rfd, pids, sizeof(pid_t) * (size_t)nranks) == (ssize_t)(sizeof(pid_t) * nranks));
    close(rfd);
    memset(info, 0, sizeof(info));
    for (int r = 0; r < nranks; r++) {
        strcpy(info[r].hostname, "localhost");
        info[r].host_hash = 0x5eedull;
        info[r].pid       = pids[r];
        info[r].rank      = r;
    }
    memset(&tp, 0, sizeof(tp));
    tp.rank    = rank;
    tp.nranks  = nranks;
    tp.timeout = 10;
    tp.self    = &info[rank];
    tp.params  = prm;
    memcpy(tp.cookie, g_cookie, sizeof(tp.cookie));
    CHK(ops->init(&env.ctx, &tp) == HCOMM_SUCCESS);
    for (int r = 0; r < nranks; r++) {
        if (r == rank)
            continue;
        CHK(ops->reachable(&info[rank], &info[r]));
        CHK(ops->connect(env.ctx, &info[r], NULL, 0, &env.eps[r]) == HCOMM_SUCCESS);
    }
    rc = fn(&env, arg);
    ops->fini(env.ctx);
    return rc;
}

static void new_cookie(void)
{
    assert_int_equal(getrandom(g_cookie, sizeof(g_cookie), 0), (ssize_t)sizeof(g_cookie));
}

/* Entries in /dev/shm that carry the current cookie. */
static int shm_leftovers(void)
{
    char           prefix[32];
    int            n = 0;
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;

    if (d == NULL)
        return 0;
    strcpy(prefix, "hcomm-");
    for (int i = 0; i < 8; i++)
        snprintf(prefix + 6 + 2 * i, 3, "%02x", g_cookie[i]);
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            fprintf(stderr, "left in /dev/shm: %s\n", e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

/* Reaps the ranks (promptly: a zombie still answers kill(pid, 0)); kills them
 * all after limit seconds. Returns 0, SKIP_CODE, or 1 on any failure. */
static int reap_ranks(const pid_t *pids, int nranks, int victim, double limit)
{
    double deadline = now_s() + limit;
    int    left = nranks, result = 0, status;

    while (left > 0) {
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            int r = 0;
            while (r < nranks && pids[r] != pid)
                r++;
            if (r == nranks)
                continue;
            left--;
            if (r == victim && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                continue;
            if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_CODE && result == 0)
                result = SKIP_CODE;
            else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "rank %d failed (status 0x%x)\n", r, status);
                result = 1;
            }
            continue;
        }
        if (now_s() > deadline) {
            fprintf(stderr, "ranks still running after %.0f s: killed\n", limit);
            for (int r = 0; r < nranks; r++)
                kill(pids[r], SIGKILL);
            while (waitpid(-1, &status, 0) > 0)
                ;
            return 1;
        }
        usleep(1000);
    }
    return result;
}

static int run_ranks(int nranks, const hc_params_t *prm, body_fn_t fn, void *arg, int victim)
{
    int   fds[MAXR][2];
    pid_t pids[MAXR];
    int   rc;

    new_cookie();
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < nranks; r++) {
        assert_int_equal(pipe(fds[r]), 0);
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            for (int q = 0; q <= r; q++)
                close(fds[q][1]);
            rc = child_main(r, nranks, fds[r][0], prm, fn, arg);
            fflush(stdout);
            _exit(rc);
        }
        close(fds[r][0]);
    }
    for (int r = 0; r < nranks; r++) {
        assert_int_equal(write(fds[r][1], pids, sizeof(pid_t) * (size_t)nranks),
                         (ssize_t)(sizeof(pid_t) * (size_t)nranks));
        close(fds[r][1]);
    }
    rc = reap_ranks(pids, nranks, victim, 120);
    assert_int_equal(shm_leftovers(), 0);
    return rc;
}

static void expect_ranks(int nranks, const hc_params_t *prm, body_fn_t fn, void *arg, int victim)
{
    int rc = run_ranks(nranks, prm, fn, arg, victim);
    if (rc == SKIP_CODE)
        skip();
    assert_int_equal(rc, 0);
}

/* ---- bodies, run by every rank ---- */

/* Every rank sends each size to every other rank at once and checks what it gets. */
static int body_sizes(env_t *env, void *arg)
{
    uint64_t    ring    = env->ctx->ring_bytes;
    size_t      sizes[] = {0, 1, 63, 64, 65, 4096, ring - 1, ring, ring + 1, 8 * MIB + 3};
    int         nsizes  = (int)(sizeof(sizes) / sizeof(sizes[0]));
    hc_tl_req_t reqs[2 * MAXR];
    uint8_t    *sbuf[MAXR], *rbuf[MAXR];

    (void)arg;
    for (int k = 0; k < nsizes; k++) {
        size_t len = sizes[k];
        int    n   = 0;
        for (int p = 0; p < env->nranks; p++) {
            if (p == env->rank)
                continue;
            sbuf[p] = malloc(len + 1);
            rbuf[p] = malloc(len + 1);
            CHK(sbuf[p] != NULL && rbuf[p] != NULL);
            fill(sbuf[p], len, env->rank, p, k);
            memset(rbuf[p], 0xa5, len + 1);
            CHK(ops->irecv(env->eps[p], rbuf[p], len, NULL, NULL, &reqs[n++]) == HCOMM_SUCCESS);
            CHK(ops->isend(env->eps[p], sbuf[p], len, &reqs[n++]) == HCOMM_SUCCESS);
        }
        wait_all(env, reqs, n, 60);
        for (int i = 0; i < n; i++)
            CHK(reqs[i].status == HCOMM_SUCCESS && reqs[i].done == len);
        for (int p = 0; p < env->nranks; p++) {
            if (p == env->rank)
                continue;
            CHK(check(rbuf[p], len, p, env->rank, k));
            CHK(rbuf[p][len] == 0xa5); /* nothing written past the end */
            free(sbuf[p]);
            free(rbuf[p]);
        }
    }
    return 0;
}

/* Many small messages of varying sizes in a row, a window of them in flight. */
static int body_many(env_t *env, void *arg)
{
    enum { NMSG = 20000, WIN = 128, MAXLEN = 300 };
    static hc_tl_req_t reqs[2 * MAXR * WIN];
    uint8_t           *sbuf = malloc((size_t)MAXR * WIN * MAXLEN);
    uint8_t           *rbuf = malloc((size_t)MAXR * WIN * MAXLEN);

    (void)arg;
    CHK(sbuf != NULL && rbuf != NULL);
    for (int base = 0; base < NMSG; base += WIN) {
        int n = 0;
        for (int p = 0; p < env->nranks; p++) {
            if (p == env->rank)
                continue;
            for (int w = 0; w < WIN; w++) {
                int      m   = base + w;
                size_t   len = (size_t)(m * 7) % MAXLEN;
                uint8_t *s   = sbuf + ((size_t)p * WIN + (size_t)w) * MAXLEN;
                uint8_t *r   = rbuf + ((size_t)p * WIN + (size_t)w) * MAXLEN;
                fill(s, len, env->rank, p, m);
                CHK(ops->irecv(env->eps[p], r, len, NULL, NULL, &reqs[n++]) == HCOMM_SUCCESS);
                CHK(ops->isend(env->eps[p], s, len, &reqs[n++]) == HCOMM_SUCCESS);
            }
        }
        wait_all(env, reqs, n, 60);
        for (int i = 0; i < n; i++)
            CHK(reqs[i].status == HCOMM_SUCCESS);
        for (int p = 0; p < env->nranks; p++) {
            if (p == env->rank)
                continue;
            for (int w = 0; w < WIN; w++) {
                int    m   = base + w;
                size_t len = (size_t)(m * 7) % MAXLEN;
                CHK(check(rbuf + ((size_t)p * WIN + (size_t)w) * MAXLEN, len, p, env->rank, m));
            }
        }
    }
    free(sbuf);
    free(rbuf);
    return 0;
}

typedef struct {
    size_t   next; /* the offset the next piece must start at */
    uint64_t sum;  /* position-weighted checksum */
    int      pieces;
} sink_state_t;

static void sink_fn(void *arg, size_t off, const void *data, size_t len)
{
    sink_state_t  *st = arg;
    const uint8_t *p  = data;

    CHK(off == st->next && len > 0);
    for (size_t i = 0; i < len; i++)
        st->sum += (uint64_t)p[i] * (off + i + 1);
    st->next += len;
    st->pieces++;
}

/* Rank 0 sends, rank 1 receives through a sink and checksums the pieces. */
static int body_sink(env_t *env, void *arg)
{
    size_t sizes[] = {0, 1000, env->ctx->ring_bytes + 1, 8 * MIB + 3};

    (void)arg;
    sync_all(env);
    for (int k = 0; k < 4; k++) {
        size_t       len = sizes[k];
        uint8_t     *buf = malloc(len + 1);
        hc_tl_req_t  req;
        sink_state_t st   = {0, 0, 0};
        uint64_t     want = 0;

        CHK(buf != NULL);
        fill(buf, len, 0, 1, k);
        if (env->rank == 0) {
            CHK(ops->isend(env->eps[1], buf, len, &req) == HCOMM_SUCCESS);
        } else {
            for (size_t i = 0; i < len; i++)
                want += (uint64_t)buf[i] * (i + 1);
            CHK(ops->irecv(env->eps[0], NULL, len, sink_fn, &st, &req) == HCOMM_SUCCESS);
        }
        wait_all(env, &req, 1, 60);
        CHK(req.status == HCOMM_SUCCESS);
        if (env->rank == 1) {
            CHK(st.next == len && st.sum == want);
            printf("  sink: %zu bytes in %d pieces\n", len, st.pieces);
        }
        free(buf);
    }
    return 0;
}

/* 8 MiB both ways; arg says whether single copy must (1) or must not (0) be used. */
static int body_path(env_t *env, void *arg)
{
    int         want_cma = *(const int *)arg;
    int         peer     = 1 - env->rank;
    hc_tl_ep_t *ep       = env->eps[peer];
    size_t      len      = 8 * MIB + 3;
    uint8_t    *s = malloc(len), *r = malloc(len);
    hc_tl_req_t reqs[2];

    CHK(s != NULL && r != NULL);
    sync_all(env);
    if (want_cma && atomic_load(&ep->tx.ctl->cma_ok) != HC_SHM_CMA_YES) {
        printf("  skip: process_vm_readv between the ranks is not permitted here\n");
        return SKIP_CODE;
    }
    fill(s, len, env->rank, peer, 5);
    CHK(ops->irecv(ep, r, len, NULL, NULL, &reqs[0]) == HCOMM_SUCCESS);
    CHK(ops->isend(ep, s, len, &reqs[1]) == HCOMM_SUCCESS);
    wait_all(env, reqs, 2, 60);
    CHK(reqs[0].status == HCOMM_SUCCESS && reqs[1].status == HCOMM_SUCCESS);
    CHK(check(r, len, peer, env->rank, 5));
    CHK(want_cma ? (ep->n_cma_tx == 1 && ep->n_cma_rx == 1) : (ep->n_cma_tx + ep->n_cma_rx == 0));
    free(s);
    free(r);
    return 0;
}

/* Rank 1 posts a receive shorter than the message. */
static int body_mismatch(env_t *env, void *arg)
{
    uint8_t     buf[100];
    hc_tl_req_t req, other;

    (void)arg;
    sync_all(env); /* rank 0 must not leave before rank 1 has the segment */
    memset(buf, 1, sizeof(buf));
    if (env->rank == 0) {
        CHK(ops->isend(env->eps[1], buf, 100, &req) == HCOMM_SUCCESS);
        wait_all(env, &req, 1, 10);
        CHK(req.status == HCOMM_SUCCESS);
        return 0;
    }
    CHK(ops->irecv(env->eps[0], buf, 50, NULL, NULL, &req) == HCOMM_SUCCESS);
    wait_all(env, &req, 1, 10);
    CHK(req.status == HCOMM_ERR_PROTOCOL);
    CHK(ops->ep_status(env->eps[0]) == HCOMM_ERR_PROTOCOL);
    CHK(ops->irecv(env->eps[0], buf, 50, NULL, NULL, &other) != HCOMM_SUCCESS);
    CHK(ops->isend(env->eps[0], buf, 50, &other) != HCOMM_SUCCESS);
    return 0;
}

/* Rank 1 kills itself; rank 0's pending receive and send must fail fast. */
static int body_kill(env_t *env, void *arg)
{
    size_t      len = 8 * MIB;
    uint8_t    *big = calloc(1, len), small[100];
    hc_tl_req_t reqs[2], later;
    double      t0, dt;

    (void)arg;
    CHK(big != NULL);
    sync_all(env);
    if (env->rank == 1)
        raise(SIGKILL);
    t0 = now_s();
    CHK(ops->irecv(env->eps[1], small, sizeof(small), NULL, NULL, &reqs[0]) == HCOMM_SUCCESS);
    CHK(ops->isend(env->eps[1], big, len, &reqs[1]) == HCOMM_SUCCESS);
    wait_all(env, reqs, 2, 10);
    dt = now_s() - t0;
    printf("  peer death noticed after %.3f s\n", dt);
    CHK(reqs[0].status == HCOMM_ERR_REMOTE && reqs[1].status == HCOMM_ERR_REMOTE);
    CHK(dt < 1.0);
    CHK(ops->ep_status(env->eps[1]) == HCOMM_ERR_REMOTE);
    CHK(ops->isend(env->eps[1], small, 1, &later) == HCOMM_ERR_REMOTE);
    CHK(ops->irecv(env->eps[1], small, 1, NULL, NULL, &later) == HCOMM_ERR_REMOTE);
    free(big);
    return 0;
}

/* Rank 0 sends and leaves at once; rank 1 still gets what was sent, then an
 * error for a message that will never come. */
static int body_drain(env_t *env, void *arg)
{
    enum { NMSG = 4 };
    uint8_t     buf[NMSG][5000];
    hc_tl_req_t reqs[NMSG], late;

    (void)arg;
    sync_all(env);
    for (int i = 0; i < NMSG; i++) {
        size_t len = 1000u * (size_t)(i + 1);
        if (env->rank == 0) {
            fill(buf[i], len, 0, 1, i);
            CHK(ops->isend(env->eps[1], buf[i], len, &reqs[i]) == HCOMM_SUCCESS);
        } else {
            CHK(ops->irecv(env->eps[0], buf[i], len, NULL, NULL, &reqs[i]) == HCOMM_SUCCESS);
        }
    }
    if (env->rank == 1)
        usleep(300000); /* rank 0 is long gone when rank 1 starts reading */
    wait_all(env, reqs, NMSG, 10);
    for (int i = 0; i < NMSG; i++) {
        CHK(reqs[i].status == HCOMM_SUCCESS);
        CHK(env->rank == 0 || check(buf[i], 1000u * (size_t)(i + 1), 0, 1, i));
    }
    if (env->rank == 1) {
        /* Refused at once if the drained endpoint already failed, else fails soon. */
        hcomm_status_t st = ops->irecv(env->eps[0], buf[0], 10, NULL, NULL, &late);
        CHK(st == HCOMM_SUCCESS || st == HCOMM_ERR_REMOTE);
        if (st == HCOMM_SUCCESS) {
            wait_all(env, &late, 1, 2);
            CHK(late.status == HCOMM_ERR_REMOTE);
        }
        CHK(ops->ep_status(env->eps[0]) == HCOMM_ERR_REMOTE);
    }
    return 0;
}

/* Rank 0 streams to rank 1; rank 1 prints the rate. */
static void stream(env_t *env, uint8_t *buf, size_t len, int reps)
{
    hc_tl_req_t reqs[32];

    for (int i = 0; i < reps; i++)
        CHK((env->rank == 0
                 ? ops->isend(env->eps[1], buf, len, &reqs[i])
                 : ops->irecv(env->eps[0], buf, len, NULL, NULL, &reqs[i])) == HCOMM_SUCCESS);
    wait_all(env, reqs, reps, 120);
    for (int i = 0; i < reps; i++)
        CHK(reqs[i].status == HCOMM_SUCCESS);
}

static int body_rate(env_t *env, void *arg)
{
    const char *label  = arg;
    size_t      lens[] = {8 * MIB, 64 * MIB};
    int         reps[] = {32, 4};
    uint8_t    *buf    = malloc(64 * MIB);

    CHK(buf != NULL);
    memset(buf, 3, 64 * MIB);
    for (int k = 0; k < 2; k++) {
        double t0;
        stream(env, buf, lens[k], 1); /* warm-up */
        sync_all(env);
        t0 = now_s();
        stream(env, buf, lens[k], reps[k]);
        if (env->rank == 1)
            printf("  shm %s path: %3zu MiB messages: %.2f GB/s\n", label, lens[k] / MIB,
                   (double)lens[k] * reps[k] / (now_s() - t0) / 1e9);
    }
    free(buf);
    return 0;
}

/* ---- tests ---- */

static hc_params_t params_with(size_t ring, size_t cma_min)
{
    hc_params_t prm    = *hc_params_get();
    prm.shm_ring_bytes = ring;
    prm.shm_cma_min    = cma_min;
    return prm;
}

static void test_sizes_2(void **state)
{
    hc_params_t prm = params_with(2 * MIB, 256 << 10);
    (void)state;
    expect_ranks(2, &prm, body_sizes, NULL, -1);
}

static void test_sizes_2_copy_small_ring(void **state)
{
    hc_params_t prm = params_with(1, 0); /* rounds up to 64 KiB */
    (void)state;
    expect_ranks(2, &prm, body_sizes, NULL, -1);
}

static void test_sizes_3(void **state)
{
    hc_params_t prm = params_with(64 << 10, 256 << 10);
    (void)state;
    expect_ranks(3, &prm, body_sizes, NULL, -1);
}

static void test_many_small(void **state)
{
    hc_params_t prm = params_with(64 << 10, 256 << 10);
    (void)state;
    expect_ranks(3, &prm, body_many, NULL, -1);
}

static void test_sink_copy(void **state)
{
    hc_params_t prm = params_with(64 << 10, 0);
    (void)state;
    expect_ranks(2, &prm, body_sink, NULL, -1);
}

static void test_sink_cma(void **state)
{
    hc_params_t prm = params_with(64 << 10, 4096);
    (void)state;
    expect_ranks(2, &prm, body_sink, NULL, -1);
}

static void test_cma_path(void **state)
{
    hc_params_t prm = params_with(2 * MIB, 256 << 10);
    int         yes = 1;
    (void)state;
    expect_ranks(2, &prm, body_path, &yes, -1);
}

static void test_copy_path(void **state)
{
    hc_params_t prm = params_with(2 * MIB, 0);
    int         no  = 0;
    (void)state;
    expect_ranks(2, &prm, body_path, &no, -1);
}

static void test_length_mismatch(void **state)
{
    hc_params_t prm = params_with(2 * MIB, 256 << 10);
    (void)state;
    expect_ranks(2, &prm, body_mismatch, NULL, -1);
}

static void test_peer_killed(void **state)
{
    hc_params_t prm = params_with(2 * MIB, 256 << 10);
    (void)state;
    expect_ranks(2, &prm, body_kill, NULL, 1);
}

static void test_peer_closed_drain(void **state)
{
    hc_params_t prm = params_with(64 << 10, 0);
    (void)state;
    expect_ranks(2, &prm, body_drain, NULL, -1);
}

static void test_rate(void **state)
{
    hc_params_t copy = params_with(2 * MIB, 0);
    hc_params_t cma  = params_with(2 * MIB, 256 << 10);
    (void)state;
    expect_ranks(2, &copy, body_rate, "copy", -1);
    expect_ranks(2, &cma, body_rate, "single-copy", -1);
}

/* ---- tests inside one process: two contexts play both ranks ---- */

static void local_info(hc_peer_info_t *info)
{
    memset(info, 0, 2 * sizeof(*info));
    for (int r = 0; r < 2; r++) {
        strcpy(info[r].hostname, "localhost");
        info[r].host_hash = 0x5eedull;
        info[r].pid       = getpid();
        info[r].rank      = r;
    }
}

static hcomm_status_t local_ctx(int rank, const uint8_t *cookie, double timeout,
                                const hc_params_t *prm, const hc_peer_info_t *info,
                                hc_tl_ctx_t **ctx)
{
    hc_tl_params_t tp;

    memset(&tp, 0, sizeof(tp));
    tp.rank    = rank;
    tp.nranks  = 2;
    tp.timeout = timeout;
    tp.self    = &info[rank];
    tp.params  = prm;
    memcpy(tp.cookie, cookie, sizeof(tp.cookie));
    return ops->init(ctx, &tp);
}

static void test_wrong_cookie(void **state)
{
    hc_params_t    prm = params_with(64 << 10, 256 << 10);
    hc_peer_info_t info[2];
    uint8_t        other[16];
    hc_tl_ctx_t   *a, *b;
    hc_tl_ep_t    *ea, *eb;

    (void)state;
    local_info(info);
    new_cookie();
    memcpy(other, g_cookie, sizeof(other));
    other[15] ^= 1; /* same segment name, different secret */
    assert_int_equal(local_ctx(0, g_cookie, 1, &prm, info, &a), HCOMM_SUCCESS);
    assert_int_equal(local_ctx(1, other, 1, &prm, info, &b), HCOMM_SUCCESS);
    assert_int_equal(ops->connect(a, &info[1], NULL, 0, &ea), HCOMM_SUCCESS);
    assert_int_equal(ops->connect(b, &info[0], NULL, 0, &eb), HCOMM_ERR_AUTH);
    ops->fini(b);
    ops->fini(a); /* the peer never attached: a removes the name */
    assert_int_equal(shm_leftovers(), 0);
}

static void test_connect_timeout(void **state)
{
    hc_params_t    prm = params_with(64 << 10, 256 << 10);
    hc_peer_info_t info[2];
    hc_tl_ctx_t   *b;
    hc_tl_ep_t    *eb;
    double         t0, dt;

    (void)state;
    local_info(info);
    new_cookie();
    assert_int_equal(local_ctx(1, g_cookie, 0.2, &prm, info, &b), HCOMM_SUCCESS);
    t0 = now_s();
    assert_int_equal(ops->connect(b, &info[0], NULL, 0, &eb), HCOMM_ERR_TIMEOUT);
    dt = now_s() - t0;
    assert_true(dt >= 0.15 && dt < 2.0);
    ops->fini(b);
    assert_int_equal(shm_leftovers(), 0);
}

/* A segment left by a crashed run with the same cookie is replaced. */
static void test_stale_segment(void **state)
{
    hc_params_t    prm = params_with(64 << 10, 4096);
    hc_peer_info_t info[2];
    hc_tl_ctx_t   *a, *b;
    hc_tl_ep_t    *ea, *eb;
    char           name[64];
    size_t         len = MIB + 5;
    uint8_t       *s = malloc(len), *r = malloc(len);
    hc_tl_req_t    reqs[2];
    double         deadline;
    int            fd;

    (void)state;
    assert_non_null(s);
    assert_non_null(r);
    local_info(info);
    new_cookie();
    strcpy(name, "/hcomm-");
    for (int i = 0; i < 8; i++)
        snprintf(name + 7 + 2 * i, 3, "%02x", g_cookie[i]);
    strcat(name, "-0-1");
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 8192), 0);
    close(fd);

    assert_int_equal(local_ctx(0, g_cookie, 2, &prm, info, &a), HCOMM_SUCCESS);
    assert_int_equal(local_ctx(1, g_cookie, 2, &prm, info, &b), HCOMM_SUCCESS);
    assert_int_equal(ops->connect(a, &info[1], NULL, 0, &ea), HCOMM_SUCCESS);
    assert_int_equal(ops->connect(b, &info[0], NULL, 0, &eb), HCOMM_SUCCESS);
    assert_int_equal(shm_leftovers(), 0); /* b unlinked the name once mapped */
    fill(s, len, 0, 1, 9);
    assert_int_equal(ops->isend(ea, s, len, &reqs[0]), HCOMM_SUCCESS);
    assert_int_equal(ops->irecv(eb, r, len, NULL, NULL, &reqs[1]), HCOMM_SUCCESS);
    deadline = now_s() + 10;
    while ((reqs[0].status == HCOMM_IN_PROGRESS || reqs[1].status == HCOMM_IN_PROGRESS) &&
           now_s() < deadline) {
        ops->progress(a);
        ops->progress(b);
    }
    assert_int_equal(reqs[0].status, HCOMM_SUCCESS);
    assert_int_equal(reqs[1].status, HCOMM_SUCCESS);
    assert_true(check(r, len, 0, 1, 9));
    ops->fini(b);
    ops->fini(a);
    free(s);
    free(r);
    assert_int_equal(shm_leftovers(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_2),
        cmocka_unit_test(test_sizes_2_copy_small_ring),
        cmocka_unit_test(test_sizes_3),
        cmocka_unit_test(test_many_small),
        cmocka_unit_test(test_sink_copy),
        cmocka_unit_test(test_sink_cma),
        cmocka_unit_test(test_cma_path),
        cmocka_unit_test(test_copy_path),
        cmocka_unit_test(test_length_mismatch),
        cmocka_unit_test(test_peer_killed),
        cmocka_unit_test(test_peer_closed_drain),
        cmocka_unit_test(test_wrong_cookie),
        cmocka_unit_test(test_connect_timeout),
        cmocka_unit_test(test_stale_segment),
        cmocka_unit_test(test_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
