/* tl_cases.c - the generic cases: what every transport must do, written once
 * over hc_tl_ops_t (transport.h is the contract they check). */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "tl_suite.h"

#define MIB HC_TLT_MIB
#define KIB ((size_t)1 << 10)
#define BIG (64 * MIB) /* more than any ring or socket buffer holds */

/* ---- 1. connect ---- */

/* Long enough that a loaded machine does not pass for waiting: 0.25 s (0.2
 * s allowed) failed ofi-tcp once in 20 runs beside a build, its connect
 * waiting 0.207 s on rxm's connection to a lower rank that had acted. */
#define STAGGER_S 0.5

/* Ranks enter connect() staggered, the lowest last (arg 1: a rank calls
 * again until its lower peers have acted) or first (arg 0: every lower rank
 * has acted already, and connect must not wait for the higher ones, still
 * asleep). No single call ever waits (hc_tlt_connect checks). */
static int body_connect(hc_tlt_env_t *env, void *arg)
{
    int          low_last = *(const int *)arg;
    int          late     = low_last ? env->nranks - 1 - env->rank : env->rank;
    const size_t sizes[]  = {0, 1, 100};
    double       t0;

    usleep((useconds_t)(late * STAGGER_S * 1e6));
    t0 = hc_tlt_now();
    hc_tlt_connect_all(env);
    if (!low_last && hc_tlt_now() - t0 > STAGGER_S * 0.8)
        hc_tlt_fail(__FILE__, __LINE__, "connect took %.3f s: it waited for a higher rank",
                    hc_tlt_now() - t0);
    /* shm's creator (the lower rank) says IN_PROGRESS until the peer maps
     * the segment; every other side is connected */
    for (int q = 0; q < env->nranks; q++) {
        int creator = strcmp(env->ops->name, "shm") == 0 && env->rank < q;
        if (q != env->rank && !(creator && env->ops->ep_status(env->eps[q]) == HCOMM_IN_PROGRESS))
            HC_TLT_CHK_ST(env->ops->ep_status(env->eps[q]), HCOMM_SUCCESS);
    }
    hc_tlt_sync(env);
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, 3, HC_TLT_PLAIN);
    return 0;
}

static void case_connect(const hc_tlt_variant_t *v)
{
    for (int n = 2; n <= 3; n++) {
        for (int low_last = 0; low_last < 2; low_last++) {
            hc_tlt_world_t w = {
                .nranks = n, .no_connect = 1, .body = body_connect, .arg = &low_last};
            hc_tlt_expect(v, &w);
        }
    }
}

/* ---- 2. ordered messages, every pair, both ways at once ---- */

static const size_t ordered_sizes[] = {
    0,       1,    7,       40,          41,           63,       64,
    65,      4095, 4096,    4097,        64 * KIB - 1, 64 * KIB, 64 * KIB + 1,
    MIB - 1, MIB,  MIB + 1, 8 * MIB + 3, BIG,
};

static int body_ordered(hc_tlt_env_t *env, void *arg)
{
    (void)arg;
    hc_tlt_exchange(env, HC_TLT_ALL, ordered_sizes,
                    (int)(sizeof(ordered_sizes) / sizeof(ordered_sizes[0])), HC_TLT_PLAIN);
    return 0;
}

static void case_ordered_2(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 2, .body = body_ordered};
    hc_tlt_expect(v, &w);
}

static void case_ordered_3(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 3, .body = body_ordered};
    hc_tlt_expect(v, &w);
}

/* ---- 3. receive into a sink ---- */

static int body_sink(hc_tlt_env_t *env, void *arg)
{
    static const size_t sizes[] = {0,       1,           40, 41, 1000, 4097, 64 * KIB + 1,
                                   MIB + 1, 8 * MIB + 3, BIG};
    int                 n       = (int)(sizeof(sizes) / sizeof(sizes[0]));

    (void)arg;
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, n, HC_TLT_SINK);
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, n, HC_TLT_MIXED);
    return 0;
}

static void case_sink(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 3, .body = body_sink};
    hc_tlt_expect(v, &w);
}

/* ---- 4. many outstanding requests ---- */

#define MANY_MAXLEN 301

typedef struct many_arg {
    int nmsg, win; /* messages per direction and peer; how many in flight */
} many_arg_t;

