/* tl_suite.c - worlds of forked ranks for the transport suite, and the helpers
 * their bodies share. See tl_suite.h. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "tl_suite.h"

#define BOARD_SLOTS 8
#define RELAY_S 20.0 /* the address relay; ranks are slower only when broken */

struct hc_tlt_board {
    _Atomic int64_t slot[HC_TLT_MAXR][BOARD_SLOTS];
};

int            hc_tlt_rank = -1;
static char    g_label[64] = "?";
static uint8_t g_cookie[16]; /* the current world's */

void hc_tlt_set_label(const char *variant, const char *name)
{
    snprintf(g_label, sizeof(g_label), "%s %s", variant, name);
}

_Noreturn void hc_tlt_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[%s] rank %d: %s:%d: ", g_label, hc_tlt_rank, file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stdout);
    _exit(1);
}

double hc_tlt_now(void)
{
    return hc_clock_now();
}

hc_params_t hc_tlt_params(const hc_tlt_variant_t *v)
{
    hc_params_t prm = *hc_params_get();

    if (v->tune != NULL)
        v->tune(&prm);
    return prm;
}

int hc_tlt_fd_count(void)
{
    DIR           *d = opendir("/proc/self/fd");
    struct dirent *e;
    int            n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

/* ---- rank side ---- */

/* The longest a single connect() call may take: it never waits for the peer,
 * at most for its own kernel (a dial to a listener that is there). */
#define CONNECT_CALL_MAX 0.2

hcomm_status_t hc_tlt_connect(hc_tlt_env_t *env, int q, hc_tl_ep_t **ep)
{
    double limit = hc_tlt_now() + env->tp.timeout + 5;
    for (;;) {
        double         t0 = hc_tlt_now();
        hcomm_status_t st =
            env->ops->connect(env->ctx, &env->info[q], env->addr[q], env->addrlen[q], ep);
        if (hc_tlt_now() - t0 > CONNECT_CALL_MAX)
            hc_tlt_fail(__FILE__, __LINE__, "connect to rank %d took %.3f s: it waited", q,
                        hc_tlt_now() - t0);
        if (st != HCOMM_IN_PROGRESS)
            return st;
        if (hc_tlt_now() > limit)
            hc_tlt_fail(__FILE__, __LINE__, "connect to rank %d still in progress %.0f s after "
                        "its timeout", q, env->tp.timeout + 5);
        if (env->ops->progress(env->ctx) == 0)
            usleep(1000);
    }
}

void hc_tlt_connect_all(hc_tlt_env_t *env)
{
    for (int q = 0; q < env->nranks; q++) {
        if (q == env->rank)
            continue;
        HC_TLT_CHK(env->ops->reachable(env->ctx, &env->info[env->rank], &env->info[q],
                                       env->addr[q], env->addrlen[q]));
        HC_TLT_CHK_ST(hc_tlt_connect(env, q, &env->eps[q]), HCOMM_SUCCESS);
        HC_TLT_CHK(env->eps[q] != NULL);
    }
}

int hc_tlt_wait(hc_tlt_env_t *env, hc_tl_req_t *reqs, int n, double secs)
{
    double deadline = hc_tlt_now() + secs;

    for (int i = 0; i < n;) {
        if (reqs[i].status != HCOMM_IN_PROGRESS) {
            i++;
            continue;
        }
        if (hc_tlt_now() > deadline)
            return -1;
        if (env->ops->progress(env->ctx) == 0)
            sched_yield(); /* ranks may outnumber the cores */
    }
    return 0;
}

void hc_tlt_wait_ok(hc_tlt_env_t *env, hc_tl_req_t *reqs, int n, double secs)
{
    if (hc_tlt_wait(env, reqs, n, secs) != 0)
        hc_tlt_fail(__FILE__, __LINE__, "requests not done after %.0f s", secs);
    for (int i = 0; i < n; i++)
        HC_TLT_CHK_ST(reqs[i].status, HCOMM_SUCCESS);
}

void hc_tlt_sync(hc_tlt_env_t *env)
{
    hc_tl_req_t reqs[2 * HC_TLT_MAXR];

    for (int round = 0; round < 2; round++) {
        int n = 0;
        for (int q = 0; q < env->nranks; q++) {
            if (q == env->rank)
                continue;
            HC_TLT_CHK_ST(env->ops->irecv(env->eps[q], NULL, 0, NULL, NULL, &reqs[n++]),
                          HCOMM_SUCCESS);
            HC_TLT_CHK_ST(env->ops->isend(env->eps[q], NULL, 0, &reqs[n++]), HCOMM_SUCCESS);
        }
        hc_tlt_wait_ok(env, reqs, n, 20);
    }
}

void hc_tlt_post(hc_tlt_env_t *env, int slot, int64_t val)
{
    atomic_store(&env->board->slot[env->rank][slot], val);
}

int64_t hc_tlt_peek(hc_tlt_env_t *env, int rank, int slot)
{
    return atomic_load(&env->board->slot[rank][slot]);
}

int64_t hc_tlt_await(hc_tlt_env_t *env, int rank, int slot, double secs)
{
    double  deadline = hc_tlt_now() + secs;
    int64_t val;

    while ((val = atomic_load(&env->board->slot[rank][slot])) == 0) {
        if (hc_tlt_now() > deadline)
            hc_tlt_fail(__FILE__, __LINE__, "rank %d did not post slot %d within %.0f s", rank,
                        slot, secs);
        usleep(1000);
    }
    return val;
}

void hc_tlt_await_gone(hc_tlt_env_t *env, int rank)
{
    double deadline = hc_tlt_now() + 10;

    /* The parent reaps within a millisecond or so; a zombie still answers. */
    while (kill(env->info[rank].pid, 0) == 0 || errno != ESRCH) {
        if (hc_tlt_now() > deadline)
            hc_tlt_fail(__FILE__, __LINE__, "rank %d still there after 10 s", rank);
        usleep(1000);
    }
}

/* Blocking read or write of len bytes, bounded by a deadline: 0 or -1. */
static int xfer(int fd, void *buf, size_t len, int out, double deadline)
{
    uint8_t *p = buf;

    while (len > 0) {
        struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        ssize_t       n;

        if (hc_tlt_now() > deadline)
            return -1;
        if (poll(&pf, 1, 100) <= 0)
            continue;
        n = out ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Publishes this rank's address, then learns every rank's pid and address. */
static void rank_relay(hc_tlt_env_t *env, int up, int down)
{
    double deadline = hc_tlt_now() + RELAY_S;
    int    r        = env->rank;
    size_t len      = HC_TL_ADDR_MAX;

    HC_TLT_CHK_ST(env->ops->address(env->ctx, env->addr[r], &len), HCOMM_SUCCESS);
    HC_TLT_CHK(len <= HC_TL_ADDR_MAX);
    HC_TLT_CHK(xfer(up, &len, sizeof(len), 1, deadline) == 0);
    HC_TLT_CHK(xfer(up, env->addr[r], len, 1, deadline) == 0);
    for (int q = 0; q < env->nranks; q++) {
        int32_t pid;
        HC_TLT_CHK(xfer(down, &pid, sizeof(pid), 0, deadline) == 0);
        HC_TLT_CHK(xfer(down, &env->addrlen[q], sizeof(size_t), 0, deadline) == 0);
        HC_TLT_CHK(env->addrlen[q] <= HC_TL_ADDR_MAX);
        HC_TLT_CHK(xfer(down, env->addr[q], env->addrlen[q], 0, deadline) == 0);
        env->info[q].pid = pid;
    }
}

static int rank_main(const hc_tlt_variant_t *v, const hc_tlt_world_t *w, const hc_params_t *prm,
                     hc_tlt_board_t *board, int r, int up, int down)
{
    /* cmocka's handlers would take a crashed rank back into the test runner;
     * SIGPIPE is the parent's to ignore, a rank must die of it (tcp_send_dead) */
    static const int    sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGPIPE};
    static hc_tlt_env_t env_s; /* a fresh copy of the parent's zeros in each rank */
    hc_tlt_env_t       *env = &env_s;
    int                 nfd, rc;

    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], SIG_DFL);
    hc_tlt_rank = r;
    env->v      = v;
    env->ops    = v->ops;
    env->rank   = r;
    env->nranks = w->nranks;
    env->prm    = *prm;
    env->board  = board;
    for (int q = 0; q < w->nranks; q++) {
        gethostname(env->info[q].hostname, sizeof(env->info[q].hostname) - 1);
        env->info[q].host_hash = 0x5eedull; /* one host: shm applies */
        env->info[q].rank      = q;
        memset(env->info[q].nonce, 0x30 + q, sizeof(env->info[q].nonce)); /* each its own */
    }
    env->tp.rank    = r;
    env->tp.nranks  = w->nranks;
    env->tp.bind_ip = w->bind_ip != NULL ? w->bind_ip : "127.0.0.1";
    env->tp.timeout = w->timeout > 0 ? w->timeout : 10;
    env->tp.self    = &env->info[r];
    env->tp.params  = &env->prm;
    memcpy(env->tp.cookie, g_cookie, sizeof(g_cookie));
    if (w->bad_cookie & (1u << r))
        env->tp.cookie[15] ^= 0x5a;

    nfd = hc_tlt_fd_count();
    HC_TLT_CHK_ST(v->ops->init(&env->ctx, &env->tp), HCOMM_SUCCESS);
    rank_relay(env, up, down);
    if (!w->no_connect)
        hc_tlt_connect_all(env);
    rc = w->body(env, w->arg);
    if (env->ctx != NULL)
        v->ops->fini(env->ctx);
    /* fini closes whatever init and connect opened */
    if (hc_tlt_fd_count() != nfd)
        hc_tlt_fail(__FILE__, __LINE__, "%d descriptors open after fini, %d before init",
                    hc_tlt_fd_count(), nfd);
    close(up);
    close(down);
    return rc;
}

