/*
 * trace_check - one rank of the trace and profiler-hook test, under hcomm-run
 * (run_trace.sh, with HCOMM_TRACE_FILE set). It registers a profiler, runs a
 * mix of operations (blocking, nonblocking with several in flight, a group of
 * a send and a receive, one on a stream's thread, a barrier) and checks what
 * the callbacks see: every operation once, start before end, numbers in
 * order, the names and sizes it issued, the start's data back at the end.
 * Then the registration's rules (bad arguments, a full table, unregistering
 * from inside a callback). It prints "trace_check rank R: last seq S" for the
 * driver, which checks the trace file holds operations 1..S.
 *   --no-destroy  exit without destroying the communicator (the exit flush)
 *   --kill        the last rank vanishes after a barrier (_exit: no exit
 *                 handler runs, as under SIGKILL, while hcomm-run, which would
 *                 stop the others at a signal, lets them go on); the others'
 *                 next allreduce fails and they abort
 * Exit: 0 all passed, 1 a check failed, 2 init failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hcomm.h"
#include "hcomm_profiler.h"
#include "hcomm_stream.h"
#include "test_comm.h"

#define COUNT 1031
#define NEXPECT 64

static int g_rank, g_nranks, g_failed, g_checks;

/* What the test issued, in order, and what the callbacks saw. The stream's
 * thread runs callbacks while this one waits for it (and checks nothing). */
static const char  *g_expect[NEXPECT];
static int          g_nexpect, g_started, g_ended;
static uint64_t     g_last_seq;
static hcomm_comm_t g_comm;

static void expect(const char *coll)
{
    if (g_nexpect < NEXPECT)
        g_expect[g_nexpect++] = coll;
}

static void on_start(void *user, const hcomm_prof_op_t *op, void **data)
{
    CHECK(user == &g_started, "user pointer %p", user);
    CHECK(op->size == sizeof(*op), "event size %zu", op->size);
    CHECK(op->comm == g_comm && op->rank == g_rank && op->nranks == g_nranks, "comm fields");
    if (g_last_seq == 0) /* the first: init's operations came before */
        g_last_seq = op->seq - 1;
    CHECK(op->seq == g_last_seq + 1, "start of %llu after %llu", (unsigned long long)op->seq,
          (unsigned long long)g_last_seq);
    CHECK(op->status == HCOMM_IN_PROGRESS && op->end_ns == 0, "start status %d", op->status);
    CHECK(op->issue_ns != 0 && op->start_ns >= op->issue_ns, "issue %llu start %llu",
          (unsigned long long)op->issue_ns, (unsigned long long)op->start_ns);
    uint64_t *mark = malloc(sizeof(*mark));
    if (mark != NULL)
        *mark = op->seq;
    *data = mark;
    g_started++;
}

static void on_end(void *user, const hcomm_prof_op_t *op, void *data)
{
    (void)user;
    int i = g_ended++;
    CHECK(data != NULL && *(uint64_t *)data == op->seq, "op_data of %llu",
          (unsigned long long)op->seq);
    free(data);
    g_last_seq = op->seq;
    CHECK(op->status == HCOMM_SUCCESS, "seq %llu ended %s", (unsigned long long)op->seq,
          hcomm_status_name(op->status));
    CHECK(op->end_ns >= op->start_ns && op->start_ns != 0, "end before start");
    const char *want = i < g_nexpect ? g_expect[i] : "(none)";
    CHECK(strcmp(op->call.collective, want) == 0, "op %d is %s, issued %s", i, op->call.collective,
          want);
    if (strcmp(want, "group") == 0) {
        CHECK(op->ncalls == 2 && op->calls != NULL && op->call.count == 2, "group of %zu",
              op->ncalls);
        if (op->ncalls == 2 && op->calls != NULL)
            CHECK(strcmp(op->calls[0].collective, "send") == 0 &&
                      strcmp(op->calls[1].collective, "recv") == 0 &&
                      op->calls[0].peer == (g_rank + 1) % g_nranks &&
                      op->calls[1].bytes == COUNT * sizeof(float),
                  "group calls %s %s", op->calls[0].collective, op->calls[1].collective);
        CHECK(strcmp(op->call.algorithm, "fused") == 0, "group algorithm %s", op->call.algorithm);
    } else {
        CHECK(op->ncalls == 1 && op->calls == &op->call, "a call's calls");
        CHECK(op->call.algorithm != NULL && strcmp(op->call.algorithm, "auto") != 0, "algorithm %s",
              op->call.algorithm ? op->call.algorithm : "NULL");
    }
    if (strcmp(want, "allreduce") == 0) {
        CHECK(op->call.count == COUNT && op->call.dtype == HCOMM_FLOAT32 &&
                  op->call.bytes == COUNT * sizeof(float) && op->call.peer == -1,
              "allreduce count %zu bytes %zu", op->call.count, op->call.bytes);
        CHECK(g_nranks == 1 || op->bytes_sent > 0, "allreduce sent %llu",
              (unsigned long long)op->bytes_sent);
    }
    if (strcmp(want, "broadcast") == 0)
        CHECK(op->call.peer == 0, "broadcast root %d", op->call.peer);
}

