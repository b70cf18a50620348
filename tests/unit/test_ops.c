/* test_ops.c - operation records (core/ops.h) on a communicator of no
 * transport: numbers in issue order, states and times through start and end,
 * the ring of the last ones and what hc_ops_snapshot shows (ended ones, then
 * queued and running ones with the peers a running one waits for); and the
 * trace file's name (%p expanded, the rank before .json) and content, and
 * its records in number order whatever order operations end in; and
 * ticks read live turned into ns by the rate between readings of both clocks
 * taken as operations end, not by the rate measured at open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/ops.h"

#define NREQ 12

static char dir[] = "/tmp/test_ops.XXXXXX"; /* the trace file, one a process */

static struct hcomm_comm    comm;
static hc_sched_t           scheds[NREQ], group;
static struct hcomm_request reqs[NREQ];
static hc_step_t            steps[3];
static uint8_t              state[3];

static void comm_setup(void)
{
    memset(&comm, 0, sizeof(comm));
    memset(reqs, 0, sizeof(reqs));
    comm.rank = 1, comm.nranks = 4;
    assert_int_equal(hc_ops_init(&comm), HCOMM_SUCCESS);
    /* a running request waits for its posted send to 2 and receive from 3 */
    steps[0] = (hc_step_t){.kind = HC_STEP_SEND, .peer = 2};
    steps[1] = (hc_step_t){.kind = HC_STEP_RECV, .peer = 3};
    steps[2] = (hc_step_t){.kind = HC_STEP_COPY, .peer = -1};
    for (int i = 0; i < NREQ; i++) {
        scheds[i]    = (hc_sched_t){.steps  = steps,
                                    .nsteps = 3,
                                    .algo   = HC_ALGO_RING,
                                    .coll   = HC_COLL_ALLREDUCE,
                                    .dtype  = HCOMM_FLOAT32,
                                    .peer   = -1};
        reqs[i].comm = &comm, reqs[i].sched = &scheds[i], reqs[i].state = state;
    }
    group = (hc_sched_t){
        .steps = steps, .nsteps = 3, .coll = HC_OP_GROUP, .peer = -1, .count = 3, .bytes = 96};
}

/* Issues reqs[i] as an allreduce of count elements, queued (as hc_coll_enqueue:
 * its schedule says what it does). */
static void issue(int i, size_t count)
{
    reqs[i].sched   = &scheds[i];
    scheds[i].count = count;
    scheds[i].bytes = count * 4;
    hc_ops_issue(&comm, &reqs[i], 0);
    hc_comm_enqueue(&comm, &reqs[i], 0);
}

/* Ends the head request with status (as the queue's progress does). */
static void end_head(hcomm_status_t status)
{
    hcomm_request_t r = comm.req_head;
    comm.req_head     = r->next;
    if (comm.req_head == NULL)
        comm.req_tail = NULL;
    r->status = status;
    hc_ops_end(&comm, r);
}

static void test_records(void **st)
{
    hc_op_view_t v[16];
    (void)st;
    setenv("HCOMM_OPS_RING", "4", 1);
    hc_params_reload();
    comm_setup();
    assert_int_equal(comm.ops_mask, 3);
    for (int i = 0; i < 7; i++)
        issue(i, 10 + (size_t)i);
    for (int i = 0; i < 5; i++) { /* the executor's coarse readings: start, then a step */
        hc_ops_start(comm.req_head, 1000 + 10 * (uint64_t)i);
        comm.ops_coarse = 1005 + 10 * (uint64_t)i;
        comm.bytes_sent += 40;
        end_head(i == 4 ? HCOMM_ERR_REMOTE : HCOMM_SUCCESS);
    }
    hc_ops_start(comm.req_head, 2000); /* the 6th runs, the 7th waits */
    state[0] = state[1] = 1;           /* both transfers posted */
    comm.bytes_sent += 8;
    int n = hc_ops_snapshot(&comm, v, 16);
    assert_int_equal(n, 6); /* the ring's 4 ended (2..5), then 6 and 7 */
    for (int i = 0; i < n; i++)
        assert_int_equal(v[i].rec.seq, 2 + (uint64_t)i);
    assert_int_equal(v[0].rec.state, HC_OP_DONE);
    assert_int_equal(v[3].rec.state, HC_OP_FAILED);
    assert_int_equal(v[3].rec.status, HCOMM_ERR_REMOTE);
    assert_int_equal(v[0].rec.sent, 40);
    assert_int_equal(v[0].rec.count, 11);
    assert_int_equal(hc_op_bytes(&v[0].rec), 44);
    assert_int_equal(v[0].rec.peer, -1);
    assert_string_equal(hc_ops_algo_name(&v[0].rec), "ring");
    /* queued at issue: a coarse clock reading of its own, not the executor's */
    assert_true(v[0].rec.t_start == 1010 && v[0].rec.t_end == 1015 && v[0].rec.t_issue > 1015);
    assert_int_equal(v[0].rec.cseq, 2); /* collectives numbered alike on every rank */
    assert_int_equal(comm.ops_pub.ccount, 7);
    assert_int_equal(comm.ops_pub.ended, 5);
    assert_int_equal(v[4].rec.state, HC_OP_RUNNING);
    assert_int_equal(v[4].rec.sent, 8); /* so far */
    assert_int_equal(v[4].nwaiting, 2);
    assert_int_equal(v[4].waiting[0], 2);
    assert_int_equal(v[4].waiting[1], 3);
    assert_int_equal(v[5].rec.state, HC_OP_QUEUED);
    assert_int_equal(v[5].nwaiting, 0);
    n = hc_ops_snapshot(&comm, v, 3); /* the newest 3 */
    assert_int_equal(n, 3);
    assert_int_equal(v[0].rec.seq, 5);
    assert_int_equal(v[2].rec.seq, 7);
    n = hc_ops_snapshot(&comm, v, 1);
    assert_int_equal(v[0].rec.seq, 7);
    hc_ops_fini(&comm);
    unsetenv("HCOMM_OPS_RING");
    hc_params_reload();
}