/* One direction with one peer: message m sits in slot m % win. */
typedef struct stream {
    int          peer, send;
    int          posted, done;
    hc_tl_req_t *req;
    uint8_t     *buf;
} stream_t;

static size_t many_len(int m)
{
    return (size_t)m * 37 % MANY_MAXLEN; /* 0 to 300: inline, ring and socket sizes */
}

static void many_post(hc_tlt_env_t *env, stream_t *s, int win)
{
    int         m   = s->posted++;
    size_t      len = many_len(m);
    uint8_t    *p   = s->buf + (size_t)(m % win) * MANY_MAXLEN;
    hc_tl_ep_t *ep  = env->eps[s->peer];

    if (s->send) {
        hc_tlt_fill(p, 0, len, hc_tlt_seed(env->rank, s->peer, m));
        HC_TLT_CHK_ST(env->ops->isend(ep, p, len, &s->req[m % win]), HCOMM_SUCCESS);
    } else {
        HC_TLT_CHK_ST(env->ops->irecv(ep, p, len, NULL, NULL, &s->req[m % win]), HCOMM_SUCCESS);
    }
}

/* Takes the stream's completed requests in order and posts the next ones;
 * behind the first pending request no later one may be complete. */
static void many_reap(hc_tlt_env_t *env, stream_t *s, const many_arg_t *a)
{
    while (s->done < s->posted && s->req[s->done % a->win].status != HCOMM_IN_PROGRESS) {
        int          m   = s->done;
        hc_tl_req_t *req = &s->req[m % a->win];
        size_t       len = many_len(m);
        uint8_t     *p   = s->buf + (size_t)(m % a->win) * MANY_MAXLEN;

        HC_TLT_CHK_ST(req->status, HCOMM_SUCCESS);
        HC_TLT_CHK(req->done == len);
        if (!s->send && hc_tlt_check(p, 0, len, hc_tlt_seed(s->peer, env->rank, m)) != len)
            hc_tlt_fail(__FILE__, __LINE__, "message %d from %d: wrong contents", m, s->peer);
        s->done++;
        if (s->posted < a->nmsg)
            many_post(env, s, a->win);
    }
    for (int k = s->done + 1; k < s->posted && k <= s->done + 64; k++)
        if (s->req[k % a->win].status != HCOMM_IN_PROGRESS)
            hc_tlt_fail(__FILE__, __LINE__, "%s %d with %d completed before %d",
                        s->send ? "send" : "receive", k, s->peer, s->done);
}

static int body_many(hc_tlt_env_t *env, void *arg)
{
    const many_arg_t *a = arg;
    stream_t          st[2 * HC_TLT_MAXR];
    int               ns       = 0, left;
    double            deadline = hc_tlt_now() + 60;

    for (int q = 0; q < env->nranks; q++) {
        for (int send = 0; q != env->rank && send < 2; send++) {
            stream_t *s = &st[ns++];
            *s          = (stream_t){.peer = q, .send = send};
            s->req      = calloc((size_t)a->win, sizeof(*s->req));
            s->buf      = malloc((size_t)a->win * MANY_MAXLEN);
            HC_TLT_CHK(s->req != NULL && s->buf != NULL);
        }
    }
    /* the whole first window of every stream, before any progress */
    for (int i = 0; i < ns; i++)
        while (st[i].posted < a->win && st[i].posted < a->nmsg)
            many_post(env, &st[i], a->win);
    do {
        HC_TLT_CHK(hc_tlt_now() < deadline);
        env->ops->progress(env->ctx);
        left = 0;
        for (int i = 0; i < ns; i++) {
            many_reap(env, &st[i], a);
            left += st[i].done < a->nmsg;
        }
    } while (left > 0);
    for (int i = 0; i < ns; i++) {
        free(st[i].req);
        free(st[i].buf);
    }
    return 0;
}

/* Old tcp test: everything queued at once. */
static void case_many_queued(const hc_tlt_variant_t *v)
{
    many_arg_t     a = {.nmsg = 20000, .win = 20000};
    hc_tlt_world_t w = {.nranks = 2, .body = body_many, .arg = &a};
    hc_tlt_expect(v, &w);
}

static void case_many_window(const hc_tlt_variant_t *v)
{
    many_arg_t     a = {.nmsg = 20000, .win = 256};
    hc_tlt_world_t w = {.nranks = 3, .body = body_many, .arg = &a};
    hc_tlt_expect(v, &w);
}

