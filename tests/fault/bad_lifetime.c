/*
 * bad_lifetime - handles used past their life: a request ended twice through
 * a stale copy, a stream's request held across its communicator's destroy, a
 * destroy or abort inside a group, buckets used after their destroy, a stream
 * synchronized or destroyed by its own host function or destroyed while
 * another thread launches onto it. Each gets a clear status and one log line
 * (or, for a held request, simply works); none corrupts the library, reads freed memory (the ASan
 * run, tests/sanitize/run.sh asan tests/fault/bad_lifetime, checks it) or hangs.
 *
 * One process with one-rank communicators; HCOMM_TIMEOUT is short so that a
 * destroy that waits for it fails the test quickly.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/comm.h" /* white box: a communicator's serial */
#include "expect_log.h"
#include "hcomm.h"
#include "hcomm_bucket.h"
#include "hcomm_stream.h"

#define TEST_ALARM_S 60
#define TIMEOUT_S "10" /* HCOMM_TIMEOUT: a destroy that waits it out is a failure */
#define PROMPT_S 5.0   /* what a destroy may take here, well under it */

#include "one_rank_fixtures.h"

static char tmp_dir[128];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A destroy that must neither wait for the user's request nor fail. */
static void destroy_promptly(hcomm_comm_t c)
{
    double t0 = now_s();
    EXPECT(hcomm_comm_destroy(c), HCOMM_SUCCESS);
    if (now_s() - t0 > PROMPT_S)
        fail_msg("hcomm_comm_destroy took %.1f s", now_s() - t0);
}

/* The request hcomm_stream_last_request handed out is the user's, as a
 * nonblocking call's: the communicator's destroy does not wait for it (it
 * used to, HCOMM_TIMEOUT long, then failed and leaked the communicator), and
 * a wait or test after the destroy still returns the operation's status. */
static void test_stream_request_outlives_destroy(void **state)
{
    float           a[4] = {1, 2, 3, 4}, b[4] = {0}, d[4] = {0};
    hcomm_stream_t  s;
    hcomm_request_t r1 = NULL, r2 = NULL;
    int             done = 0;

    (void)state;
    assert_int_equal(hcomm_stream_create(&s), HCOMM_SUCCESS);
    hcomm_comm_t c = new_comm1();
    EXPECT(hcomm_allreduce(a, b, 4, HCOMM_FLOAT32, HCOMM_SUM, c, s), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_last_request(s, &r1), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_synchronize(s), HCOMM_SUCCESS);
    destroy_promptly(c);
    EXPECT(hcomm_wait(&r1), HCOMM_SUCCESS);
    assert_null(r1);
    assert_true(b[3] == 4);

    /* destroyed right away: the stream's own holds (its task, its newer last
     * request) are let go of, the user's is not waited for */
    c = new_comm1();
    EXPECT(hcomm_allreduce(a, d, 4, HCOMM_FLOAT32, HCOMM_MAX, c, s), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_last_request(s, &r2), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(a, b, 4, HCOMM_FLOAT32, HCOMM_SUM, c, s), HCOMM_SUCCESS);
    destroy_promptly(c);
    EXPECT(hcomm_test(&r2, &done), HCOMM_SUCCESS);
    assert_true(done == 1 && r2 == NULL && d[3] == 4);
    EXPECT(hcomm_stream_last_request(s, &r2), HCOMM_ERR_INVALID_USAGE);
    EXPECT(hcomm_stream_destroy(s), HCOMM_SUCCESS);
}

