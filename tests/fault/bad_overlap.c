/*
 * bad_overlap - a call's send and receive buffers are either in place (as NCCL
 * defines it for each collective) or share no byte; anything between gave
 * silently wrong results and is now refused with HCOMM_ERR_INVALID_ARG and
 * exactly one log line. Every call that takes both buffers: blocking,
 * nonblocking, on a stream, in a group; alltoallv by the spans of its blocks
 * (counts and displacements); the compressed allreduce. Count 0 is always
 * valid, and so are buffers that only touch.
 *
 * One process with one-rank communicators: the checks are local.
 * tests/coll/coll_overlap.c runs the layouts that depend on the rank (an
 * allgather's block of the whole buffer) on several ranks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "expect_log.h"
#include "hcomm.h"
#include "hcomm_compress.h"
#include "hcomm_stream.h"

#define TEST_ALARM_S 60
#define N 16 /* elements per block */

static char  tmp_dir[128];
static float buf[8 * N];

static int setup_comm(void **state)
{
    hcomm_unique_id_t id;
    hcomm_comm_t      c = NULL;

    alarm(TEST_ALARM_S);
    if (hcomm_get_unique_id(&id) != HCOMM_SUCCESS || hcomm_comm_init(&c, 1, &id, 0) != 0)
        return -1;
    *state = c;
    return 0;
}

static int teardown_comm(void **state)
{
    hcomm_status_t st = hcomm_comm_destroy((hcomm_comm_t)*state);
    alarm(0);
    return st == HCOMM_SUCCESS ? 0 : -1;
}

static void fill(float *x, size_t n, float base)
{
    for (size_t i = 0; i < n; i++)
        x[i] = base + (float)i;
}