/* ---- parent side ---- */

typedef struct world_run {
    int   n;
    pid_t pid[HC_TLT_MAXR];
    int   up[HC_TLT_MAXR][2], down[HC_TLT_MAXR][2];
} world_run_t;

/* Reads each rank's address and sends every rank all pids and addresses. */
static int parent_relay(world_run_t *wr)
{
    double  deadline = hc_tlt_now() + RELAY_S;
    uint8_t addr[HC_TLT_MAXR][HC_TL_ADDR_MAX];
    size_t  len[HC_TLT_MAXR];

    for (int r = 0; r < wr->n; r++) {
        if (xfer(wr->up[r][0], &len[r], sizeof(size_t), 0, deadline) != 0 ||
            len[r] > HC_TL_ADDR_MAX || xfer(wr->up[r][0], addr[r], len[r], 0, deadline) != 0) {
            fprintf(stderr, "[%s] no address from rank %d\n", g_label, r);
            return -1;
        }
    }
    for (int r = 0; r < wr->n; r++) {
        for (int q = 0; q < wr->n; q++) {
            int32_t pid = wr->pid[q];
            if (xfer(wr->down[r][1], &pid, sizeof(pid), 1, deadline) != 0 ||
                xfer(wr->down[r][1], &len[q], sizeof(size_t), 1, deadline) != 0 ||
                xfer(wr->down[r][1], addr[q], len[q], 1, deadline) != 0) {
                fprintf(stderr, "[%s] cannot send the addresses to rank %d\n", g_label, r);
                return -1;
            }
        }
    }
    return 0;
}

