/*
 * stream_check - one rank of the stream test, under hcomm-run (or alone: one
 * rank). Checks: work on one stream runs in issue order (host functions and
 * collectives interleaved); an event orders two streams (a slow host function
 * on one, the collective that needs its output on the other); many streams
 * and several communicators at once; the request of a stream's last
 * operation; destroying a stream waits for its work; destroying a
 * communicator after its stream work, before the stream; a nonblocking
 * request handed to a stream unfinished; bad arguments.
 * With --kill-peer: the last rank exits without a word after a barrier, and
 * the others' stream operation must fail, on its stream and on its request.
 * Exit: 0 all passed, 1 a check failed, 2 init failure.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"
#include "hcomm_stream.h"
#include "test_comm.h"

#define NSTREAMS 6
#define NCOMMS 3
#define ROUNDS 20
#define COUNT 4099

static int g_rank, g_nranks, g_failed, g_checks;

/* An append-only log of what ran, in order. */
static atomic_int g_log[64], g_nlog;

static void log_mark(void *arg)
{
    int i = atomic_fetch_add(&g_nlog, 1);
    if (i < 64)
        atomic_store(&g_log[i], (int)(long)arg);
}

typedef struct {
    float *buf;
    size_t n;
    float  value;
    int    delay_ms;
} fill_t;

static void fill(void *arg)
{
    fill_t *f = arg;
    if (f->delay_ms > 0) {
        struct timespec ts = {0, (long)f->delay_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < f->n; i++)
        f->buf[i] = f->value + (float)(i % 7);
}

/* Sum over ranks of (r + 1 + i % 7): what every allreduce below must give. */
static float expect_sum(size_t i, float scale)
{
    return scale * ((float)g_nranks * (g_nranks + 1) / 2 + (float)g_nranks * (float)(i % 7));
}

static int buf_ok(const float *b, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != expect_sum(i, scale))
            return 0;
    return 1;
}

/* Host function, slow fill, allreduce, host function: in that order. The
 * allreduce is out of place so that on one rank too (where it is a copy) a
 * result shows whether it ran after the fill. */
static void check_order(hcomm_comm_t comm)
{
    hcomm_stream_t s;
    float         *b = calloc(COUNT, sizeof(float)), *r = calloc(COUNT, sizeof(float));
    fill_t         f = {b, COUNT, (float)(g_rank + 1), 20};

    CHECK(hcomm_stream_create(&s) == HCOMM_SUCCESS, "stream create");
    atomic_store(&g_nlog, 0);
    hcomm_launch_host_func(s, log_mark, (void *)1L);
    hcomm_launch_host_func(s, fill, &f); /* slow: the allreduce must wait for it */
    hcomm_allreduce(b, r, COUNT, HCOMM_FLOAT32, HCOMM_SUM, comm, s);
    hcomm_launch_host_func(s, log_mark, (void *)2L);
    CHECK(hcomm_stream_synchronize(s) == HCOMM_SUCCESS, "synchronize");
    CHECK(atomic_load(&g_nlog) == 2 && g_log[0] == 1 && g_log[1] == 2, "host functions out of order");
    CHECK(buf_ok(r, COUNT, 1), "allreduce after a host function: wrong result");
    CHECK(hcomm_stream_query(s) == HCOMM_SUCCESS, "query after synchronize");
    CHECK(hcomm_stream_destroy(s) == HCOMM_SUCCESS, "destroy");
    free(b);
    free(r);
}

/* Stream B's allreduce needs stream A's slow host function: an event orders
 * them (out of place, so that one rank shows the order too). */