/* Counts needle in the file at path. */
static int count_in(const char *path, const char *needle)
{
    FILE  *f = fopen(path, "r");
    char   line[4096];
    int    n = 0;
    size_t k = strlen(needle);
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        for (const char *p = line; (p = strstr(p, needle)) != NULL; p += k)
            n++;
    fclose(f);
    return n;
}

/* The operations (ph X) in the file at path that start in [lo, hi] us, and
 * in *out those that start outside it; one of over long_us is not counted. */
static int count_between(const char *path, double lo, double hi, double long_us, int *out)
{
    FILE *f = fopen(path, "r");
    char  line[4096];
    int   n = 0;
    assert_non_null(f);
    *out = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *x = strstr(line, "\"ph\":\"X\""), *ts = strstr(line, "\"ts\":"),
                   *dur = strstr(line, "\"dur\":");
        if (x == NULL || ts == NULL || dur == NULL || strtod(dur + 6, NULL) > long_us)
            continue;
        double t = strtod(ts + 5, NULL);
        if (t >= lo && t <= hi)
            n++;
        else
            (*out)++;
    }
    fclose(f);
    return n;
}

/* Enough operations for the ring's halves to go to the spill files, some of
 * which do not pack (groups, one of 4e9 ticks), then a flush: every one is in
 * the file, in a whole JSON document, at the time it ran (TSC ticks turned
 * into CLOCK_MONOTONIC by the spans between spills: a nap now and then makes
 * spans of over 1 ms, which are timed by their ends). */
static void test_trace_file(void **st)
{
    char pattern[64], path[96], tail[8];
    enum { NOPS = 5000 };
    (void)st;
    snprintf(pattern, sizeof(pattern), "%s/t.%%p.json", dir);
    setenv("HCOMM_TRACE_FILE", pattern, 1);
    hc_params_reload();
    comm_setup();
    hc_trace_open(&comm);
    assert_non_null(comm.trace);
    assert_int_not_equal(comm.ops_clock, HC_OP_CLOCK_COARSE);
    double t0 = (double)hc_clock_now_ns() / 1e3;
    for (int i = 0; i < NOPS; i++) {
        if (i % 1000 == 999) {
            struct timespec nap = {0, 1500000};
            nanosleep(&nap, NULL);
        }
        hcomm_request_t r = &reqs[i % NREQ];
        if (i % 100 == 99) {
            r->sched = &group;
            hc_ops_issue(&comm, r, 0);
            hc_comm_enqueue(&comm, r, 0);
        } else {
            issue(i % NREQ, 5);
        }
        hc_ops_start(comm.req_head, 0);
        if (i == 1234)
            r->op.t_start -= 4000000000ull; /* a long one */
        end_head(HCOMM_SUCCESS);
    }
    double t1 = (double)hc_clock_now_ns() / 1e3;
    hc_trace_flush(&comm);
    snprintf(path, sizeof(path), "%s/t.%d.1.json", dir, (int)getpid());
    assert_int_equal(count_in(path, "\"ph\":\"X\""), NOPS);
    int outside = 0; /* all but the long one, within 100 us of when they ran */
    assert_int_equal(count_between(path, t0 - 100, t1 + 100, 1e6, &outside), NOPS - 1);
    assert_int_equal(outside, 0);
    assert_int_equal(count_in(path, "\"calls\":3,\"bytes\":96,"), NOPS / 100);
    assert_int_equal(count_in(path, "\"seq\":5000,"), 1);
    assert_int_equal(count_in(path, "records lost"), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char head[17] = "";
    assert_int_equal(fread(head, 1, 16, f), 16);
    assert_string_equal(head, "{\"traceEvents\":[");
    assert_int_equal(fseek(f, -4, SEEK_END), 0);
    assert_int_equal(fread(tail, 1, 4, f), 4);
    tail[4] = '\0';
    assert_string_equal(tail, "\n]}\n");
    fclose(f);
    hc_trace_close(&comm);
    hc_ops_fini(&comm);
    assert_int_equal(count_in(path, "\"ph\":\"X\""), NOPS); /* nothing twice */
    unsetenv("HCOMM_TRACE_FILE");
    hc_params_reload();
}

/* Records go to the trace in number order whatever order operations end in:
 * an operation that ends before one ahead of it waits for it (while the
 * executor says it idles too); one still running after half a traced ring
 * (256) of later ones has ended is lost, and counted, not waited for. */
static void test_trace_order(void **st)
{
    char pattern[64], path[96];
    (void)st;
    snprintf(pattern, sizeof(pattern), "%s/t.%%p.json", dir); /* the process's file: */
    setenv("HCOMM_TRACE_FILE", pattern, 1);
    hc_params_reload();
    comm_setup();
    hc_trace_open(&comm);
    assert_non_null(comm.trace);
    for (int i = 0; i < 3; i++) { /* three sends and receives running beside */
        hc_ops_issue(&comm, &reqs[i], 1);
        hc_ops_start(&reqs[i], 0);
    }
    int order[3] = {1, 2, 0};
    for (int i = 0; i < 3; i++) {
        reqs[order[i]].status = HCOMM_SUCCESS;
        hc_ops_end(&comm, &reqs[order[i]]);
        hc_trace_idle(&comm);
    }
    hc_ops_issue(&comm, &reqs[3], 1); /* #4 runs on while 300 more end */
    hc_ops_start(&reqs[3], 0);
    for (int i = 0; i < 300; i++) {
        hcomm_request_t r = &reqs[4 + i % 8];
        hc_ops_issue(&comm, r, 1);
        hc_ops_start(r, 0);
        r->status = HCOMM_SUCCESS;
        hc_ops_end(&comm, r);
    }
    reqs[3].status = HCOMM_SUCCESS;
    hc_ops_end(&comm, &reqs[3]); /* too late */
    hc_trace_flush(&comm);
    hc_trace_close(&comm);
    hc_ops_fini(&comm);
    snprintf(path, sizeof(path), "%s/t.%d.1.json", dir, (int)getpid()); /* its second track */
    assert_int_equal(count_in(path, "\"ph\":\"X\",\"pid\":1,\"tid\":2,"), 303); /* all but #4 */
    assert_int_equal(count_in(path, "\"lost\":1}"), 1);
    FILE *f = fopen(path, "r");
    char  line[4096];
    int   next = 1;
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) { /* in number order: 1, 2, 3, 5, ... */
        const char *q = strstr(line, "\"seq\":");
        if (q == NULL || strstr(line, "\"tid\":2,") == NULL)
            continue;
        assert_int_equal(atoi(q + 6), next);
        next += next == 3 ? 2 : 1;
    }
    fclose(f);
    assert_int_equal(next, 305);
    unsetenv("HCOMM_TRACE_FILE");
    hc_params_reload();
}