/* Judges how rank r ended: 0, HC_TLT_SKIP or 1. After the parent killed the
 * world (culled), a SIGKILL is its own and needs no message. */
static int judge(int r, int status, unsigned victims, int culled)
{
    int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;

    if (killed && culled)
        return 1;
    if (victims & (1u << r)) {
        if (killed)
            return 0;
        fprintf(stderr, "[%s] rank %d was to be killed, but ended with status 0x%x\n", g_label, r,
                status);
        return 1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == HC_TLT_SKIP)
        return HC_TLT_SKIP;
    if (WIFSIGNALED(status))
        fprintf(stderr, "[%s] rank %d killed by signal %d\n", g_label, r, WTERMSIG(status));
    else
        fprintf(stderr, "[%s] rank %d exited with %d\n", g_label, r, WEXITSTATUS(status));
    return 1;
}

/* Reaps every rank, promptly unless zombies: then the victims stay zombies,
 * as under a launcher busy elsewhere, until the other ranks have ended; kills
 * them all after limit seconds. */
static int parent_reap(world_run_t *wr, unsigned victims, int zombies, double limit, int result)
{
    double deadline = hc_tlt_now() + limit;
    int    left = 0, culled = 0, status, others = 0;

    for (int r = 0; r < wr->n; r++) {
        left += wr->pid[r] > 0;
        others += wr->pid[r] > 0 && !(victims & (1u << r));
    }
    while (left > 0) {
        int reaped = 0;
        for (int r = 0; r < wr->n; r++) {
            if (zombies && others > 0 && (victims & (1u << r)) && !culled)
                continue;
            if (wr->pid[r] <= 0 || waitpid(wr->pid[r], &status, WNOHANG) != wr->pid[r])
                continue;
            others -= !(victims & (1u << r));
            int j = judge(r, status, victims, culled);
            if (j == 1 || (j == HC_TLT_SKIP && result == 0))
                result = j;
            wr->pid[r] = 0;
            left--;
            reaped = 1;
        }
        if (left > 0 && !reaped && (result == 1 || hc_tlt_now() > deadline)) {
            if (result != 1)
                fprintf(stderr, "[%s] ranks still running after %.0f s: killed\n", g_label, limit);
            for (int r = 0; r < wr->n; r++)
                if (wr->pid[r] > 0)
                    kill(wr->pid[r], SIGKILL);
            result = 1;
            culled = 1;
        }
        if (!reaped)
            usleep(500);
    }
    return result;
}