/* Every collective with its buffers one element apart: blocking, nonblocking. */
static void test_partial_overlap(void **state)
{
    hcomm_comm_t    c   = *state;
    float          *b   = buf;
    hcomm_request_t req = NULL;

    EXPECT(hcomm_allreduce(b, b + 1, N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_allreduce(b + 1, b, N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_broadcast(b, b + 1, N, HCOMM_FLOAT32, 0, c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_reduce(b, b + 1, N, HCOMM_FLOAT32, HCOMM_SUM, 0, c, NULL), HCOMM_ERR_INVALID_ARG);
    /* in place would be sendbuf == recvbuf + rank x count, here recvbuf */
    EXPECT(hcomm_allgather(b + 1, b, N, HCOMM_FLOAT32, c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_reduce_scatter(b, b + 1, N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
           HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_alltoall(b, b + 1, N, HCOMM_FLOAT32, c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_iallreduce(b, b + 1, N, HCOMM_FLOAT32, HCOMM_SUM, c, &req), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_ibroadcast(b + 1, b, N, HCOMM_FLOAT32, 0, c, &req), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_ireduce(b, b + 1, N, HCOMM_FLOAT32, HCOMM_MAX, 0, c, &req), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_iallgather(b, b + 1, N, HCOMM_FLOAT32, c, &req), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_ireduce_scatter(b + 1, b, N, HCOMM_FLOAT32, HCOMM_SUM, c, &req),
           HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_ialltoall(b + 1, b, N, HCOMM_FLOAT32, c, &req), HCOMM_ERR_INVALID_ARG);
    assert_null(req);
}

/* The same refusals on a stream (nothing queued) and inside a group (nothing
 * added: the group end returns the refusal and does not hang). */
static void test_overlap_stream_group(void **state)
{
    hcomm_comm_t   c = *state;
    float         *b = buf;
    hcomm_stream_t s;

    assert_int_equal(hcomm_stream_create(&s), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(b, b + 3, N, HCOMM_FLOAT32, HCOMM_SUM, c, s), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_allgather(b + 2, b, N, HCOMM_FLOAT32, c, s), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_stream_synchronize(s), HCOMM_SUCCESS);
    EXPECT(hcomm_stream_destroy(s), HCOMM_SUCCESS);
    GROUP_EXPECT(hcomm_allreduce(b, b + 1, N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
                 HCOMM_ERR_INVALID_ARG);
    GROUP_EXPECT(hcomm_reduce_scatter(b, b + N - 1, N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL),
                 HCOMM_ERR_INVALID_ARG);
}

/* The byte extents exactly: one shared byte is refused, touching is fine. */
static void test_overlap_edges(void **state)
{
    hcomm_comm_t c = *state;
    uint8_t     *b = (uint8_t *)buf;

    EXPECT(hcomm_allreduce(b, b + 9, 10, HCOMM_UINT8, HCOMM_SUM, c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_allreduce(b + 9, b, 10, HCOMM_UINT8, HCOMM_SUM, c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_allreduce(b, b + 10, 10, HCOMM_UINT8, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce(b + 10, b, 10, HCOMM_UINT8, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    /* 8-byte elements: the size is count x element size */
    EXPECT(hcomm_allgather(b, b + 15, 2, HCOMM_FLOAT64, c, NULL), HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_allgather(b, b + 16, 2, HCOMM_FLOAT64, c, NULL), HCOMM_SUCCESS);
}

/* In place, count 0 and disjoint buffers stay valid: success, no log line. */
static void test_valid_layouts(void **state)
{
    hcomm_comm_t c = *state;
    float       *b = buf;

    fill(b, N, 1);
    EXPECT(hcomm_allreduce(b, b, N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_broadcast(b, b, N, HCOMM_FLOAT32, 0, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_reduce(b, b, N, HCOMM_FLOAT32, HCOMM_SUM, 0, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_allgather(b, b, N, HCOMM_FLOAT32, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_reduce_scatter(b, b, N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_alltoall(b, b, N, HCOMM_FLOAT32, c, NULL), HCOMM_SUCCESS);
    for (int i = 0; i < N; i++)
        assert_true(b[i] == 1.0f + (float)i);
    EXPECT(hcomm_allreduce(b, b + 1, 0, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_allgather(b + 1, b, 0, HCOMM_FLOAT32, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_alltoall(b, b + 1, 0, HCOMM_FLOAT32, c, NULL), HCOMM_SUCCESS);
    fill(b, 2 * N, 0);
    EXPECT(hcomm_allreduce(b, b + N, N, HCOMM_FLOAT32, HCOMM_SUM, c, NULL), HCOMM_SUCCESS);
    for (int i = 0; i < N; i++)
        assert_true(b[N + i] == (float)i);
}

/* alltoallv: the spans of the blocks, from counts and displacements. */
static void test_alltoallv(void **state)
{
    hcomm_comm_t c      = *state;
    float       *b      = buf;
    size_t       cnt[1] = {N}, zero[1] = {0}, d0[1] = {0}, d8[1] = {8}, dn[1] = {N};

    EXPECT(hcomm_alltoallv(b, cnt, d0, b + 1, cnt, d0, HCOMM_FLOAT32, c, NULL),
           HCOMM_ERR_INVALID_ARG);
    /* the send block b[8, 8 + N) and the receive block b[N, 2N) share 8 elements */
    EXPECT(hcomm_alltoallv(b, cnt, d8, b + N, cnt, d0, HCOMM_FLOAT32, c, NULL),
           HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_alltoallv(b + N, cnt, d0, b, cnt, d8, HCOMM_FLOAT32, c, NULL),
           HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_alltoallv(b, cnt, d0, b, cnt, dn, HCOMM_FLOAT32, c, NULL),
           HCOMM_ERR_INVALID_ARG); /* the same buffer: no in-place alltoallv */
    EXPECT(hcomm_alltoallv(b, zero, d0, b + 1, zero, d0, HCOMM_FLOAT32, c, NULL), HCOMM_SUCCESS);
    /* disjoint through the displacement: the receive block starts past the send block */
    fill(b, 3 * N, 0);
    EXPECT(hcomm_alltoallv(b, cnt, d0, b + 1, cnt, dn, HCOMM_FLOAT32, c, NULL), HCOMM_SUCCESS);
    for (int i = 0; i < N; i++)
        assert_true(b[1 + N + i] == (float)i);
}

static void test_alltoallv_dynamic(void **state)
{
    hcomm_comm_t c      = *state;
    float       *b      = buf;
    size_t       cnt[1] = {N}, d0[1] = {0}, got[1] = {99};

    EXPECT(hcomm_alltoallv_dynamic(b, cnt, d0, b + 1, 4 * N, got, HCOMM_FLOAT32, c, NULL),
           HCOMM_ERR_INVALID_ARG);
    assert_int_equal(got[0], 99);
    EXPECT(hcomm_alltoallv_dynamic(b + N, cnt, d0, b, 4 * N, got, HCOMM_FLOAT32, c, NULL),
           HCOMM_SUCCESS);
    assert_int_equal(got[0], N);
}

static void test_compressed(void **state)
{
    hcomm_comm_t            c = *state;
    float                  *b = buf;
    hcomm_compress_config_t cfg;
    hcomm_compress_t        cs = NULL;

    assert_int_equal(hcomm_compress_parse("bf16", &cfg), HCOMM_SUCCESS);
    assert_int_equal(hcomm_compress_create(c, &cfg, N, HCOMM_FLOAT32, &cs), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce_compressed(b, b + 1, N, HCOMM_FLOAT32, cs, c, NULL),
           HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_allreduce_compressed(b + N - 1, b, N, HCOMM_FLOAT32, cs, c, NULL),
           HCOMM_ERR_INVALID_ARG);
    EXPECT(hcomm_allreduce_compressed(b, b, N, HCOMM_FLOAT32, cs, c, NULL), HCOMM_SUCCESS);
    EXPECT(hcomm_allreduce_compressed(b, b + N, N, HCOMM_FLOAT32, cs, c, NULL), HCOMM_SUCCESS);
    hcomm_compress_destroy(cs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_partial_overlap, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_overlap_stream_group, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_overlap_edges, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_valid_layouts, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_alltoallv, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_alltoallv_dynamic, setup_comm, teardown_comm),
        cmocka_unit_test_setup_teardown(test_compressed, setup_comm, teardown_comm),
    };
    int failed;

    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/hcomm-bad-overlap-XXXXXX");
    if (mkdtemp(tmp_dir) == NULL) {
        perror("bad_overlap: mkdtemp");
        return 99;
    }
    snprintf(log_path, sizeof(log_path), "%s/log", tmp_dir);
    setenv("HCOMM_LOG_FILE", log_path, 1);
    setenv("HCOMM_LOG_LEVEL", "warn", 1);
    unsetenv("HCOMM_RANK"), unsetenv("HCOMM_NRANKS"), unsetenv("HCOMM_ROOT");
    setvbuf(stdout, NULL, _IOLBF, 0);
    failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (failed == 0) {
        unlink(log_path);
        rmdir(tmp_dir);
    } else {
        printf("bad_overlap: library log kept in %s\n", tmp_dir);
    }
    return failed ? 1 : 0;
}