static void check_event(hcomm_comm_t comm)
{
    hcomm_stream_t a, b;
    hcomm_event_t  ev, never;
    float         *x = calloc(COUNT, sizeof(float)), *y = calloc(COUNT, sizeof(float));
    fill_t         f = {x, COUNT, (float)(g_rank + 1), 30};
    hcomm_request_t req;

    hcomm_stream_create(&a);
    hcomm_stream_create(&b);
    hcomm_event_create(&ev);
    hcomm_event_create(&never);
    CHECK(hcomm_event_query(never) == HCOMM_SUCCESS, "an event never recorded is complete");
    hcomm_launch_host_func(a, fill, &f);
    hcomm_event_record(ev, a);
    hcomm_stream_wait_event(b, ev);
    hcomm_stream_wait_event(b, never);
    hcomm_allreduce(x, y, COUNT, HCOMM_FLOAT32, HCOMM_SUM, comm, b);
    CHECK(hcomm_stream_last_request(b, &req) == HCOMM_SUCCESS, "last request");
    CHECK(hcomm_wait(&req) == HCOMM_SUCCESS && req == NULL, "wait on the stream's request");
    CHECK(buf_ok(y, COUNT, 1), "allreduce ran before the event it waited for");
    CHECK(hcomm_event_synchronize(ev) == HCOMM_SUCCESS, "event synchronize");
    CHECK(hcomm_stream_last_request(b, &req) == HCOMM_ERR_INVALID_USAGE, "second last request");
    CHECK(hcomm_event_destroy(ev) == HCOMM_SUCCESS, "event destroy");
    hcomm_event_destroy(never);
    CHECK(hcomm_stream_destroy(a) == HCOMM_SUCCESS && hcomm_stream_destroy(b) == HCOMM_SUCCESS,
          "destroy");
    free(x);
    free(y);
}

/* A host function that blocks its stream until the test opens the gate (at
 * most 10 s, so that a broken run ends). */
static atomic_int g_gate, g_c_saw_gate, g_c_ran;

static void gate_wait(void *arg)
{
    (void)arg;
    struct timespec ms = {0, 1000000L};
    for (int i = 0; i < 10000 && !atomic_load(&g_gate); i++)
        nanosleep(&ms, NULL);
}

static void c_mark(void *arg)
{
    (void)arg;
    atomic_store(&g_c_saw_gate, atomic_load(&g_gate));
    atomic_store(&g_c_ran, 1);
}

/* One event recorded on A (blocked at a gate), then on B, which runs at once:
 * a wait that captured A's record must wait for A, not for B's later record. */
static void check_event_records(void)
{
    hcomm_stream_t  a, b, c;
    hcomm_event_t   ev;
    struct timespec pause = {0, 50000000L};

    hcomm_stream_create(&a);
    hcomm_stream_create(&b);
    hcomm_stream_create(&c);
    hcomm_event_create(&ev);
    atomic_store(&g_gate, 0);
    atomic_store(&g_c_ran, 0);
    atomic_store(&g_c_saw_gate, 0);
    hcomm_launch_host_func(a, gate_wait, NULL);
    hcomm_event_record(ev, a);     /* record 1: behind the gate */
    hcomm_stream_wait_event(c, ev); /* captures record 1 */
    hcomm_event_record(ev, b);     /* record 2: runs at once */
    hcomm_launch_host_func(c, c_mark, NULL);
    CHECK(hcomm_stream_synchronize(b) == HCOMM_SUCCESS, "synchronize B");
    CHECK(hcomm_event_query(ev) == HCOMM_SUCCESS, "the latest record (B's) is complete");
    nanosleep(&pause, NULL); /* room for C to run early, were it to */
    CHECK(atomic_load(&g_c_ran) == 0, "a wait on A's record ran after B's later record");
    atomic_store(&g_gate, 1);
    CHECK(hcomm_stream_synchronize(c) == HCOMM_SUCCESS && atomic_load(&g_c_ran) &&
              atomic_load(&g_c_saw_gate),
          "the stream waiting on A's record ran before A reached it");
    CHECK(hcomm_event_destroy(ev) == HCOMM_SUCCESS, "event destroy");
    hcomm_stream_destroy(a);
    hcomm_stream_destroy(b);
    hcomm_stream_destroy(c);
}

/* Queued last on a stream, a pause then a mark: a destroy that did not wait
 * for the stream's work would find the mark still clear. */
static void pause_50ms(void *arg)
{
    struct timespec pause = {0, 50000000L};
    (void)arg;
    nanosleep(&pause, NULL);
}

static void mark(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
}

/* NSTREAMS streams x NCOMMS communicators, ROUNDS allreduces each, issued in
 * the same order on every rank; then a blocking call on each comm (it orders
 * the collectives, not the host functions queued last on each stream).
 * Stream destroy (no synchronize) must wait for those. */