/* A host function that holds its stream until *arg is set (20 s at most). */
static void hold_stream(void *arg)
{
    for (int i = 0; i < 20000 && !__atomic_load_n((int *)arg, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
}

/* A destroy that a stuck stream's queued work keeps from going on fails
 * with HCOMM_ERR_TIMEOUT and leaves the communicator as it was: it answers,
 * the queued call runs once the stream moves, and a destroy then frees it.
 * It used to be unregistered, never freed, and unreachable by a retry or an
 * abort. */
static void test_destroy_held_retry(void **state)
{
    float          a = 1, b = 0;
    int            go = 0, n = 0;
    hcomm_stream_t s;

    (void)state;
    assert_int_equal(hcomm_stream_create(&s), HCOMM_SUCCESS);
    hcomm_comm_t c = new_comm1();
    EXPECT(hcomm_comm_set_timeout(c, 0.3), HCOMM_SUCCESS);
    EXPECT(hcomm_launch_host_func(s, hold_stream, &go), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(&a, &b, 1, HCOMM_FLOAT32, HCOMM_SUM, c, s), HCOMM_SUCCESS);
    EXPECT(hcomm_comm_destroy(c), HCOMM_ERR_TIMEOUT); /* one line: "it stays valid" */
    EXPECT(hcomm_comm_size(c, &n), HCOMM_SUCCESS);
    assert_int_equal(n, 1);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    EXPECT(hcomm_stream_synchronize(s), HCOMM_SUCCESS);
    assert_true(b == 1);
    destroy_promptly(c);
    EXPECT(hcomm_stream_destroy(s), HCOMM_SUCCESS);
}

/* A request ended by a wait, then waited or tested again through a copy of
 * its handle: refused while the request is unused. It used to be recycled
 * twice, so that two later calls shared one request. */
static void test_request_waited_twice(void **state)
{
    hcomm_comm_t    c    = *state;
    float           a[4] = {1, 2, 3, 4}, b[4] = {0}, d[4] = {0};
    hcomm_request_t r = NULL, r1 = NULL, r2 = NULL;
    hcomm_stream_t  s;
    int             done = 7;

    EXPECT(hcomm_iallreduce(a, b, 4, HCOMM_FLOAT32, HCOMM_SUM, c, &r), HCOMM_SUCCESS);
    hcomm_request_t copy = r;
    EXPECT(hcomm_wait(&r), HCOMM_SUCCESS);
    EXPECT(hcomm_wait(&copy), HCOMM_ERR_INVALID_USAGE);
    EXPECT(hcomm_test(&copy, &done), HCOMM_ERR_INVALID_USAGE);
    assert_non_null(copy);
    assert_int_equal(done, 7);

    /* the spare requests are intact: two at once are two */
    EXPECT(hcomm_iallreduce(a, b, 4, HCOMM_FLOAT32, HCOMM_SUM, c, &r1), HCOMM_SUCCESS);
    EXPECT(hcomm_iallreduce(a, d, 4, HCOMM_FLOAT32, HCOMM_MIN, c, &r2), HCOMM_SUCCESS);
    assert_ptr_not_equal(r1, r2);
    EXPECT(hcomm_wait(&r2), HCOMM_SUCCESS);
    EXPECT(hcomm_wait(&r1), HCOMM_SUCCESS);
    assert_true(b[3] == 4 && d[3] == 4);

    /* a stream's request, whose task may still hold it after the first wait */
    assert_int_equal(hcomm_stream_create(&s), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(a, b, 4, HCOMM_FLOAT32, HCOMM_SUM, c, s), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_last_request(s, &r), HCOMM_SUCCESS);
    copy = r;
    EXPECT(hcomm_wait(&r), HCOMM_SUCCESS);
    EXPECT(hcomm_wait(&copy), HCOMM_ERR_INVALID_USAGE);
    EXPECT(hcomm_stream_synchronize(s), HCOMM_SUCCESS);
    EXPECT(hcomm_wait(&copy), HCOMM_ERR_INVALID_USAGE);
    EXPECT(hcomm_stream_destroy(s), HCOMM_SUCCESS);
}

/* As in NCCL, destroy inside a group is refused (its queued calls may name
 * the communicator). Abort is not (it is how a program gets out of trouble):
 * its queued calls are dropped at the group's end, not run on a communicator
 * made at its address in between (they once were). */
static void test_group_destroy(void **state)
{
    float        a[4] = {1, 2, 3, 4}, b[4] = {0}, e[4] = {0};
    hcomm_comm_t c = new_comm1();

    (void)state;
    EXPECT(hcomm_group_start(), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(a, b, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_comm_destroy(c), HCOMM_ERR_INVALID_USAGE);
    EXPECT(hcomm_group_end(), HCOMM_SUCCESS);
    assert_true(b[3] == 4);

    EXPECT(hcomm_group_start(), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(a, e, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_comm_abort(c), HCOMM_SUCCESS);
    hcomm_comm_t again = new_comm1(); /* may be at the aborted one's address */
    EXPECT(hcomm_group_end(), HCOMM_ERR_INVALID_COMM);
    assert_true(e[0] == 0 && e[3] == 0);

    /* whether the allocator reuses the address is its own affair: a
     * communicator at the queued call's address that is another one (what
     * sets them apart, its serial, differs) is made by hand */
    EXPECT(hcomm_group_start(), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(a, e, 4, HCOMM_FLOAT32, HCOMM_SUM, again, NULL), HCOMM_SUCCESS);
    again->serial++;
    EXPECT(hcomm_group_end(), HCOMM_ERR_INVALID_COMM);
    assert_true(e[0] == 0 && e[3] == 0);
    EXPECT(hcomm_comm_destroy(again), HCOMM_SUCCESS);
}

/* Buckets are found in a registry, as streams are: a destroyed handle is
 * refused without reading its freed memory (it was read for a magic word). */
static void test_buckets_destroyed(void **state)
{
    hcomm_comm_t    c = *state;
    hcomm_stream_t  s;
    hcomm_buckets_t bk, live;
    float           t[8]   = {1, 2, 3, 4, 5, 6, 7, 8};
    void           *ts[1]  = {t};
    size_t          cnt[1] = {8};
    int             nb     = -1;

    assert_int_equal(hcomm_stream_create(&s), HCOMM_SUCCESS);
    EXPECT(hcomm_buckets_create(c, 1, ts, cnt, HCOMM_FLOAT32, NULL, s, &bk), HCOMM_SUCCESS);
    EXPECT(hcomm_buckets_create(c, 1, ts, cnt, HCOMM_FLOAT32, NULL, s, &live), HCOMM_SUCCESS);
    hcomm_buckets_destroy(bk);
    EXPECT(hcomm_buckets_ready(bk, 0), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_buckets_wait(bk), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_buckets_layout(bk, 0, &nb, NULL, NULL), HCOMM_ERR_INVALID_ARG);
    long before = log_lines();
    hcomm_buckets_destroy(bk);
    assert_int_equal(log_lines() - before, 1);
    EXPECT(hcomm_buckets_ready((hcomm_buckets_t)(void *)&nb, 0), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(nb, -1);

    /* the live one still works */
    EXPECT(hcomm_buckets_ready(live, 0), HCOMM_SUCCESS);
    EXPECT(hcomm_buckets_wait(live), HCOMM_SUCCESS);
    assert_true(t[7] == 8);
    hcomm_buckets_destroy(live);
    EXPECT(hcomm_stream_destroy(s), HCOMM_SUCCESS);
}

/* Host functions that synchronize or destroy their own stream: refused at
 * once (HCOMM_ERR_INVALID_USAGE, one line). They used to wait the whole
 * HCOMM_TIMEOUT for themselves, then say no queued work finished, and the
 * destroy leaked the stream. */
typedef struct {
    hcomm_stream_t s;
    hcomm_status_t st;
    double         took;
    long           lines;
} self_call_t;

static void self_sync(void *arg)
{
    self_call_t *c  = arg;
    long         b  = log_lines();
    double       t0 = now_s();
    c->st           = hcomm_stream_synchronize(c->s);
    c->took         = now_s() - t0;
    c->lines        = log_lines() - b;
}

static void self_destroy(void *arg)
{
    self_call_t *c  = arg;
    long         b  = log_lines();
    double       t0 = now_s();
    c->st           = hcomm_stream_destroy(c->s);
    c->took         = now_s() - t0;
    c->lines        = log_lines() - b;
}

static void test_stream_self_sync(void **state)
{
    static self_call_t sync, destroy; /* outlive a failed check (longjmp) */

    (void)state;
    assert_int_equal(hcomm_stream_create(&sync.s), HCOMM_SUCCESS);
    destroy.s = sync.s;
    /* plain checks: the log lines meanwhile are the host functions' */
    assert_int_equal(hcomm_launch_host_func(sync.s, self_sync, &sync), HCOMM_SUCCESS);
    assert_int_equal(hcomm_launch_host_func(sync.s, self_destroy, &destroy), HCOMM_SUCCESS);
    assert_int_equal(hcomm_stream_synchronize(sync.s), HCOMM_SUCCESS);
    printf("in a host function: synchronize own stream -> %s after %.1f s (%ld lines); destroy "
           "-> %s after %.1f s (%ld lines)\n",
           hcomm_status_name(sync.st), sync.took, sync.lines, hcomm_status_name(destroy.st),
           destroy.took, destroy.lines);
    assert_int_equal(sync.st, HCOMM_ERR_INVALID_USAGE);
    assert_int_equal(destroy.st, HCOMM_ERR_INVALID_USAGE);
    assert_true(sync.took < PROMPT_S && destroy.took < PROMPT_S);
    assert_true(sync.lines == 1 && destroy.lines == 1);
    EXPECT(hcomm_stream_destroy(sync.s), HCOMM_SUCCESS); /* still the user's to destroy */
}

/* A stream destroyed while another thread launches onto it: every launch it
 * accepted runs; the others fail (the stream is destroyed). A launch between
 * its handle check and its queuing used to be accepted and never run, or to
 * queue into the freed stream. */
static hcomm_stream_t race_s;
static int            race_ran, race_ok, race_stop;

static void race_task(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&race_ran, 1, __ATOMIC_RELAXED);
}

static void *race_launcher(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&race_stop, __ATOMIC_ACQUIRE) &&
           hcomm_launch_host_func(race_s, race_task, NULL) == HCOMM_SUCCESS)
        race_ok++;
    return NULL;
}

static void test_stream_destroy_racing_launch(void **state)
{
    int lost = 0, iters = 400;

    (void)state;
    for (int it = 0; it < iters; it++) {
        pthread_t t;
        race_ran = race_ok = race_stop = 0;
        assert_int_equal(hcomm_stream_create(&race_s), HCOMM_SUCCESS);
        assert_int_equal(pthread_create(&t, NULL, race_launcher, NULL), 0);
        for (volatile int i = 0; i < 20000 + 37 * it; i++)
            ;
        assert_int_equal(hcomm_stream_destroy(race_s), HCOMM_SUCCESS);
        __atomic_store_n(&race_stop, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        if (race_ok != __atomic_load_n(&race_ran, __ATOMIC_RELAXED) && lost++ < 3)
            printf("iteration %d: %d launches accepted, %d ran\n", it, race_ok, race_ran);
    }
    printf("stream destroyed under a launching thread: %d of %d iterations lost tasks\n", lost,
           iters);
    assert_int_equal(lost, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stream_request_outlives_destroy, setup_plain,
                                        teardown_plain),
        cmocka_unit_test_setup_teardown(test_destroy_held_retry, setup_plain, teardown_plain),
        cmocka_unit_test_setup_teardown(test_request_waited_twice, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_group_destroy, setup_plain, teardown_plain),
        cmocka_unit_test_setup_teardown(test_buckets_destroyed, setup_comm, teardown_comm),
        cmocka_unit_test(test_stream_self_sync),
        cmocka_unit_test(test_stream_destroy_racing_launch),
    };
    int failed;

    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/hcomm-bad-lifetime-XXXXXX");
    if (mkdtemp(tmp_dir) == NULL) {
        perror("bad_lifetime: mkdtemp");
        return 99;
    }
    snprintf(log_path, sizeof(log_path), "%s/log", tmp_dir);
    setenv("HCOMM_LOG_FILE", log_path, 1);
    setenv("HCOMM_LOG_LEVEL", "warn", 1);
    setenv("HCOMM_TIMEOUT", TIMEOUT_S, 1);
    unsetenv("HCOMM_RANK"), unsetenv("HCOMM_NRANKS"), unsetenv("HCOMM_ROOT");
    setvbuf(stdout, NULL, _IOLBF, 0);
    failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (failed == 0) {
        unlink(log_path);
        rmdir(tmp_dir);
    } else {
        printf("bad_lifetime: library log kept in %s\n", tmp_dir);
    }
    return failed ? 1 : 0;
}