static int g_self_id, g_self_calls;

/* A profiler that unregisters itself from its own callback. */
static void self_end(void *user, const hcomm_prof_op_t *op, void *data)
{
    (void)user, (void)op, (void)data;
    g_self_calls++;
    CHECK(hcomm_profiler_unregister(g_self_id) == HCOMM_SUCCESS, "unregister from a callback");
}

static void nop_start(void *user, const hcomm_prof_op_t *op, void **data)
{
    (void)user, (void)op, (void)data;
}

static void run_ops(hcomm_comm_t comm, float *a, float *b)
{
    hcomm_request_t req[4];
    hcomm_stream_t  s;
    int             next = (g_rank + 1) % g_nranks, prev = (g_rank + g_nranks - 1) % g_nranks;

    expect("allreduce");
    CHECK(hcomm_allreduce(a, b, COUNT, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL) == 0, "allreduce");
    for (int i = 0; i < 4; i++) { /* several queued at once */
        expect("allreduce");
        CHECK(hcomm_iallreduce(a + i, b + COUNT * (i + 1), COUNT, HCOMM_FLOAT32, HCOMM_SUM, comm,
                               &req[i]) == 0,
              "iallreduce %d", i);
    }
    for (int i = 0; i < 4; i++)
        CHECK(hcomm_wait(&req[i]) == 0, "wait %d", i);
    expect("broadcast");
    CHECK(hcomm_broadcast(a, b, COUNT, HCOMM_FLOAT32, 0, comm, NULL) == 0, "broadcast");
    expect("group");
    hcomm_group_start();
    hcomm_send(a, COUNT, HCOMM_FLOAT32, next, comm, NULL);
    hcomm_recv(b, COUNT, HCOMM_FLOAT32, prev, comm, NULL);
    CHECK(hcomm_group_end() == 0, "group");
    expect("allgather");
    CHECK(hcomm_allgather(a, b, COUNT, HCOMM_FLOAT32, comm, NULL) == 0, "allgather");
    expect("allreduce"); /* on a stream: its callbacks run on the stream's thread */
    CHECK(hcomm_stream_create(&s) == 0, "stream");
    /* no CHECK (it counts) until the stream is done: its callbacks count too */
    hcomm_status_t st   = hcomm_allreduce(a, b, COUNT, HCOMM_FLOAT32, HCOMM_SUM, comm, s);
    hcomm_status_t sync = hcomm_stream_synchronize(s);
    CHECK(sync == 0 && st == 0, "on stream: %s, %s", hcomm_status_name(st),
          hcomm_status_name(sync));
    CHECK(hcomm_stream_destroy(s) == 0, "stream destroy");
    expect("barrier");
    CHECK(hcomm_barrier(comm, NULL) == 0, "barrier");
}