static void check_many(hcomm_comm_t comm)
{
    hcomm_comm_t   comms[NCOMMS];
    hcomm_stream_t s[NSTREAMS];
    atomic_int     marked[NSTREAMS];
    float         *bufs = malloc((size_t)NSTREAMS * ROUNDS * 257 * sizeof(float));

    for (int c = 0; c < NCOMMS; c++)
        CHECK(hcomm_comm_split(comm, 0, g_rank, &comms[c]) == HCOMM_SUCCESS, "split");
    for (int k = 0; k < NSTREAMS; k++)
        hcomm_stream_create(&s[k]);
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < NSTREAMS; k++) {
            float *b = bufs + ((size_t)k * ROUNDS + (size_t)r) * 257;
            for (int i = 0; i < 257; i++)
                b[i] = (float)(g_rank + 1) + (float)(i % 7);
            hcomm_allreduce(b, b, 257, HCOMM_FLOAT32, HCOMM_SUM, comms[(k + r) % NCOMMS], s[k]);
        }
    for (int k = 0; k < NSTREAMS; k++) {
        atomic_init(&marked[k], 0);
        hcomm_launch_host_func(s[k], pause_50ms, NULL);
        hcomm_launch_host_func(s[k], mark, &marked[k]);
    }
    for (int c = 0; c < NCOMMS; c++) {
        float y = 1;
        CHECK(hcomm_allreduce(&y, &y, 1, HCOMM_FLOAT32, HCOMM_SUM, comms[c], NULL) ==
                      HCOMM_SUCCESS && y == (float)g_nranks,
              "blocking allreduce behind stream work");
    }
    for (int k = 0; k < NSTREAMS; k++) {
        CHECK(hcomm_stream_destroy(s[k]) == HCOMM_SUCCESS, "destroy stream %d", k);
        CHECK(atomic_load(&marked[k]) == 1, "stream %d destroyed before its last work ran", k);
    }
    int bad = 0;
    for (int k = 0; k < NSTREAMS * ROUNDS; k++)
        bad += !buf_ok(bufs + (size_t)k * 257, 257, 1);
    CHECK(bad == 0, "%d of %d stream allreduces wrong", bad, NSTREAMS * ROUNDS);
    for (int c = 0; c < NCOMMS; c++)
        hcomm_comm_destroy(comms[c]);
    free(bufs);
}

/* A nonblocking request issued from this thread while a stream runs the same
 * communicator: tested a little, then handed to the stream unfinished (a
 * host function waits for it there), a stream allreduce queued behind it, and
 * one more nonblocking allreduce waited for here while the stream's thread
 * progresses the communicator too. The PyTorch backend runs small operations
 * so (python/hcomm_torch/csrc/pg_inline.cpp). Rank 0 is late every other
 * round, so that the others hand theirs over. */
#define HROUNDS 20
typedef struct {
    hcomm_request_t req;
    hcomm_status_t  status;
} handed_t;

static void wait_handed(void *arg)
{
    handed_t *h = arg;
    h->status   = hcomm_wait(&h->req);
}

