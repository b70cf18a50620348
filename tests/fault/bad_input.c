/*
 * bad_input - invalid arguments and misuse of the public API must return the
 * right negative status and log exactly one line, never crash or hang.
 *
 * One process with one-rank communicators, plus a forked helper that is rank 1
 * of a two-rank communicator (forked before any library call, so it shares no
 * library state). Logging goes to HCOMM_LOG_FILE in a temporary directory; each
 * failing call must add exactly one line there. Every test runs under an alarm.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "expect_log.h"
#include "hcomm.h"
#include "hcomm_stream.h"

#define TEST_ALARM_S 60
#define TWO_RANK_TIMEOUT "10"

#include "one_rank_fixtures.h"

static char  tmp_dir[128];
static int   helper_fd  = -1; /* parent -> rank-1 helper: the unique id */
static pid_t helper_pid = -1;

/* ---- fixtures ---- */

static void on_alarm(int sig)
{
    static const char msg[] = "bad_input: a call hung (alarm); failing\n";
    (void)sig;
    if (write(2, msg, sizeof(msg) - 1) < 0)
        _exit(1);
    _exit(1);
}

/* ---- tests on a one-rank communicator ---- */

static float sbuf[64], rbuf[64];

static void test_null_buffers(void **state)
{
    hcomm_comm_t    c   = *state;
    hcomm_request_t req = (hcomm_request_t)(void *)&req;

    EXPECT(hcomm_allreduce(NULL, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
           HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_allreduce(sbuf, NULL, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
           HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_broadcast(NULL, rbuf, 4, HCOMM_FLOAT32, 0, c, NULL), HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_broadcast(sbuf, NULL, 4, HCOMM_FLOAT32, 0, c, NULL), HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_reduce(NULL, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, 0, c, NULL),
           HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_reduce(sbuf, NULL, 4, HCOMM_FLOAT32, HCOMM_SUM, 0, c, NULL),
           HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_allgather(NULL, rbuf, 4, HCOMM_FLOAT32, c, NULL), HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_allgather(sbuf, NULL, 4, HCOMM_FLOAT32, c, NULL), HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_reduce_scatter(NULL, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
           HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_reduce_scatter(sbuf, NULL, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
           HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_alltoall(NULL, rbuf, 4, HCOMM_FLOAT32, c, NULL), HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_alltoall(sbuf, NULL, 4, HCOMM_FLOAT32, c, NULL), HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_iallreduce(NULL, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, &req),
           HCOMM_ERR_NULL_BUFFER);
    /* on one rank every peer is oneself, legal only inside a group (the two-rank
     * test checks nonblocking point to point) */
    GROUP_EXPECT(hcomm_send(NULL, 4, HCOMM_FLOAT32, 0, c, NULL), HCOMM_ERR_NULL_BUFFER);
    GROUP_EXPECT(hcomm_recv(NULL, 4, HCOMM_FLOAT32, 0, c, NULL), HCOMM_ERR_NULL_BUFFER);
    /* output parameters are written only on success */
    assert_ptr_equal(req, (hcomm_request_t)(void *)&req);
}

/* count 0 with NULL buffers is valid: success and no log line. */
static void test_zero_count_null_ok(void **state)
{
    hcomm_comm_t c = *state;

    EXPECT(hcomm_allreduce(NULL, NULL, 0, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_broadcast(NULL, NULL, 0, HCOMM_INT8, 0, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_allgather(NULL, NULL, 0, HCOMM_INT64, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_alltoall(NULL, NULL, 0, HCOMM_UINT8, c, NULL), HCOMM_SUCCESS);
    /* the other paths a count-0 call takes (a UBSan build flags a NULL handed
     * to memcpy or memset there, even with a length of 0) */
    hcomm_request_t req  = NULL;
    hcomm_stream_t  s    = NULL;
    size_t          z[1] = {0};
    EXPECT(hcomm_reduce(NULL, NULL, 0, HCOMM_FLOAT64, HCOMM_AVG, 0, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_reduce_scatter(NULL, NULL, 0, HCOMM_FLOAT16, HCOMM_AVG, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_alltoallv(NULL, z, z, NULL, z, z, HCOMM_INT32, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_iallreduce(NULL, NULL, 0, HCOMM_FLOAT32, HCOMM_SUM, c, &req), HCOMM_SUCCESS);
    EXPECT(hcomm_wait(&req), HCOMM_SUCCESS);
    assert_int_equal(hcomm_stream_create(&s), HCOMM_SUCCESS);
    EXPECT(hcomm_allgather(NULL, NULL, 0, HCOMM_INT8, c, s), HCOMM_SUCCESS);
    EXPECT(hcomm_alltoallv(NULL, z, z, NULL, z, z, HCOMM_INT32, c, s), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_destroy(s), HCOMM_SUCCESS);
    EXPECT(hcomm_group_start(), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(NULL, NULL, 0, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_send(NULL, 0, HCOMM_FLOAT32, 0, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_recv(NULL, 0, HCOMM_FLOAT32, 0, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_group_end(), HCOMM_SUCCESS);
}

static void test_invalid_dtype(void **state)
{
    hcomm_comm_t        c     = *state;
    hcomm_request_t     req   = NULL;
    const hcomm_dtype_t bad[] = {(hcomm_dtype_t)99, (hcomm_dtype_t)-1, HCOMM_DTYPE_COUNT};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hcomm_dtype_t d = bad[i];
        EXPECT(hcomm_allreduce(sbuf, rbuf, 4, d, HCOMM_SUM, c, NULL), HCOMM_ERR_INVALID_DTYPE);
        EXPECT(hcomm_broadcast(sbuf, rbuf, 4, d, 0, c, NULL), HCOMM_ERR_INVALID_DTYPE);
        EXPECT(hcomm_reduce(sbuf, rbuf, 4, d, HCOMM_SUM, 0, c, NULL), HCOMM_ERR_INVALID_DTYPE);
        EXPECT(hcomm_allgather(sbuf, rbuf, 4, d, c, NULL), HCOMM_ERR_INVALID_DTYPE);
        EXPECT(hcomm_reduce_scatter(sbuf, rbuf, 4, d, HCOMM_SUM, c, NULL), HCOMM_ERR_INVALID_DTYPE);
        EXPECT(hcomm_alltoall(sbuf, rbuf, 4, d, c, NULL), HCOMM_ERR_INVALID_DTYPE);
        GROUP_EXPECT(hcomm_send(sbuf, 4, d, 0, c, NULL), HCOMM_ERR_INVALID_DTYPE);
        GROUP_EXPECT(hcomm_recv(rbuf, 4, d, 0, c, NULL), HCOMM_ERR_INVALID_DTYPE);
        EXPECT(hcomm_iallreduce(sbuf, rbuf, 4, d, HCOMM_SUM, c, &req), HCOMM_ERR_INVALID_DTYPE);
    }
    assert_null(req);
}

static void test_invalid_op(void **state)
{
    hcomm_comm_t     c     = *state;
    hcomm_request_t  req   = NULL;
    const hcomm_op_t bad[] = {(hcomm_op_t)99, (hcomm_op_t)-1, HCOMM_OP_COUNT};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hcomm_op_t op = bad[i];
        EXPECT(hcomm_allreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, op, c, NULL), HCOMM_ERR_INVALID_OP);
        EXPECT(hcomm_reduce(sbuf, rbuf, 4, HCOMM_INT32, op, 0, c, NULL), HCOMM_ERR_INVALID_OP);
        EXPECT(hcomm_reduce_scatter(sbuf, rbuf, 4, HCOMM_UINT8, op, c, NULL), HCOMM_ERR_INVALID_OP);
        EXPECT(hcomm_iallreduce(sbuf, rbuf, 4, HCOMM_FLOAT64, op, c, &req), HCOMM_ERR_INVALID_OP);
    }
    assert_null(req);
}

static void test_invalid_rank(void **state)
{
    hcomm_comm_t    c     = *state;
    hcomm_request_t req   = NULL;
    const int       bad[] = {-1, 1, 1000000};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = bad[i];
        EXPECT(hcomm_broadcast(sbuf, rbuf, 4, HCOMM_FLOAT32, r, c, NULL), HCOMM_ERR_INVALID_RANK);
        EXPECT(hcomm_reduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, r, c, NULL),
               HCOMM_ERR_INVALID_RANK);
        EXPECT(hcomm_send(sbuf, 4, HCOMM_FLOAT32, r, c, NULL), HCOMM_ERR_INVALID_RANK);
        EXPECT(hcomm_recv(rbuf, 4, HCOMM_FLOAT32, r, c, NULL), HCOMM_ERR_INVALID_RANK);
        EXPECT(hcomm_ibroadcast(sbuf, rbuf, 4, HCOMM_FLOAT32, r, c, &req), HCOMM_ERR_INVALID_RANK);
        EXPECT(hcomm_isend(sbuf, 4, HCOMM_FLOAT32, r, c, &req), HCOMM_ERR_INVALID_RANK);
    }
    assert_null(req);
}

static void test_overflow(void **state)
{
    hcomm_comm_t c     = *state;
    const size_t big[] = {SIZE_MAX / 2, SIZE_MAX / 4 + 1, SIZE_MAX};

    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        size_t n = big[i];
        EXPECT(hcomm_allreduce(sbuf, rbuf, n, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
               HCOMM_ERR_OVERFLOW);
        EXPECT(hcomm_broadcast(sbuf, rbuf, n, HCOMM_FLOAT32, 0, c, NULL), HCOMM_ERR_OVERFLOW);
        EXPECT(hcomm_reduce(sbuf, rbuf, n, HCOMM_FLOAT32, HCOMM_SUM, 0, c, NULL),
               HCOMM_ERR_OVERFLOW);
        EXPECT(hcomm_allgather(sbuf, rbuf, n, HCOMM_FLOAT32, c, NULL), HCOMM_ERR_OVERFLOW);
        EXPECT(hcomm_reduce_scatter(sbuf, rbuf, n, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
               HCOMM_ERR_OVERFLOW);
        EXPECT(hcomm_alltoall(sbuf, rbuf, n, HCOMM_FLOAT32, c, NULL), HCOMM_ERR_OVERFLOW);
        GROUP_EXPECT(hcomm_send(sbuf, n, HCOMM_FLOAT32, 0, c, NULL), HCOMM_ERR_OVERFLOW);
    }
}

static void test_null_comm(void **state)
{
    hcomm_comm_t    nc  = NULL;
    hcomm_request_t req = NULL;
    int             v   = -7;

    (void)state;
    EXPECT(hcomm_allreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, NULL, NULL),
           HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_broadcast(sbuf, rbuf, 4, HCOMM_FLOAT32, 0, NULL, NULL), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_barrier(NULL, NULL), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_send(sbuf, 4, HCOMM_FLOAT32, 0, NULL, NULL), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_iallreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, NULL, &req),
           HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_rank(NULL, &v), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_size(NULL, &v), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_split(NULL, 0, 0, &nc), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_get_error(NULL), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_destroy(NULL), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_abort(NULL), HCOMM_ERR_INVALID_COMM);
    assert_int_equal(v, -7);
    assert_null(req);
}

/* The library keeps a registry of live communicators: a stale pointer is
 * detected without touching freed memory. */
static void calls_on_dead_comm(hcomm_comm_t dead)
{
    int             v   = -7;
    hcomm_request_t req = NULL;

    EXPECT(hcomm_allreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, dead, NULL),
           HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_barrier(dead, NULL), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_iallreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, dead, &req),
           HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_rank(dead, &v), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_get_error(dead), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_destroy(dead), HCOMM_ERR_INVALID_COMM);
    EXPECT(hcomm_comm_abort(dead), HCOMM_ERR_INVALID_COMM);
    assert_int_equal(v, -7);
    assert_null(req);
}

static void test_destroyed_comm(void **state)
{
    hcomm_comm_t c = new_comm1();

    (void)state;
    EXPECT(hcomm_comm_destroy(c), HCOMM_SUCCESS);
    calls_on_dead_comm(c);
}

static void test_aborted_comm(void **state)
{
    hcomm_comm_t c = new_comm1();

    (void)state;
    EXPECT(hcomm_comm_abort(c), HCOMM_SUCCESS);
    calls_on_dead_comm(c);
}

/* Requests the program holds outlive the communicator's destroy (MPI's rule:
 * the operations complete; wait and test end them). They once read the freed
 * communicator (the ASan run of this test found it). */
static void test_request_after_destroy(void **state)
{
    hcomm_comm_t    c    = new_comm1();
    float           a[4] = {1, 2, 3, 4}, b[4] = {0}, d[4] = {0};
    hcomm_request_t r1 = NULL, r2 = NULL;
    int             done = 0;

    (void)state;
    assert_int_equal(hcomm_iallreduce(a, b, 4, HCOMM_FLOAT32, HCOMM_SUM, c, &r1), HCOMM_SUCCESS);
    assert_int_equal(hcomm_iallreduce(a, d, 4, HCOMM_FLOAT32, HCOMM_MAX, c, &r2), HCOMM_SUCCESS);
    assert_int_equal(hcomm_comm_destroy(c), HCOMM_SUCCESS);
    assert_int_equal(hcomm_test(&r1, &done), HCOMM_SUCCESS);
    assert_true(done == 1 && r1 == NULL);
    assert_int_equal(hcomm_wait(&r2), HCOMM_SUCCESS);
    assert_null(r2);
    assert_true(b[3] == 4 && d[3] == 4);
}

static void test_request_misuse(void **state)
{
    hcomm_request_t req  = NULL;
    int             done = 5;

    (void)state;
    EXPECT(hcomm_wait(NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_wait(&req), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_test(NULL, &done), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_test(&req, &done), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(done, 5);
}

static void test_missing_outputs(void **state)
{
    hcomm_comm_t c = *state;

    EXPECT(hcomm_get_unique_id(NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_comm_rank(c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_comm_size(c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_iallreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
           HCOMM_ERR_INVALID_ARG);
}

static void test_group_misuse(void **state)
{
    hcomm_comm_t    c   = *state;
    hcomm_request_t req = NULL;

    EXPECT(hcomm_group_end(), HCOMM_ERR_INVALID_USAGE);
    EXPECT(hcomm_group_start(), HCOMM_SUCCESS);
    EXPECT(hcomm_iallreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, &req),
           HCOMM_ERR_INVALID_USAGE);
    EXPECT(hcomm_ibarrier(c, &req), HCOMM_ERR_INVALID_USAGE);
    assert_null(req);
    /* a refused call fails the group (as in NCCL): none of its calls runs,
     * not the valid allreduce queued after the refusals either */
    float in[4] = {5, 5, 5, 5}, out[4] = {0};
    EXPECT(hcomm_allreduce(in, out, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_group_end(), HCOMM_ERR_INVALID_USAGE);
    assert_true(out[0] == 0);
    EXPECT(hcomm_group_end(), HCOMM_ERR_INVALID_USAGE);
    /* the next group starts clean */
    EXPECT(hcomm_group_start(), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(in, out, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_group_end(), HCOMM_SUCCESS);
    assert_true(out[0] == 5);
}

/* a pointer that is no stream: refused, one log line each */
static void test_stream_bogus(void **state)
{
    hcomm_comm_t   c = *state;
    hcomm_stream_t s = (hcomm_stream_t)(void *)&s;

    EXPECT(hcomm_allreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, s), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_barrier(c, s), HCOMM_ERR_INVALID_ARG);
}

static void host_fn(void *arg)
{
    (void)arg;
}

/* Streams and events live in registries, as communicators do: a destroyed
 * handle (or one never created) is refused without reading freed memory (an
 * ASan build of this test catches such a read). */
static void test_stream_destroyed(void **state)
{
    hcomm_comm_t    c = *state;
    hcomm_stream_t  dead, live;
    hcomm_event_t   dead_ev, ev;
    hcomm_request_t req    = NULL;
    size_t          cnt[1] = {4}, dsp[1] = {0};

    assert_int_equal(hcomm_stream_create(&dead), HCOMM_SUCCESS);
    assert_int_equal(hcomm_stream_create(&live), HCOMM_SUCCESS);
    assert_int_equal(hcomm_event_create(&dead_ev), HCOMM_SUCCESS);
    assert_int_equal(hcomm_event_create(&ev), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, dead), HCOMM_SUCCESS);
    EXPECT(hcomm_event_record(dead_ev, dead), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_destroy(dead), HCOMM_SUCCESS);
    EXPECT(hcomm_event_destroy(dead_ev), HCOMM_SUCCESS);

    EXPECT(hcomm_allreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, dead),
           HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_allgather(sbuf, rbuf, 4, HCOMM_FLOAT32, c, dead), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_alltoallv(sbuf, cnt, dsp, rbuf, cnt, dsp, HCOMM_FLOAT32, c, dead),
           HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_barrier(c, dead), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_stream_synchronize(dead), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_stream_query(dead), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_stream_last_request(dead, &req), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_launch_host_func(dead, host_fn, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_event_record(ev, dead), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_stream_wait_event(dead, ev), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_stream_destroy(dead), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_stream_synchronize(NULL), HCOMM_ERR_INVALID_ARG);
    /* a destroyed event, on a live stream */
    EXPECT(hcomm_event_record(dead_ev, live), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_stream_wait_event(live, dead_ev), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_event_query(dead_ev), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_event_synchronize(dead_ev), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_event_destroy(dead_ev), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_event_record((hcomm_event_t)(void *)&ev, live), HCOMM_ERR_INVALID_ARG);
    assert_null(req);

    /* the live ones still work */
    EXPECT(hcomm_event_record(ev, live), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_wait_event(live, ev), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, live), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_synchronize(live), HCOMM_SUCCESS);
    EXPECT(hcomm_event_query(ev), HCOMM_SUCCESS);
    EXPECT(hcomm_event_destroy(ev), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_destroy(live), HCOMM_SUCCESS);
}

static void test_init_bad(void **state)
{
    hcomm_unique_id_t id;
    hcomm_comm_t      c = (hcomm_comm_t)(void *)&c;

    (void)state;
    assert_int_equal(hcomm_get_unique_id(&id), HCOMM_SUCCESS);
    EXPECT(hcomm_comm_init(&c, 1, &id, 1), HCOMM_ERR_INVALID_RANK);
    EXPECT(hcomm_comm_init(&c, 1, &id, -1), HCOMM_ERR_INVALID_RANK);
    EXPECT2(hcomm_comm_init(&c, 0, &id, 0), HCOMM_ERR_INVALID_ARG, HCOMM_ERR_INVALID_RANK);
    EXPECT(hcomm_comm_init(&c, 1, NULL, 0), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_comm_init(NULL, 1, &id, 0), HCOMM_ERR_INVALID_ARG);
    assert_ptr_equal(c, (hcomm_comm_t)(void *)&c);
    /* the id is still good after the rejected calls */
    EXPECT(hcomm_comm_init(&c, 1, &id, 0), HCOMM_SUCCESS);
    EXPECT(hcomm_comm_destroy(c), HCOMM_SUCCESS);
}

/* Argument errors are the caller's, not the communicator's: it stays usable. */
static void test_errors_do_not_poison(void **state)
{
    hcomm_comm_t c     = *state;
    float        in[5] = {1, 2, 3, 4, 5}, out[5] = {0};

    EXPECT(hcomm_allreduce(NULL, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
           HCOMM_ERR_NULL_BUFFER);
    EXPECT(hcomm_allreduce(sbuf, rbuf, 4, (hcomm_dtype_t)99, HCOMM_SUM, c, NULL),
           HCOMM_ERR_INVALID_DTYPE);
    EXPECT(hcomm_comm_get_error(c), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(in, out, 5, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    for (int i = 0; i < 5; i++)
        assert_true(out[i] == in[i]);
}

/* ---- two ranks: rank 1 is a helper forked before any library call ---- */

#define T2(cond, ...)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            int n_ = snprintf(err, errlen, "line %d: ", __LINE__);                                 \
            snprintf(err + n_, errlen - (size_t)n_, __VA_ARGS__);                                  \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int allreduce_ok(hcomm_comm_t c)
{
    float in[8], out[8];
    for (int i = 0; i < 8; i++)
        in[i] = (float)(i + 1), out[i] = -1;
    if (hcomm_allreduce(in, out, 8, HCOMM_FLOAT32, HCOMM_SUM, c, NULL) != HCOMM_SUCCESS)
        return 0;
    for (int i = 0; i < 8; i++)
        if (out[i] != 2 * in[i])
            return 0;
    return 1;
}

/* Local argument errors on a two-rank comm (no traffic, no desync), then rank 1
 * aborts and rank 0's next call must fail with a peer error or a timeout. */
static int two_rank_script(int rank, const hcomm_unique_id_t *id, char *err, size_t errlen)
{
    const size_t   big = SIZE_MAX / 8 + 1; /* 4 * big fits in size_t, 2 * 4 * big does not */
    hcomm_comm_t   c   = NULL;
    hcomm_status_t st;
    int            ret = -1;

    st = hcomm_comm_init(&c, 2, id, rank);
    T2(st == HCOMM_SUCCESS, "comm_init rank %d: %s", rank, hcomm_status_name(st));
    T2(allreduce_ok(c), "first allreduce failed or wrong");
    st = hcomm_broadcast(sbuf, rbuf, 4, HCOMM_FLOAT32, 2, c, NULL);
    T2(st == HCOMM_ERR_INVALID_RANK, "broadcast root 2: %s", hcomm_status_name(st));
    st = hcomm_reduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, -1, c, NULL);
    T2(st == HCOMM_ERR_INVALID_RANK, "reduce root -1: %s", hcomm_status_name(st));
    st = hcomm_send(sbuf, 4, HCOMM_FLOAT32, 2, c, NULL);
    T2(st == HCOMM_ERR_INVALID_RANK, "send peer 2: %s", hcomm_status_name(st));
    st = hcomm_recv(rbuf, 4, HCOMM_FLOAT32, -1, c, NULL);
    T2(st == HCOMM_ERR_INVALID_RANK, "recv peer -1: %s", hcomm_status_name(st));
    hcomm_request_t req = NULL;
    st                  = hcomm_isend(NULL, 4, HCOMM_FLOAT32, 1 - rank, c, &req);
    T2(st == HCOMM_ERR_NULL_BUFFER && req == NULL, "isend NULL: %s", hcomm_status_name(st));
    st = hcomm_irecv(NULL, 4, HCOMM_FLOAT32, 1 - rank, c, &req);
    T2(st == HCOMM_ERR_NULL_BUFFER && req == NULL, "irecv NULL: %s", hcomm_status_name(st));
    st = hcomm_isend(sbuf, 4, (hcomm_dtype_t)99, 1 - rank, c, &req);
    T2(st == HCOMM_ERR_INVALID_DTYPE && req == NULL, "isend dtype 99: %s", hcomm_status_name(st));
    st = hcomm_send(sbuf, SIZE_MAX / 2, HCOMM_FLOAT32, 1 - rank, c, NULL);
    T2(st == HCOMM_ERR_OVERFLOW, "send SIZE_MAX/2 floats: %s", hcomm_status_name(st));
    st = hcomm_allgather(sbuf, rbuf, big, HCOMM_FLOAT32, c, NULL);
    T2(st == HCOMM_ERR_OVERFLOW, "allgather 2 x 2^63 bytes: %s", hcomm_status_name(st));
    st = hcomm_reduce_scatter(sbuf, rbuf, big, HCOMM_FLOAT32, HCOMM_SUM, c, NULL);
    T2(st == HCOMM_ERR_OVERFLOW, "reduce_scatter 2 x 2^63 bytes: %s", hcomm_status_name(st));
    st = hcomm_alltoall(sbuf, rbuf, big, HCOMM_FLOAT32, c, NULL);
    T2(st == HCOMM_ERR_OVERFLOW, "alltoall 2 x 2^63 bytes: %s", hcomm_status_name(st));
    T2(allreduce_ok(c), "allreduce after the argument errors failed or wrong");
    st = hcomm_barrier(c, NULL);
    T2(st == HCOMM_SUCCESS, "barrier: %s", hcomm_status_name(st));
    if (rank == 1) {
        st = hcomm_comm_abort(c);
        c  = NULL;
        T2(st == HCOMM_SUCCESS, "abort: %s", hcomm_status_name(st));
        return 0;
    }
    double t0 = now_s();
    st        = hcomm_allreduce(sbuf, rbuf, 4, HCOMM_FLOAT32, HCOMM_SUM, c, NULL);
    double el = now_s() - t0;
    T2(st <= HCOMM_ERR_REMOTE,
       "allreduce with an aborted peer returned %s, expected a peer "
       "error or a timeout",
       hcomm_status_name(st));
    T2(el < atof(TWO_RANK_TIMEOUT) + 5, "failing took %.1f s", el);
    st = hcomm_comm_get_error(c);
    T2(st < 0, "comm_get_error after a failure: %s", hcomm_status_name(st));
    st = hcomm_barrier(c, NULL);
    T2(st < 0, "a call after a failure succeeded");
    hcomm_comm_destroy(c); /* may report the failure; must return */
    st = hcomm_barrier(c, NULL);
    c  = NULL;
    T2(st == HCOMM_ERR_INVALID_COMM, "barrier after destroy: %s", hcomm_status_name(st));
    ret = 0;
out:
    if (c != NULL)
        hcomm_comm_abort(c);
    return ret;
}

static int read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static int helper_main(int fd)
{
    hcomm_unique_id_t id;
    char              err[256] = "", path[300];

    alarm(TEST_ALARM_S + 30);
    snprintf(path, sizeof(path), "%s/helper.log", tmp_dir);
    setenv("HCOMM_LOG_FILE", path, 1);
    if (read_full(fd, &id, sizeof(id)) != 0)
        return 0; /* the two-rank test did not run */
    if (two_rank_script(1, &id, err, sizeof(err)) != 0) {
        fprintf(stderr, "bad_input: rank 1 helper: %s\n", err);
        return 1;
    }
    return 0;
}

static int wait_helper(double timeout_s)
{
    double end = now_s() + timeout_s;
    int    status;

    while (now_s() < end) {
        pid_t p = waitpid(helper_pid, &status, WNOHANG);
        if (p == helper_pid) {
            helper_pid = -1;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    kill(helper_pid, SIGKILL);
    waitpid(helper_pid, &status, 0);
    helper_pid = -1;
    return -1;
}

static void test_two_ranks(void **state)
{
    hcomm_unique_id_t id;
    char              err[256] = "";
    int               rc, hrc;

    (void)state;
    if (helper_pid < 0) {
        print_message("no rank-1 helper process: skipping\n");
        skip();
    }
    assert_int_equal(hcomm_get_unique_id(&id), HCOMM_SUCCESS);
    assert_int_equal(write(helper_fd, &id, sizeof(id)), (ssize_t)sizeof(id));
    rc  = two_rank_script(0, &id, err, sizeof(err));
    hrc = wait_helper(30);
    if (rc != 0)
        fail_msg("rank 0: %s", err);
    if (hrc != 0)
        fail_msg("rank 1 helper exited with %d (-1: hung, killed)", hrc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_null_buffers, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_zero_count_null_ok, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_invalid_dtype, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_invalid_op, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_invalid_rank, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_overflow, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_null_comm, setup_plain, teardown_plain),
        cmocka_unit_test_setup_teardown(test_destroyed_comm, setup_plain, teardown_plain),
        cmocka_unit_test_setup_teardown(test_aborted_comm, setup_plain, teardown_plain),
        cmocka_unit_test_setup_teardown(test_request_misuse, setup_plain, teardown_plain),
        cmocka_unit_test_setup_teardown(test_request_after_destroy, setup_plain, teardown_plain),
        cmocka_unit_test_setup_teardown(test_missing_outputs, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_group_misuse, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_stream_bogus, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_stream_destroyed, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_init_bad, setup_plain, teardown_plain),
        cmocka_unit_test_setup_teardown(test_errors_do_not_poison, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_two_ranks, setup_plain, teardown_plain),
    };
    int fds[2], failed, ntests = (int)(sizeof(tests) / sizeof(tests[0]));

    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/hcomm-bad-input-XXXXXX");
    if (mkdtemp(tmp_dir) == NULL) {
        perror("bad_input: mkdtemp");
        return 99;
    }
    snprintf(log_path, sizeof(log_path), "%s/log", tmp_dir);
    setenv("HCOMM_LOG_FILE", log_path, 1);
    setenv("HCOMM_LOG_LEVEL", "warn", 1);
    setenv("HCOMM_TIMEOUT", TWO_RANK_TIMEOUT, 1);
    unsetenv("HCOMM_RANK"), unsetenv("HCOMM_NRANKS"), unsetenv("HCOMM_ROOT");
    signal(SIGALRM, on_alarm);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe(fds) == 0) {
        helper_pid = fork();
        if (helper_pid == 0) {
            close(fds[1]);
            _exit(helper_main(fds[0]));
        }
        close(fds[0]);
        helper_fd = fds[1];
        if (helper_pid < 0)
            perror("bad_input: fork");
    }
    failed = cmocka_run_group_tests(tests, NULL, NULL);
    close(helper_fd);
    if (helper_pid > 0)
        wait_helper(10);
    printf("%d passed, %d failed\n", ntests - failed, failed);
    if (failed == 0) {
        char path[300];
        snprintf(path, sizeof(path), "%s/helper.log", tmp_dir);
        unlink(path);
        unlink(log_path);
        rmdir(tmp_dir);
    } else {
        printf("bad_input: library log kept in %s\n", tmp_dir);
    }
    return failed ? 1 : 0;
}