/* ---- 5. wrong cookie ---- */

#define COOKIE_T 1.0 /* seconds of connection set-up timeout */

/* Rank 1 presents another cookie. Each side's connect fails, or its receive
 * fails, within the timeout; at least one side refuses outright. */
static int body_cookie(hc_tlt_env_t *env, void *arg)
{
    int            peer = 1 - env->rank;
    hc_tl_ep_t    *ep   = NULL;
    double         t0   = hc_tlt_now();
    hcomm_status_t st   = hc_tlt_connect(env, peer, &ep);

    (void)arg;
    hc_tlt_post(env, 0, 1000 + st);
    if (st == HCOMM_SUCCESS) {
        uint8_t     b[2][8] = {{0}};
        hc_tl_req_t reqs[2];
        if (env->ops->irecv(ep, b[0], 8, NULL, NULL, &reqs[0]) != HCOMM_SUCCESS)
            reqs[0].status = HCOMM_ERR_REMOTE; /* refused at once: as good */
        if (env->ops->isend(ep, b[1], 8, &reqs[1]) != HCOMM_SUCCESS)
            reqs[1].status = HCOMM_ERR_REMOTE;
        HC_TLT_CHK(hc_tlt_wait(env, reqs, 2, COOKIE_T + 5) == 0);
        if (reqs[0].status == HCOMM_SUCCESS)
            hc_tlt_fail(__FILE__, __LINE__, "a message came through despite the wrong cookie");
        HC_TLT_CHK(env->ops->ep_status(ep) != HCOMM_SUCCESS);
    }
    if (hc_tlt_now() - t0 > COOKIE_T + 3)
        hc_tlt_fail(__FILE__, __LINE__, "took %.1f s with a %.1f s timeout", hc_tlt_now() - t0,
                    COOKIE_T);
    if (env->rank == 0 && st == HCOMM_SUCCESS)
        HC_TLT_CHK(hc_tlt_await(env, 1, 0, COOKIE_T + 10) != 1000 + HCOMM_SUCCESS);
    return 0;
}

static void case_wrong_cookie(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks     = 2,
                        .timeout    = COOKIE_T,
                        .bad_cookie = 1u << 1,
                        .no_connect = 1,
                        .body       = body_cookie};
    hc_tlt_expect(v, &w);
}

/* ---- 6. silent peer ---- */

#define SILENT_T 1.0

/* Rank 0 makes its context and never connects: rank 1, which needs it to act,
 * is told HCOMM_IN_PROGRESS at once by every call, and HCOMM_ERR_TIMEOUT once
 * the timeout has passed, not much later. */
static int body_silent(hc_tlt_env_t *env, void *arg)
{
    hc_tl_ep_t    *ep = NULL;
    double         t0, dt;
    hcomm_status_t st;

    (void)arg;
    if (env->rank == 0) {
        hc_tlt_await(env, 1, 0, SILENT_T + 20);
        return 0;
    }
    t0 = hc_tlt_now();
    st = hc_tlt_connect(env, 0, &ep);
    dt = hc_tlt_now() - t0;
    hc_tlt_post(env, 0, 1);
    HC_TLT_CHK_ST(st, HCOMM_ERR_TIMEOUT);
    if (dt < SILENT_T * 0.9 || dt > SILENT_T + 1.5)
        hc_tlt_fail(__FILE__, __LINE__, "timed out after %.2f s, the timeout is %.1f s", dt,
                    SILENT_T);
    return 0;
}

static void case_silent_peer(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 2, .timeout = SILENT_T, .no_connect = 1, .body = body_silent};
    hc_tlt_expect(v, &w);
}

/* ---- 7. killed peer ---- */