static void check_handover(hcomm_comm_t comm)
{
    hcomm_comm_t   c;
    hcomm_stream_t s;
    handed_t       h[HROUNDS];
    float          small[HROUNDS][2], tail[HROUNDS], x = 1;
    float         *big    = malloc((size_t)HROUNDS * COUNT * sizeof(float));
    int            handed = 0;

    if (hcomm_comm_split(comm, 0, g_rank, &c) != HCOMM_SUCCESS) {
        CHECK(0, "split");
        free(big);
        return;
    }
    hcomm_stream_create(&s);
    hcomm_allreduce(&x, &x, 1, HCOMM_FLOAT32, HCOMM_SUM, c, s); /* c locks from here on */
    CHECK(hcomm_stream_synchronize(s) == HCOMM_SUCCESS && x == (float)g_nranks, "first op");
    for (int r = 0; r < HROUNDS; r++) {
        float          *b = big + (size_t)r * COUNT;
        hcomm_request_t req, req2;
        int             done = 0;
        if (g_rank == 0 && r % 2 == 1) {
            struct timespec late = {0, 2000000L};
            nanosleep(&late, NULL);
        }
        small[r][0] = small[r][1] = (float)(g_rank + 1);
        tail[r]                   = (float)(g_rank + r);
        for (int i = 0; i < COUNT; i++)
            b[i] = (float)(g_rank + 1) + (float)(i % 7);
        h[r].status = HCOMM_SUCCESS;
        CHECK(hcomm_iallreduce(small[r], small[r], 2, HCOMM_FLOAT32, HCOMM_SUM, c, &req) ==
                  HCOMM_SUCCESS,
              "iallreduce");
        for (int k = 0; k < 50 && !done; k++)
            h[r].status = hcomm_test(&req, &done);
        if (!done) {
            h[r].req = req;
            handed++;
            CHECK(hcomm_launch_host_func(s, wait_handed, &h[r]) == HCOMM_SUCCESS, "hand over");
        }
        hcomm_allreduce(b, b, COUNT, HCOMM_FLOAT32, HCOMM_SUM, c, s);
        CHECK(hcomm_iallreduce(&tail[r], &tail[r], 1, HCOMM_FLOAT32, HCOMM_SUM, c, &req2) ==
                      HCOMM_SUCCESS &&
                  hcomm_wait(&req2) == HCOMM_SUCCESS,
              "nonblocking allreduce behind stream work, round %d", r);
    }
    CHECK(hcomm_stream_synchronize(s) == HCOMM_SUCCESS, "synchronize");
    int bad = 0;
    for (int r = 0; r < HROUNDS; r++) {
        float want = (float)(g_nranks * (g_nranks + 1) / 2);
        bad += h[r].status != HCOMM_SUCCESS || small[r][0] != want || small[r][1] != want ||
               tail[r] != (float)(g_nranks * (g_nranks - 1) / 2 + g_nranks * r) ||
               !buf_ok(big + (size_t)r * COUNT, COUNT, 1);
    }
    CHECK(bad == 0, "%d of %d rounds with a handed-over request wrong", bad, HROUNDS);
    /* late by 2 ms against 50 tests: the others cannot have finished */
    CHECK(g_rank == 0 || handed > 0, "no request was handed over: the check tested nothing");
    hcomm_stream_destroy(s);
    hcomm_comm_destroy(c);
    free(big);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The plain order: an op on a stream, (synchronize,) destroy the communicator,
 * then the stream. The stream's hold on its last op (kept for
 * hcomm_stream_last_request) must not keep the communicator's destroy waiting
 * for HCOMM_TIMEOUT; without the synchronize, destroy waits for the op. */
static void check_comm_destroy(hcomm_comm_t comm)
{
    for (int sync = 1; sync >= 0; sync--) {
        hcomm_comm_t    c;
        hcomm_stream_t  s;
        hcomm_request_t req;
        float           x = 1;

        if (hcomm_comm_split(comm, 0, g_rank, &c) != HCOMM_SUCCESS) {
            CHECK(0, "split");
            return;
        }
        hcomm_stream_create(&s);
        hcomm_allreduce(&x, &x, 1, HCOMM_FLOAT32, HCOMM_SUM, c, s);
        if (sync)
            CHECK(hcomm_stream_synchronize(s) == HCOMM_SUCCESS, "synchronize");
        double t0 = now_s();
        CHECK(hcomm_comm_destroy(c) == HCOMM_SUCCESS, "comm destroy (synchronized: %d)", sync);
        double dt = now_s() - t0;
        CHECK(dt < 5, "comm destroy behind a stream took %.1f s (synchronized: %d)", dt, sync);
        CHECK(x == (float)g_nranks, "allreduce before comm destroy: got %g", (double)x);
        CHECK(hcomm_stream_last_request(s, &req) == HCOMM_ERR_INVALID_USAGE,
              "request of an op whose communicator is gone");
        CHECK(hcomm_stream_destroy(s) == HCOMM_SUCCESS, "stream destroy after its comm's");
    }
}

