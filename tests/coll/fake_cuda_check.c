/*
 * fake_cuda_check - CUDA-ordered streams without a GPU, on the fake CUDA
 * stream of fake_cuda.c (one rank, or under hcomm-run). Run with a short
 * HCOMM_TIMEOUT (run_streams.sh: 1 s). Cases, one per run (the fake stream's
 * delay holds for the process):
 *   bucket  the CUDA stream does not reach the buckets' tasks in time: the
 *           step's wait must fail, not report success with each tensor still
 *           holding the rank's own gradient, and fail at once, not "stuck";
 *   long    a host function runs longer than HCOMM_TIMEOUT, so the CUDA
 *           stream's later work goes on without it: the stream must say so
 *           (synchronize and query fail), not report success.
 * Exit: 0 all passed, 1 a check failed, 2 init failure or bad arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "hcomm.h"
#include "hcomm_bucket.h"
#include "hcomm_stream.h"
#include "test_comm.h"

static int g_rank, g_failed, g_checks;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double timeout_s(void)
{
    const char *e = getenv("HCOMM_TIMEOUT");
    return e != NULL ? atof(e) : 300;
}

static int case_bucket(void)
{
    hcomm_comm_t    comm;
    hcomm_stream_t  s;
    hcomm_buckets_t bk;
    int             n;
    static float    a[4], b[4];

    fake_cuda_delay = 4 * timeout_s(); /* the CUDA stream is busy well past it */
    if (test_comm_init(&comm, &g_rank, &n) != HCOMM_SUCCESS)
        return 2;
    for (int i = 0; i < 4; i++)
        a[i] = b[i] = (float)(g_rank + 1);
    void  *t[2] = {a, b};
    size_t c[2] = {4, 4};
    CHECK(hcomm_stream_create_cuda((void *)0x1, &s) == HCOMM_SUCCESS, "create_cuda");
    CHECK(hcomm_buckets_create(comm, 2, t, c, HCOMM_FLOAT32, NULL, s, &bk) == HCOMM_SUCCESS,
          "buckets_create");
    hcomm_buckets_ready(bk, 0);
    hcomm_buckets_ready(bk, 1);
    double         t0 = now();
    hcomm_status_t st = hcomm_buckets_wait(bk);
    double         dt = now() - t0;
    printf("rank %d: buckets_wait -> %s after %.1f s; a[0]=%g b[0]=%g\n", g_rank,
           hcomm_status_str(st), dt, a[0], b[0]);
    CHECK(st == HCOMM_ERR_TIMEOUT, "buckets_wait on a stalled CUDA stream: %s, not a timeout",
          hcomm_status_str(st));
    /* failed at once, not "stuck": the step was reset, so a second wait is a
     * usage error (a stuck one would wait again and, once the CUDA stream
     * came, say success with the local gradients) */
    st = hcomm_buckets_wait(bk);
    printf("rank %d: buckets_wait again -> %s\n", g_rank, hcomm_status_str(st));
    CHECK(st == HCOMM_ERR_INVALID_USAGE, "the second wait: %s (the first left the step as it was)",
          hcomm_status_str(st));
    CHECK(hcomm_stream_query(s) == HCOMM_ERR_TIMEOUT, "query: %s",
          hcomm_status_str(hcomm_stream_query(s)));
    printf("%s: %d of %d checks failed\n", g_failed ? "FAIL" : "PASS", g_failed, g_checks);
    fflush(stdout);
    _exit(g_failed ? 1 : 0); /* the CUDA callbacks still to come hold the stream */
}

/* written by the stream's and the fake CUDA stream's threads */
static int g_produced;

static void slow_compute(void *arg)
{
    struct timespec ts = {(time_t)(2.5 * timeout_s()),
                          (long)((2.5 * timeout_s() - (double)(time_t)(2.5 * timeout_s())) * 1e9)};
    (void)arg;
    nanosleep(&ts, NULL);
    __atomic_store_n(&g_produced, 1, __ATOMIC_RELEASE);
}

static int g_consumer_saw = -1;

static void cuda_consumer(void *arg)
{
    (void)arg;
    __atomic_store_n(&g_consumer_saw, __atomic_load_n(&g_produced, __ATOMIC_ACQUIRE),
                     __ATOMIC_RELEASE);
}

static int case_long(void)
{
    hcomm_stream_t s;

    fake_cuda_delay = 0;
    CHECK(hcomm_stream_create_cuda((void *)0x1, &s) == HCOMM_SUCCESS, "create_cuda");
    hcomm_launch_host_func(s, slow_compute, NULL);
    hc_stream_cuda_bracket((void *)0x1, cuda_consumer, NULL); /* CUDA work after the task */
    hcomm_status_t st = hcomm_stream_synchronize(s);
    while (!__atomic_load_n(&g_produced, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&g_consumer_saw, __ATOMIC_ACQUIRE) < 0)
        usleep(10000);
    usleep(100000);
    int            saw = __atomic_load_n(&g_consumer_saw, __ATOMIC_ACQUIRE);
    hcomm_status_t st2 = hcomm_stream_synchronize(s), q = hcomm_stream_query(s);
    printf("synchronize -> %s; the CUDA stream's later work saw the task %s; later: "
           "synchronize -> %s, query -> %s\n",
           hcomm_status_str(st), saw ? "finished" : "unfinished", hcomm_status_str(st2),
           hcomm_status_str(q));
    if (saw == 0) { /* the CUDA stream went on: the stream must say so */
        CHECK(st2 == HCOMM_ERR_TIMEOUT, "synchronize after the CUDA stream went on: %s",
              hcomm_status_str(st2));
        CHECK(q == HCOMM_ERR_TIMEOUT, "query after the CUDA stream went on: %s",
              hcomm_status_str(q));
    }
    st = hcomm_stream_destroy(s);
    CHECK(st == HCOMM_ERR_TIMEOUT, "destroy: %s (the stream's error)", hcomm_status_str(st));
    return g_failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rc = 2;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2 && strcmp(argv[1], "bucket") == 0)
        rc = case_bucket();
    else if (argc == 2 && strcmp(argv[1], "long") == 0)
        rc = case_long();
    else
        fprintf(stderr, "usage: %s bucket|long\n", argv[0]);
    if (rc != 2)
        printf("%s: %d of %d checks failed\n", rc ? "FAIL" : "PASS", g_failed, g_checks);
    return rc;
}