/* Rank 1 has a receive and a send pending with rank 0 when it kills it. */
static void killed_pending(hc_tlt_env_t *env)
{
    hc_tl_ep_t *ep  = env->eps[0];
    uint8_t    *big = hc_tlt_alloc(BIG), small[64];
    hc_tl_req_t reqs[2], later;
    double      t0, dt;

    HC_TLT_CHK(big != NULL);
    HC_TLT_CHK_ST(env->ops->irecv(ep, small, sizeof(small), NULL, NULL, &reqs[0]), HCOMM_SUCCESS);
    HC_TLT_CHK_ST(env->ops->isend(ep, big, BIG, &reqs[1]), HCOMM_SUCCESS);
    HC_TLT_CHK(hc_tlt_wait(env, reqs, 2, 0.05) == -1);
    HC_TLT_CHK(reqs[0].status == HCOMM_IN_PROGRESS && reqs[1].status == HCOMM_IN_PROGRESS);
    t0 = hc_tlt_now();
    HC_TLT_CHK(kill(env->info[0].pid, SIGKILL) == 0);
    HC_TLT_CHK(hc_tlt_wait(env, reqs, 2, 5) == 0);
    dt = hc_tlt_now() - t0;
    HC_TLT_CHK_ST(reqs[0].status, HCOMM_ERR_REMOTE);
    HC_TLT_CHK_ST(reqs[1].status, HCOMM_ERR_REMOTE);
    if (dt > 1.0)
        hc_tlt_fail(__FILE__, __LINE__, "the death was noticed after %.3f s", dt);
    HC_TLT_CHK_ST(env->ops->ep_status(ep), HCOMM_ERR_REMOTE);
    HC_TLT_CHK_ST(env->ops->isend(ep, small, 1, &later), HCOMM_ERR_REMOTE);
    HC_TLT_CHK_ST(env->ops->irecv(ep, small, 1, NULL, NULL, &later), HCOMM_ERR_REMOTE);
    hc_tlt_free(big, BIG);
}

/* Rank 2 has nothing pending with rank 0: progress still notices. */
static void killed_idle(hc_tlt_env_t *env)
{
    double      deadline = hc_tlt_now() + 5;
    hc_tl_req_t later;
    uint8_t     b;

    while ((env->ops->ep_status(env->eps[0]) == HCOMM_SUCCESS ||
            env->ops->ep_status(env->eps[0]) == HCOMM_IN_PROGRESS) &&
           hc_tlt_now() < deadline)
        if (env->ops->progress(env->ctx) == 0)
            usleep(1000);
    HC_TLT_CHK_ST(env->ops->ep_status(env->eps[0]), HCOMM_ERR_REMOTE);
    HC_TLT_CHK_ST(env->ops->irecv(env->eps[0], &b, 1, NULL, NULL, &later), HCOMM_ERR_REMOTE);
}

static int body_killed(hc_tlt_env_t *env, void *arg)
{
    static const size_t sizes[] = {1, 3 * MIB};
    double              deadline;

    (void)arg;
    hc_tlt_sync(env);
    if (env->rank == 0) {
        for (deadline = hc_tlt_now() + 30; hc_tlt_now() < deadline;)
            usleep(10000);
        hc_tlt_fail(__FILE__, __LINE__, "rank 0 was not killed");
    }
    if (env->rank == 1)
        killed_pending(env);
    else
        killed_idle(env);
    hc_tlt_exchange(env, 1u << 1 | 1u << 2, sizes, 2, HC_TLT_PLAIN); /* the others still work */
    return 0;
}

static void case_killed_peer(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 3, .victims = 1u << 0, .body = body_killed};
    hc_tlt_expect(v, &w);
}

/* The same with the dead rank left a zombie (kill(pid, 0) still finds it):
 * its death must still be seen within the second. */
static void case_zombie_peer(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 3, .victims = 1u << 0, .zombies = 1, .body = body_killed};
    hc_tlt_expect(v, &w);
}

/* ---- 8. length mismatch ---- */

/* Rank 0 sends 100 bytes; rank 1 posts 50 (and then 100): its endpoint fails
 * with HCOMM_ERR_PROTOCOL, and rank 0 sees the peer go. */