/* A group on a stream: a ring of send/recv pairs runs as one operation. */
static void check_group(hcomm_comm_t comm)
{
    hcomm_stream_t s;
    int            to = (g_rank + 1) % g_nranks, from = (g_rank + g_nranks - 1) % g_nranks;
    int            out = g_rank, in = -1;

    hcomm_stream_create(&s);
    hcomm_group_start();
    hcomm_send(&out, 1, HCOMM_INT32, to, comm, s);
    hcomm_recv(&in, 1, HCOMM_INT32, from, comm, s);
    CHECK(hcomm_group_end() == HCOMM_SUCCESS, "group end on a stream");
    CHECK(hcomm_stream_synchronize(s) == HCOMM_SUCCESS && in == from, "ring on a stream: got %d",
          in);
    hcomm_group_start();
    hcomm_send(&out, 1, HCOMM_INT32, to, comm, s);
    hcomm_recv(&in, 1, HCOMM_INT32, from, comm, NULL);
    CHECK(hcomm_group_end() == HCOMM_ERR_INVALID_USAGE, "a group mixing streams is refused");
    hcomm_stream_destroy(s);
    /* a stream destroyed between the group's calls and its end: refused, and
     * the communicator goes on (the end pushed onto the freed stream) */
    hcomm_stream_create(&s);
    hcomm_group_start();
    hcomm_send(&out, 1, HCOMM_INT32, to, comm, s);
    hcomm_recv(&in, 1, HCOMM_INT32, from, comm, s);
    hcomm_stream_destroy(s);
    CHECK(hcomm_group_end() == HCOMM_ERR_INVALID_ARG, "a group on a destroyed stream is refused");
    in = -1;
    hcomm_group_start();
    hcomm_send(&out, 1, HCOMM_INT32, to, comm, NULL);
    hcomm_recv(&in, 1, HCOMM_INT32, from, comm, NULL);
    CHECK(hcomm_group_end() == HCOMM_SUCCESS && in == from, "a ring after the refused group: %d",
          in);
}

static void check_bad(hcomm_comm_t comm)
{
    hcomm_stream_t s, bogus = (hcomm_stream_t)&g_checks;
    hcomm_request_t req;
    float           x = 0;

    hcomm_stream_create(&s);
    CHECK(hcomm_launch_host_func(s, NULL, NULL) == HCOMM_ERR_INVALID_ARG, "NULL host function");
    CHECK(hcomm_stream_last_request(s, &req) == HCOMM_ERR_INVALID_USAGE, "request of nothing");
    CHECK(hcomm_allreduce(&x, &x, 1, HCOMM_FLOAT32, HCOMM_SUM, comm, bogus) ==
              HCOMM_ERR_INVALID_ARG, "a stream that is none");
    CHECK(hcomm_stream_query(bogus) == HCOMM_ERR_INVALID_ARG, "query of a stream that is none");
    CHECK(hcomm_stream_create(NULL) == HCOMM_ERR_INVALID_ARG, "create into NULL");
    CHECK(hcomm_event_record(NULL, s) == HCOMM_ERR_INVALID_ARG, "record of NULL");
    CHECK(hcomm_stream_destroy(s) == HCOMM_SUCCESS, "destroy");
}

/* The last rank leaves; the others' stream allreduce must fail everywhere it shows. */
static int check_kill(hcomm_comm_t comm)
{
    hcomm_stream_t  s;
    hcomm_request_t req;
    float           x = 1;

    hcomm_barrier(comm, NULL);
    if (g_rank == g_nranks - 1)
        _exit(0);
    hcomm_stream_create(&s);
    hcomm_allreduce(&x, &x, 1, HCOMM_FLOAT32, HCOMM_SUM, comm, s);
    hcomm_stream_last_request(s, &req);
    hcomm_status_t ws = hcomm_wait(&req), ss = hcomm_stream_synchronize(s);
    hcomm_status_t qs = hcomm_stream_query(s);
    CHECK(ws != HCOMM_SUCCESS, "request of the failed op: %s", hcomm_status_name(ws));
    CHECK(ss == ws && qs == ws, "stream reports %s / %s, the op %s", hcomm_status_name(ss),
          hcomm_status_name(qs), hcomm_status_name(ws));
    printf("stream_check rank %d: the allreduce with a dead peer failed with %s\n", g_rank,
           hcomm_status_name(ws));
    hcomm_stream_destroy(s);
    hcomm_comm_abort(comm);
    return g_failed != 0;
}

/* Rank 0 aborts its communicator while its stream's thread is inside the
 * progress of an allreduce that the others never join: the op fails, nothing
 * is freed under the thread (ThreadSanitizer and AddressSanitizer builds,
 * tests/sanitize/run.sh, report it where it is). */