/* Where records carry TSC ticks: a rate measured 1% off at open (a
 * preempted reading) does not shift ticks read live (rank 0's arrivals) once
 * a record ends 1 s later: a reading follows it, and the rate between the
 * two readings takes over. */
static void test_trace_live_rate(void **st)
{
    char pattern[64];
    (void)st;
    snprintf(pattern, sizeof(pattern), "%s/t.%%p.json", dir);
    setenv("HCOMM_TRACE_FILE", pattern, 1);
    hc_params_reload();
    comm_setup();
    hc_trace_open(&comm); /* the process's file is open from here on */
    assert_non_null(comm.trace);
    int ticks = comm.ops_clock == HC_OP_CLOCK_TICKS;
    hc_trace_close(&comm);
    hc_ops_fini(&comm);
    if (!ticks) {
        print_message("skipped: the TSC does not keep time here; records carry ns\n");
        skip();
    }
    hc_trace_rate_scale(1.01);
    comm_setup();
    hc_trace_open(&comm);
    assert_non_null(comm.trace);
    for (int i = 0; i < 2; i++) {
        if (i == 1)
            usleep(1100000);
        hc_ops_issue(&comm, &reqs[i], 1);
        hc_ops_start(&reqs[i], 0);
        reqs[i].status = HCOMM_SUCCESS;
        hc_ops_end(&comm, &reqs[i]);
        hc_trace_idle(&comm);
    }
    usleep(300000); /* 1% off over 0.3 s would be 3 ms */
    uint64_t tk = hc_clock_ticks(), ns = hc_clock_now_ns();
    int64_t  off = (int64_t)(hc_trace_ticks_ns(&comm, tk) - ns);
    print_message("a tick read 0.3 s after the last reading: %.1f us off\n", (double)off / 1e3);
    assert_true(off > -300000 && off < 300000);
    hc_trace_rate_scale(1 / 1.01);
    hc_trace_close(&comm);
    hc_ops_fini(&comm);
    unsetenv("HCOMM_TRACE_FILE");
    hc_params_reload();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records), cmocka_unit_test(test_trace_file),
        cmocka_unit_test(test_trace_order),
        cmocka_unit_test(test_trace_live_rate), /* last: it changes the process's rate */
    };
    char path[96];
    if (mkdtemp(dir) == NULL)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    snprintf(path, sizeof(path), "%s/t.%d.1.json", dir, (int)getpid());
    unlink(path);
    rmdir(dir);
    return rc;
}