static int body_mismatch(hc_tlt_env_t *env, void *arg)
{
    uint8_t     buf[100] = {0};
    hc_tl_req_t reqs[2], later;
    hc_tl_ep_t *ep = env->eps[1 - env->rank];

    (void)arg;
    hc_tlt_sync(env);
    if (env->rank == 0) {
        HC_TLT_CHK_ST(env->ops->isend(ep, buf, 100, &reqs[0]), HCOMM_SUCCESS);
        hc_tlt_wait_ok(env, reqs, 1, 10);
        HC_TLT_CHK_ST(env->ops->irecv(ep, buf, 10, NULL, NULL, &reqs[1]), HCOMM_SUCCESS);
        HC_TLT_CHK(hc_tlt_wait(env, &reqs[1], 1, 10) == 0);
        HC_TLT_CHK_ST(reqs[1].status, HCOMM_ERR_REMOTE);
        HC_TLT_CHK_ST(env->ops->ep_status(ep), HCOMM_ERR_REMOTE);
        return 0;
    }
    HC_TLT_CHK_ST(env->ops->irecv(ep, buf, 50, NULL, NULL, &reqs[0]), HCOMM_SUCCESS);
    HC_TLT_CHK_ST(env->ops->irecv(ep, buf, 100, NULL, NULL, &reqs[1]), HCOMM_SUCCESS);
    HC_TLT_CHK(hc_tlt_wait(env, reqs, 2, 10) == 0);
    HC_TLT_CHK_ST(reqs[0].status, HCOMM_ERR_PROTOCOL);
    HC_TLT_CHK_ST(reqs[1].status, HCOMM_ERR_PROTOCOL);
    HC_TLT_CHK_ST(env->ops->ep_status(ep), HCOMM_ERR_PROTOCOL);
    /* a failed endpoint refuses new requests with its failure */
    HC_TLT_CHK_ST(env->ops->irecv(ep, buf, 100, NULL, NULL, &later), HCOMM_ERR_PROTOCOL);
    HC_TLT_CHK_ST(env->ops->isend(ep, buf, 50, &later), HCOMM_ERR_PROTOCOL);
    return 0;
}

static void case_length_mismatch(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 2, .body = body_mismatch};
    hc_tlt_expect(v, &w);
}

/* ---- 8b. a failure with big receives under way ---- */

#define HELD_BIG (16 * MIB)

/* Rank 0 sends A (big), 32 bytes and B (big); rank 1 receives A, then 64
 * bytes (the endpoint fails: HCOMM_ERR_PROTOCOL), then B. A transport
 * (ucx, ofi) may have matched A's or B's receive and still be writing into
 * it: no request may be handed back before that ends, so neither buffer
 * changes after every request is back, however long progress goes on. */
static int body_held(hc_tlt_env_t *env, void *arg)
{
    hc_tl_ep_t *ep = env->eps[1 - env->rank];
    uint8_t    *a = hc_tlt_alloc(HELD_BIG), *b = hc_tlt_alloc(HELD_BIG), small[64] = {0};
    uint8_t    *snap = hc_tlt_alloc(2 * HELD_BIG);
    hc_tl_req_t reqs[3];
    double      t0;

    (void)arg;
    HC_TLT_CHK(a != NULL && b != NULL && snap != NULL);
    hc_tlt_sync(env);
    if (env->rank == 0) {
        hc_tlt_fill(a, 0, HELD_BIG, hc_tlt_seed(0, 1, 0));
        hc_tlt_fill(b, 0, HELD_BIG, hc_tlt_seed(0, 1, 2));
        HC_TLT_CHK_ST(env->ops->isend(ep, a, HELD_BIG, &reqs[0]), HCOMM_SUCCESS);
        HC_TLT_CHK_ST(env->ops->isend(ep, small, 32, &reqs[1]), HCOMM_SUCCESS);
        HC_TLT_CHK_ST(env->ops->isend(ep, b, HELD_BIG, &reqs[2]), HCOMM_SUCCESS);
        /* progress (the receiver may pull from us) until rank 1 is done; a
         * send the peer will not take may stay pending: fini ends it */
        for (t0 = hc_tlt_now(); hc_tlt_peek(env, 1, 0) == 0 && hc_tlt_now() - t0 < 30;)
            if (env->ops->progress(env->ctx) == 0)
                usleep(100);
        return 0;
    }
    memset(a, 0, HELD_BIG);
    memset(b, 0, HELD_BIG);
    HC_TLT_CHK_ST(env->ops->irecv(ep, a, HELD_BIG, NULL, NULL, &reqs[0]), HCOMM_SUCCESS);
    HC_TLT_CHK_ST(env->ops->irecv(ep, small, 64, NULL, NULL, &reqs[1]), HCOMM_SUCCESS);
    HC_TLT_CHK_ST(env->ops->irecv(ep, b, HELD_BIG, NULL, NULL, &reqs[2]), HCOMM_SUCCESS);
    HC_TLT_CHK(hc_tlt_wait(env, reqs, 3, 20) == 0);
    HC_TLT_CHK_ST(reqs[1].status, HCOMM_ERR_PROTOCOL);
    HC_TLT_CHK_ST(env->ops->ep_status(ep), HCOMM_ERR_PROTOCOL);
    memcpy(snap, a, HELD_BIG);
    memcpy(snap + HELD_BIG, b, HELD_BIG);
    for (t0 = hc_tlt_now(); hc_tlt_now() - t0 < 1.0;)
        if (env->ops->progress(env->ctx) == 0)
            usleep(100);
    for (int k = 0; k < 2; k++) {
        const uint8_t *buf = k == 0 ? a : b, *old = snap + (size_t)k * HELD_BIG;
        size_t         changed = 0;
        for (size_t i = 0; i < HELD_BIG; i++)
            changed += buf[i] != old[i];
        if (changed > 0)
            hc_tlt_fail(__FILE__, __LINE__,
                        "%zu bytes of receive %c (%s) written after it was handed back", changed,
                        k == 0 ? 'A' : 'B', hcomm_status_name(reqs[2 * k].status));
    }
    hc_tlt_post(env, 0, 1);
    return 0;
}