static int check_abort(hcomm_comm_t comm)
{
    hcomm_stream_t s;
    float          x = 1;
    double         t0;

    hcomm_barrier(comm, NULL);
    if (g_rank != 0) {
        usleep(300000); /* past rank 0's abort */
        hcomm_comm_abort(comm);
        return 0;
    }
    hcomm_stream_create(&s);
    hcomm_allreduce(&x, &x, 1, HCOMM_FLOAT32, HCOMM_SUM, comm, s);
    usleep(100000); /* the stream's thread spins in progress meanwhile */
    t0                = now_s();
    hcomm_status_t as = hcomm_comm_abort(comm);
    double         dt = now_s() - t0;
    hcomm_status_t ss = hcomm_stream_synchronize(s);
    CHECK(as == HCOMM_SUCCESS && dt < 2, "abort: %s after %.3f s", hcomm_status_name(as), dt);
    CHECK(ss == HCOMM_ERR_ABORTED, "the stream after abort: %s", hcomm_status_name(ss));
    printf("stream_check rank 0: the allreduce under abort ended with %s\n", hcomm_status_name(ss));
    hcomm_stream_destroy(s);
    return g_failed != 0;
}

/* Rank 0's stream B waits for an event that stream A records after a host
 * function slower than HCOMM_TIMEOUT (the script sets 2 s; the communicator's
 * own timeout is longer), then allreduces what that function fills. The wait
 * times out: the allreduce must fail, not run on the unfilled buffer (it
 * returned success and half the sum on both ranks). */
static float g_produced[4];
static void  produce_late(void *arg)
{
    (void)arg;
    usleep(3500000);
    for (int i = 0; i < 4; i++)
        g_produced[i] = 100;
}

static int check_event_timeout(hcomm_comm_t comm)
{
    hcomm_stream_t  a, b;
    hcomm_event_t   ev;
    hcomm_request_t req;

    hcomm_comm_set_timeout(comm, 30);
    hcomm_stream_create(&a);
    hcomm_stream_create(&b);
    hcomm_event_create(&ev);
    for (int i = 0; i < 4; i++)
        g_produced[i] = g_rank == 0 ? -1 : 100;
    if (g_rank == 0) {
        hcomm_launch_host_func(a, produce_late, NULL);
        hcomm_event_record(ev, a);
        hcomm_stream_wait_event(b, ev);
    }
    hcomm_allreduce(g_produced, g_produced, 4, HCOMM_FLOAT32, HCOMM_SUM, comm, b);
    hcomm_stream_last_request(b, &req);
    hcomm_status_t rs = hcomm_wait(&req), bs = hcomm_stream_synchronize(b);
    hcomm_stream_synchronize(a);
    CHECK(rs != HCOMM_SUCCESS || g_produced[0] == 100.0f * (float)g_nranks,
          "allreduce behind a timed-out wait: %s with %g", hcomm_status_name(rs),
          (double)g_produced[0]);
    if (g_rank == 0)
        CHECK(rs != HCOMM_SUCCESS && bs != HCOMM_SUCCESS,
              "allreduce behind a timed-out wait: %s, stream %s", hcomm_status_name(rs),
              hcomm_status_name(bs));
    printf("stream_check rank %d: the allreduce behind a timed-out event wait ended with %s\n",
           g_rank, hcomm_status_name(rs));
    hcomm_stream_destroy(a);
    hcomm_stream_destroy(b);
    hcomm_event_destroy(ev);
    hcomm_comm_abort(comm);
    return g_failed != 0;
}

int main(int argc, char **argv)
{
    hcomm_comm_t   comm = NULL;
    hcomm_status_t st;
    int            kill = argc > 1 && strcmp(argv[1], "--kill-peer") == 0;

    st = test_comm_init(&comm, &g_rank, &g_nranks);
    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, "stream_check: init failed: %s\n", hcomm_status_str(st));
        return 2;
    }
    if (kill)
        return check_kill(comm);
    if (argc > 1 && strcmp(argv[1], "--abort") == 0)
        return check_abort(comm);
    if (argc > 1 && strcmp(argv[1], "--event-timeout") == 0)
        return check_event_timeout(comm);
    if (g_nranks == 1)
        printf("stream_check: 1 rank: a collective is a copy, so the ordering checks read "
               "out-of-place results\n");
    check_order(comm);
    check_event(comm);
    check_event_records();
    check_many(comm);
    check_group(comm);
    check_handover(comm);
    check_comm_destroy(comm);
    check_bad(comm);
    printf("stream_check rank %d: %d checks, %d failed\n", g_rank, g_checks, g_failed);
    hcomm_comm_destroy(comm);
    return g_failed != 0;
}