static void check_registration(hcomm_comm_t comm, float *a, float *b)
{
    hcomm_profiler_t none = {0}, nop = {nop_start, NULL, NULL};
    int              id, ids[HCOMM_PROFILERS_MAX], n = 0;
    CHECK(hcomm_profiler_register(NULL, &id) == HCOMM_ERR_INVALID_ARG, "NULL profiler");
    CHECK(hcomm_profiler_register(&nop, NULL) == HCOMM_ERR_INVALID_ARG, "NULL id");
    CHECK(hcomm_profiler_register(&none, &id) == HCOMM_ERR_INVALID_ARG, "no callback");
    CHECK(hcomm_profiler_unregister(0) == HCOMM_ERR_INVALID_ARG, "id 0");
    CHECK(hcomm_profiler_unregister(HCOMM_PROFILERS_MAX + 1) == HCOMM_ERR_INVALID_ARG, "id big");
    while (n < HCOMM_PROFILERS_MAX && hcomm_profiler_register(&nop, &ids[n]) == 0)
        n++;
    CHECK(n == HCOMM_PROFILERS_MAX, "%d registered", n);
    CHECK(hcomm_profiler_register(&nop, &id) == HCOMM_ERR_NO_MEMORY, "a full table");
    for (int i = 0; i < n; i++)
        CHECK(hcomm_profiler_unregister(ids[i]) == 0, "unregister %d", ids[i]);
    CHECK(hcomm_profiler_unregister(ids[0]) == HCOMM_ERR_INVALID_ARG, "twice");
    hcomm_profiler_t self = {NULL, self_end, NULL};
    CHECK(hcomm_profiler_register(&self, &g_self_id) == 0, "self");
    for (int i = 0; i < 2; i++)
        CHECK(hcomm_allreduce(a, b, COUNT, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL) == 0, "ar");
    CHECK(g_self_calls == 1, "self-unregistered profiler called %d times", g_self_calls);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int         id;

    if (test_comm_init(&g_comm, &g_rank, &g_nranks) != HCOMM_SUCCESS) {
        fprintf(stderr, "trace_check: init failed\n");
        return 2;
    }
    size_t n = COUNT * (size_t)(g_nranks > 5 ? g_nranks : 5);
    float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));
    if (a == NULL || b == NULL)
        return 2;
    /* the profiler starts at the next operation; those of init came before */
    hcomm_profiler_t prof = {on_start, on_end, &g_started};
    CHECK(hcomm_profiler_register(&prof, &id) == 0, "register");
    expect("allreduce");
    CHECK(hcomm_allreduce(a, b, COUNT, HCOMM_FLOAT32, HCOMM_SUM, g_comm, NULL) == 0, "first");
    g_nexpect = g_ended = g_started = 0;
    run_ops(g_comm, a, b);
    CHECK(g_started == g_nexpect && g_ended == g_nexpect, "%d issued, %d started, %d ended",
          g_nexpect, g_started, g_ended);
    CHECK(hcomm_profiler_unregister(id) == 0, "unregister");
    CHECK(hcomm_allreduce(a, b, COUNT, HCOMM_FLOAT32, HCOMM_SUM, g_comm, NULL) == 0, "after");
    CHECK(g_ended == g_nexpect, "a callback after unregistering");
    check_registration(g_comm, a, b);
    uint64_t last = g_last_seq + 1 + 2; /* the allreduce after, the two of the checks */
    if (strcmp(mode, "--kill") == 0) {
        CHECK(hcomm_barrier(g_comm, NULL) == 0, "barrier before the kill");
        last++;
        if (g_rank == g_nranks - 1)
            _exit(0);
        hcomm_status_t st = hcomm_allreduce(a, b, COUNT, HCOMM_FLOAT32, HCOMM_SUM, g_comm, NULL);
        printf("trace_check rank %d: allreduce after the kill: %s\n", g_rank,
               hcomm_status_name(st));
        CHECK(st != HCOMM_SUCCESS, "allreduce with a dead peer succeeded");
        last++;
        hcomm_comm_abort(g_comm);
    }
    printf("trace_check rank %d: last seq %llu; %d checks, %d failed\n", g_rank,
           (unsigned long long)last, g_checks, g_failed);
    fflush(stdout);
    if (strcmp(mode, "--no-destroy") == 0)
        exit(g_failed != 0);
    if (strcmp(mode, "--kill") != 0)
        hcomm_comm_destroy(g_comm);
    free(a);
    free(b);
    return g_failed != 0;
}