static void case_fail_holds(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 2, .body = body_held};
    hc_tlt_expect(v, &w);
}

/* ---- 8c. short address blobs (ofi, ucx) ---- */

/* Rank 0 connects to rank 1 with rank 1's blob cut short, its last byte
 * the last of a page before an inaccessible one: connect must refuse it
 * (ofi with the name's length patched to match, as a garbled blob would
 * say), reading nothing past it. The library parses those addresses. */
static int body_short_blob(hc_tlt_env_t *env, void *arg)
{
    static const size_t cuts[] = {1, 2, 15};
    int                 ofi    = strcmp(env->ops->name, "ofi") == 0;
    long                pg     = sysconf(_SC_PAGESIZE);
    uint8_t            *m;

    (void)arg;
    if (!ofi && strcmp(env->ops->name, "ucx") != 0)
        return HC_TLT_SKIP;
    if (env->rank == 1) {
        hc_tlt_await(env, 0, 0, 20);
        return 0;
    }
    m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    HC_TLT_CHK(m != MAP_FAILED && mprotect(m + pg, (size_t)pg, PROT_NONE) == 0);
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        size_t      hdr = ofi ? 64 : 8, n = hdr + cuts[i];
        uint8_t    *blob = m + pg - n;
        hc_tl_ep_t *ep   = NULL;
        HC_TLT_CHK(n < env->addrlen[1]);
        memcpy(blob, env->addr[1], n);
        if (ofi) { /* the header's name length (little-endian) */
            blob[6] = (uint8_t)cuts[i];
            blob[7] = 0;
        }
        HC_TLT_CHK_ST(env->ops->connect(env->ctx, &env->info[1], blob, n, &ep),
                      HCOMM_ERR_INVALID_ARG);
    }
    munmap(m, 2 * (size_t)pg);
    hc_tlt_post(env, 0, 1);
    return 0;
}

static void case_short_blob(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 2, .no_connect = 1, .body = body_short_blob};
    hc_tlt_expect(v, &w);
}

/* ---- 9. close with requests pending ---- */

static const size_t close_sizes[] = {0, 1, 40, 41, 1000, 4000, 8192}; /* fit any ring */
#define NCLOSE ((int)(sizeof(close_sizes) / sizeof(close_sizes[0])))

/* Rank 0 sends the small messages (complete), then a big one and a receive
 * that stay pending, and closes. fini returns at once. */
static void close_sender(hc_tlt_env_t *env)
{
    hc_tl_ep_t *ep = env->eps[1];
    uint8_t     bufs[NCLOSE][8192], *big = hc_tlt_alloc(BIG), small[8];
    hc_tl_req_t reqs[NCLOSE], pend[2];
    double      t0;

    HC_TLT_CHK(big != NULL);
    for (int i = 0; i < NCLOSE; i++) {
        hc_tlt_fill(bufs[i], 0, close_sizes[i], hc_tlt_seed(0, 1, i));
        HC_TLT_CHK_ST(env->ops->isend(ep, bufs[i], close_sizes[i], &reqs[i]), HCOMM_SUCCESS);
    }
    hc_tlt_wait_ok(env, reqs, NCLOSE, 10);
    HC_TLT_CHK_ST(env->ops->isend(ep, big, BIG, &pend[0]), HCOMM_SUCCESS);
    HC_TLT_CHK_ST(env->ops->irecv(ep, small, sizeof(small), NULL, NULL, &pend[1]), HCOMM_SUCCESS);
    HC_TLT_CHK(hc_tlt_wait(env, pend, 2, 0.05) == -1);
    HC_TLT_CHK(pend[1].status == HCOMM_IN_PROGRESS);
    t0 = hc_tlt_now();
    env->ops->fini(env->ctx);
    env->ctx = NULL;
    if (hc_tlt_now() - t0 > 2)
        hc_tlt_fail(__FILE__, __LINE__, "fini took %.1f s", hc_tlt_now() - t0);
    hc_tlt_free(big, BIG); /* abandoned: the buffers are ours again */
    hc_tlt_post(env, 0, 1);
}