static int world_fork(const hc_tlt_variant_t *v, const hc_tlt_world_t *w, const hc_params_t *prm,
                      hc_tlt_board_t *board, world_run_t *wr)
{
    for (int r = 0; r < wr->n; r++) {
        wr->pid[r] = fork();
        if (wr->pid[r] < 0) {
            perror("fork");
            return -1;
        }
        if (wr->pid[r] == 0) {
            for (int q = 0; q < wr->n; q++) {
                close(wr->up[q][0]);
                close(wr->down[q][1]);
                if (q != r) {
                    close(wr->up[q][1]);
                    close(wr->down[q][0]);
                }
            }
            int rc = rank_main(v, w, prm, board, r, wr->up[r][1], wr->down[r][0]);
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
    }
    return 0;
}

int hc_tlt_run(const hc_tlt_variant_t *v, const hc_tlt_world_t *w)
{
    hc_params_t     prm = w->params != NULL ? *w->params : hc_tlt_params(v);
    world_run_t     wr  = {.n = w->nranks};
    hc_tlt_board_t *board;
    int             result = 0;

    assert_true(w->nranks >= 1 && w->nranks <= HC_TLT_MAXR);
    assert_int_equal(getrandom(g_cookie, sizeof(g_cookie), 0), (ssize_t)sizeof(g_cookie));
    board = mmap(NULL, sizeof(*board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(board != MAP_FAILED);
    for (int r = 0; r < wr.n; r++)
        assert_int_equal(pipe(wr.up[r]) | pipe(wr.down[r]), 0);
    fflush(NULL);
    if (world_fork(v, w, &prm, board, &wr) != 0)
        result = 1;
    for (int r = 0; r < wr.n; r++) {
        close(wr.up[r][1]);
        close(wr.down[r][0]);
    }
    if (result == 0 && parent_relay(&wr) != 0)
        result = 1;
    for (int r = 0; r < wr.n; r++) {
        close(wr.up[r][0]);
        close(wr.down[r][1]);
    }
    result = parent_reap(&wr, w->victims, w->zombies, w->limit > 0 ? w->limit : 60, result);
    munmap(board, sizeof(*board));
    if (v->leftovers != NULL && v->leftovers(g_cookie) != 0) {
        fprintf(stderr, "[%s] the world left things behind\n", g_label);
        result = 1;
    }
    return result;
}

void hc_tlt_expect(const hc_tlt_variant_t *v, const hc_tlt_world_t *w)
{
    int rc = hc_tlt_run(v, w);

    if (rc == HC_TLT_SKIP)
        skip();
    assert_int_equal(rc, 0);
}