/* Rank 1 reads only once rank 0 is gone: what was sent arrives, the rest fails. */
static void close_receiver(hc_tlt_env_t *env)
{
    hc_tl_ep_t *ep = env->eps[0];
    uint8_t     bufs[NCLOSE][8192], *big = hc_tlt_alloc(BIG), small[8];
    hc_tl_req_t reqs[NCLOSE + 2], later;

    HC_TLT_CHK(big != NULL);
    hc_tlt_await(env, 0, 0, 20);
    hc_tlt_await_gone(env, 0);
    for (int i = 0; i < NCLOSE; i++)
        HC_TLT_CHK_ST(env->ops->irecv(ep, bufs[i], close_sizes[i], NULL, NULL, &reqs[i]),
                      HCOMM_SUCCESS);
    HC_TLT_CHK_ST(env->ops->irecv(ep, big, BIG, NULL, NULL, &reqs[NCLOSE]), HCOMM_SUCCESS);
    HC_TLT_CHK_ST(env->ops->irecv(ep, small, 8, NULL, NULL, &reqs[NCLOSE + 1]), HCOMM_SUCCESS);
    HC_TLT_CHK(hc_tlt_wait(env, reqs, NCLOSE + 2, 10) == 0);
    for (int i = 0; i < NCLOSE; i++) {
        HC_TLT_CHK_ST(reqs[i].status, HCOMM_SUCCESS);
        HC_TLT_CHK(hc_tlt_check(bufs[i], 0, close_sizes[i], hc_tlt_seed(0, 1, i)) ==
                   close_sizes[i]);
    }
    HC_TLT_CHK_ST(reqs[NCLOSE].status, HCOMM_ERR_REMOTE);
    HC_TLT_CHK_ST(reqs[NCLOSE + 1].status, HCOMM_ERR_REMOTE);
    HC_TLT_CHK_ST(env->ops->ep_status(ep), HCOMM_ERR_REMOTE);
    HC_TLT_CHK_ST(env->ops->isend(ep, small, 8, &later), HCOMM_ERR_REMOTE);
    hc_tlt_free(big, BIG);
}

static int body_close(hc_tlt_env_t *env, void *arg)
{
    (void)arg;
    hc_tlt_sync(env);
    if (env->rank == 0)
        close_sender(env);
    else
        close_receiver(env);
    return 0;
}

/* The world checks that fini closed every descriptor and the variant that
 * nothing is left (shm: /dev/shm). */
static void case_close_pending(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 2, .body = body_close};
    hc_tlt_expect(v, &w);
}

/* ---- 10. sleeping in poll() on wait_fds ---- */

/* Sleeps in poll() on what wait_fds gives; returns the seconds slept. */
static double fds_sleep(hc_tlt_env_t *env, int check_idle)
{
    struct pollfd pfds[64], none[1];
    int           n = env->ops->wait_fds(env->ctx, pfds, 64), rc;
    double        t0;

    HC_TLT_CHK(n >= 1); /* a request is pending: something to wait for */
    HC_TLT_CHK(env->ops->wait_fds(env->ctx, none, 0) == -1);
    if (check_idle)
        HC_TLT_CHK(poll(pfds, (nfds_t)n, 0) == 0);
    t0 = hc_tlt_now();
    rc = poll(pfds, (nfds_t)n, 5000);
    HC_TLT_CHK(rc > 0);
    return hc_tlt_now() - t0;
}

/* Rank 1 waits for a receive (POLLIN), then for room to send (POLLOUT). */
static void fds_sleeper(hc_tlt_env_t *env)
{
    hc_tl_ep_t *ep = env->eps[0];
    uint8_t     buf[1000], *big = hc_tlt_alloc(BIG);
    hc_tl_req_t req;
    double      slept, deadline;

    HC_TLT_CHK(big != NULL);
    HC_TLT_CHK_ST(env->ops->irecv(ep, buf, sizeof(buf), NULL, NULL, &req), HCOMM_SUCCESS);
    for (int i = 0; i < 10; i++)
        env->ops->progress(env->ctx);
    HC_TLT_CHK(req.status == HCOMM_IN_PROGRESS);
    hc_tlt_post(env, 0, 1);
    slept = fds_sleep(env, 1);
    if (slept < 0.1)
        hc_tlt_fail(__FILE__, __LINE__, "poll() returned after %.3f s, before the send", slept);
    hc_tlt_wait_ok(env, &req, 1, 10);
    HC_TLT_CHK(hc_tlt_check(buf, 0, sizeof(buf), hc_tlt_seed(0, 1, 0)) == sizeof(buf));

    /* a send bigger than the peer takes before it starts receiving */
    hc_tlt_fill(big, 0, BIG, hc_tlt_seed(1, 0, 1));
    HC_TLT_CHK_ST(env->ops->isend(ep, big, BIG, &req), HCOMM_SUCCESS);
    hc_tlt_post(env, 1, 1);
    for (deadline = hc_tlt_now() + 30; req.status == HCOMM_IN_PROGRESS;) {
        HC_TLT_CHK(hc_tlt_now() < deadline);
        if (env->ops->progress(env->ctx) == 0 && req.status == HCOMM_IN_PROGRESS)
            fds_sleep(env, 0); /* a timeout here: the fds slept through the peer's reads */
    }
    HC_TLT_CHK_ST(req.status, HCOMM_SUCCESS);
    hc_tlt_free(big, BIG);
}

static void fds_waker(hc_tlt_env_t *env)
{
    hc_tl_ep_t *ep = env->eps[1];
    uint8_t     buf[1000], *big = hc_tlt_alloc(BIG);
    hc_tl_req_t req;

    HC_TLT_CHK(big != NULL);
    hc_tlt_fill(buf, 0, sizeof(buf), hc_tlt_seed(0, 1, 0));
    hc_tlt_await(env, 1, 0, 20);
    usleep(200000); /* rank 1 is asleep in poll() by now */
    HC_TLT_CHK_ST(env->ops->isend(ep, buf, sizeof(buf), &req), HCOMM_SUCCESS);
    hc_tlt_wait_ok(env, &req, 1, 10);
    hc_tlt_await(env, 1, 1, 20);
    usleep(200000);
    HC_TLT_CHK_ST(env->ops->irecv(ep, big, BIG, NULL, NULL, &req), HCOMM_SUCCESS);
    hc_tlt_wait_ok(env, &req, 1, 30);
    HC_TLT_CHK(hc_tlt_check(big, 0, BIG, hc_tlt_seed(1, 0, 1)) == BIG);
    hc_tlt_free(big, BIG);
}

static int body_wait_fds(hc_tlt_env_t *env, void *arg)
{
    (void)arg;
    hc_tlt_sync(env);
    if (env->rank == 0)
        fds_waker(env);
    else
        fds_sleeper(env);
    return 0;
}

static void case_wait_fds(const hc_tlt_variant_t *v)
{
    hc_tlt_world_t w = {.nranks = 2, .body = body_wait_fds};

    if (v->ops->wait_fds == NULL) {
        printf("[%s] skipped: ops->wait_fds is NULL: the transport can only be polled\n", v->name);
        skip();
    }
    hc_tlt_expect(v, &w);
}

const hc_tlt_case_t hc_tlt_cases[] = {
    {"connect", case_connect},
    {"ordered_2", case_ordered_2},
    {"ordered_3", case_ordered_3},
    {"sink", case_sink},
    {"many_queued", case_many_queued},
    {"many_window", case_many_window},
    {"wrong_cookie", case_wrong_cookie},
    {"silent_peer", case_silent_peer},
    {"killed_peer", case_killed_peer},
    {"zombie_peer", case_zombie_peer},
    {"length_mismatch", case_length_mismatch},
    {"fail_holds", case_fail_holds},
    {"short_blob", case_short_blob},
    {"close_pending", case_close_pending},
    {"wait_fds", case_wait_fds},
    {NULL, NULL},
};
