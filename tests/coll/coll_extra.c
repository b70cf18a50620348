/* coll_extra.c - coll_check beyond the blocking matrix: nonblocking variants
 * (all outstanding at once, waited in and out of order, polled with test),
 * groups of collectives, comm_split, overlapping buffers, barrier semantics
 * and the name API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_check.h"
#include "coll_data.h"

#define CT_MAX_NB 12

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check_fail(ct_ctx_t *ctx, const char *what)
{
    printf("FAIL rank %d: %s\n", ctx->rank, what);
    ctx->failed++;
}

static void check(ct_ctx_t *ctx, int ok, const char *what)
{
    if (ok)
        ctx->passed++;
    else
        check_fail(ctx, what);
}

/* Waits for runs[i] in the given order; verifies each. */
static void wait_and_verify(ct_ctx_t *ctx, ct_run_t *runs, int n, int reverse, int issued)
{
    for (int k = 0; k < n; k++) {
        int       i   = reverse ? n - 1 - k : k;
        ct_run_t *run = &runs[i];
        if (i < issued) {
            hcomm_status_t st = hcomm_wait(&run->req);
            if (st != HCOMM_SUCCESS)
                ct_call_failed(ctx, run, "hcomm_wait", st);
            else if (run->req != NULL)
                ct_report(run, "hcomm_wait succeeded but left *req non-NULL"), ctx->failed++;
            else if (ct_verify(run) != 0)
                ctx->failed++;
            else
                ctx->passed++;
        }
    }
    for (int k = 0; k < n; k++)
        ct_release(&runs[k]);
}

/* Issues every case of cs nonblocking, all outstanding, then waits them all. */
static void nb_batch(ct_ctx_t *ctx, ct_case_t *cs, int n, int reverse)
{
    ct_run_t runs[CT_MAX_NB];
    int      issued = 0, prepared = 0;

    if (ctx->broken)
        return;
    for (; prepared < n; prepared++) {
        cs[prepared].seed = ct_case_seed(ctx, &cs[prepared]) ^ 0x5a5a;
        if (ct_prepare(&runs[prepared], &cs[prepared], ctx->rank, ctx->nranks) != 0)
            break;
        runs[prepared].label = "nonblocking ";
    }
    if (prepared < n) {
        check_fail(ctx, "nonblocking batch: out of memory in the test");
        ctx->broken = 1;
    }
    for (; issued < prepared && !ctx->broken; issued++) {
        hcomm_status_t st = ct_issue_nb(&runs[issued], ctx->comm);
        if (st != HCOMM_SUCCESS) {
            ct_call_failed(ctx, &runs[issued], "the nonblocking call", st);
            break;
        }
    }
    /* wait for whatever was issued, even after a failure, so no request leaks */
    wait_and_verify(ctx, runs, prepared, reverse, issued);
}

static void nb_all_variants(ct_ctx_t *ctx)
{
    int       last  = ctx->nranks - 1;
    ct_case_t all[] = {
        {CT_ALLREDUCE, HCOMM_FLOAT32, HCOMM_SUM, 1023, 0, -1, 0},
        {CT_BROADCAST, HCOMM_INT32, HCOMM_SUM, 1023, 0, last, 0},
        {CT_ALLGATHER, HCOMM_FLOAT64, HCOMM_SUM, 7, 0, -1, 0},
        {CT_REDUCE_SCATTER, HCOMM_INT64, HCOMM_MAX, 33, 0, -1, 0},
        {CT_ALLTOALL, HCOMM_UINT8, HCOMM_SUM, 17, 0, -1, 0},
        {CT_REDUCE, HCOMM_BFLOAT16, HCOMM_SUM, 1023, 0, 0, 0},
        {CT_BARRIER, HCOMM_INT8, HCOMM_SUM, 0, 0, -1, 0},
        {CT_ALLREDUCE, HCOMM_INT32, HCOMM_PROD, 1023, 1, -1, 0},
        {CT_ALLREDUCE, HCOMM_FLOAT16, HCOMM_AVG, 300000, 0, -1, 0},
    };
    ct_case_t ars[] = {
        {CT_ALLREDUCE, HCOMM_FLOAT32, HCOMM_SUM, 100003, 0, -1, 0},
        {CT_ALLREDUCE, HCOMM_INT64, HCOMM_MAX, 7, 1, -1, 0},
        {CT_ALLREDUCE, HCOMM_BFLOAT16, HCOMM_AVG, 1023, 0, -1, 0},
        {CT_ALLREDUCE, HCOMM_UINT8, HCOMM_PROD, 1, 1, -1, 0},
    };
    int nall = (int)(sizeof(all) / sizeof(all[0])), nars = (int)(sizeof(ars) / sizeof(ars[0]));

    if (ctx->quick) /* keep the large one out of quick runs */
        all[nall - 1].count = 1023;
    nb_batch(ctx, all, nall, 0);
    nb_batch(ctx, ars, nars, 1);
}

/* One iallreduce completed by polling hcomm_test. */
static void nb_test_poll(ct_ctx_t *ctx)
{
    ct_case_t      c = {CT_ALLREDUCE, HCOMM_INT32, HCOMM_SUM, 50000, 0, -1, 0};
    ct_run_t       run;
    hcomm_status_t st;
    int            done     = 0;
    double         deadline = now_s() + 120;

    if (ctx->broken)
        return;
    c.seed = ct_case_seed(ctx, &c) ^ 0x7e57;
    if (ct_prepare(&run, &c, ctx->rank, ctx->nranks) != 0) {
        check_fail(ctx, "test-poll: out of memory in the test");
        ctx->broken = 1;
        return;
    }
    run.label = "polled ";
    st        = ct_issue_nb(&run, ctx->comm);
    while (st == HCOMM_SUCCESS && !done && now_s() < deadline) {
        st = hcomm_test(&run.req, &done);
        if (st == HCOMM_IN_PROGRESS && !done)
            st = HCOMM_SUCCESS;
        else if (st == HCOMM_IN_PROGRESS)
            st = HCOMM_ERR_PROTOCOL; /* done but "in progress": inconsistent */
    }
    if (st != HCOMM_SUCCESS)
        ct_call_failed(ctx, &run, "iallreduce/hcomm_test", st);
    else if (!done)
        ct_report(&run, "hcomm_test never reported done in 120 s"), ctx->failed++, ctx->broken = 1;
    else if (run.req != NULL)
        ct_report(&run, "hcomm_test done but *req not NULL"), ctx->failed++;
    else if (ct_verify(&run) != 0)
        ctx->failed++;
    else
        ctx->passed++;
    ct_release(&run);
}

/* Even ranks isend to the next rank, odd ranks irecv: pairs, no dependency cycle. */
static void nb_p2p(ct_ctx_t *ctx)
{
    enum { N = 1023 };
    int32_t         buf[N];
    hcomm_request_t req = NULL;
    hcomm_status_t  st;
    int             r = ctx->rank, peer = (r % 2 == 0) ? r + 1 : r - 1;
    char            msg[160];

    if (ctx->broken || peer >= ctx->nranks)
        return;
    for (int i = 0; i < N; i++)
        buf[i] = (r % 2 == 0) ? r * 100000 + i : -1;
    st = (r % 2 == 0) ? hcomm_isend(buf, N, HCOMM_INT32, peer, ctx->comm, &req)
                      : hcomm_irecv(buf, N, HCOMM_INT32, peer, ctx->comm, &req);
    if (st == HCOMM_SUCCESS)
        st = hcomm_wait(&req);
    if (st != HCOMM_SUCCESS) {
        snprintf(msg, sizeof(msg), "isend/irecv with peer %d: %s", peer, hcomm_status_name(st));
        check_fail(ctx, msg);
        ctx->broken = 1;
        return;
    }
    for (int i = 0; i < N; i++) {
        if (buf[i] != (r % 2 == 0 ? r : peer) * 100000 + i) {
            snprintf(msg, sizeof(msg), "isend/irecv from %d: index %d got %d expected %d", peer, i,
                     buf[i], peer * 100000 + i);
            check_fail(ctx, msg);
            return;
        }
    }
    ctx->passed++;
}

/* An exchange of nonblocking calls outside a group: each rank sends 2 MiB
 * to both neighbours and receives 2 MiB from both, sends first, as MPI
 * programs do. More than any transport buffers: each send completes only
 * once the receive behind it on the peer runs, so the receives must run
 * beside the sends. Waited for last to first: requests still end in order. */
static void nb_exchange(ct_ctx_t *ctx)
{
    enum { N = 1 << 19 };
    int      r = ctx->rank, n = ctx->nranks, right = (r + 1) % n, left = (r + n - 1) % n;
    int32_t *out           = malloc(sizeof(int32_t) * N),
            *in[2]         = {malloc(sizeof(int32_t) * N), malloc(sizeof(int32_t) * N)};
    hcomm_request_t req[4] = {NULL, NULL, NULL, NULL};
    hcomm_status_t  st     = HCOMM_SUCCESS;
    char            msg[160];

    if (ctx->broken || n < 2 || out == NULL || in[0] == NULL || in[1] == NULL)
        goto out;
    for (int i = 0; i < N; i++)
        out[i] = r * 1000000 + i, in[0][i] = in[1][i] = -1;
    st = hcomm_isend(out, N, HCOMM_INT32, right, ctx->comm, &req[0]);
    if (st == HCOMM_SUCCESS)
        st = hcomm_isend(out, N, HCOMM_INT32, left, ctx->comm, &req[1]);
    if (st == HCOMM_SUCCESS)
        st = hcomm_irecv(in[0], N, HCOMM_INT32, left, ctx->comm, &req[2]);
    if (st == HCOMM_SUCCESS)
        st = hcomm_irecv(in[1], N, HCOMM_INT32, right, ctx->comm, &req[3]);
    for (int k = 3; k >= 0; k--) {
        hcomm_status_t w = req[k] != NULL ? hcomm_wait(&req[k]) : HCOMM_SUCCESS;
        st               = st != HCOMM_SUCCESS ? st : w;
    }
    if (st != HCOMM_SUCCESS) {
        snprintf(msg, sizeof(msg), "isend, isend, irecv, irecv with ranks %d and %d: %s", left,
                 right, hcomm_status_name(st));
        check_fail(ctx, msg);
        ctx->broken = 1;
        goto out;
    }
    for (int i = 0; i < N; i++) {
        if (in[0][i] != left * 1000000 + i || in[1][i] != right * 1000000 + i) {
            snprintf(msg, sizeof(msg), "exchange: index %d got %d from %d and %d from %d", i,
                     in[0][i], left, in[1][i], right);
            check_fail(ctx, msg);
            goto out;
        }
    }
    ctx->passed++;
out:
    free(out);
    free(in[0]);
    free(in[1]);
}

void ct_run_late_peer(ct_ctx_t *ctx)
{
    enum { N = 1 << 20 }; /* 4 MiB: more than a transport buffers */
    int32_t        *a = malloc(sizeof(int32_t) * N), *b = malloc(sizeof(int32_t) * N);
    hcomm_request_t req[2] = {NULL, NULL};
    hcomm_status_t  st     = HCOMM_SUCCESS;
    struct timespec nap    = {(time_t)ctx->late_peer,
                              (long)((ctx->late_peer - (double)(time_t)ctx->late_peer) * 1e9)};
    char            msg[160];

    if (a == NULL || b == NULL || ctx->nranks < 2 || ctx->rank > 1) {
        free(a);
        free(b);
        return;
    }
    for (int i = 0; i < N; i++)
        a[i] = ctx->rank * 1000000 + i, b[i] = -1;
    if (ctx->rank == 0) {
        st = hcomm_isend(a, N, HCOMM_INT32, 1, ctx->comm, &req[0]);
        if (st == HCOMM_SUCCESS)
            st = hcomm_irecv(b, N, HCOMM_INT32, 1, ctx->comm, &req[1]);
        for (int k = 0; k < 2; k++) {
            hcomm_status_t w = req[k] != NULL ? hcomm_wait(&req[k]) : HCOMM_SUCCESS;
            st               = st != HCOMM_SUCCESS ? st : w;
        }
    } else {
        nanosleep(&nap, NULL);
        st = hcomm_recv(b, N, HCOMM_INT32, 0, ctx->comm, NULL);
        nanosleep(&nap, NULL);
        if (st == HCOMM_SUCCESS)
            st = hcomm_send(a, N, HCOMM_INT32, 0, ctx->comm, NULL);
    }
    int peer = 1 - ctx->rank, bad = -1;
    for (int i = 0; i < N && st == HCOMM_SUCCESS && bad < 0; i++)
        if (b[i] != peer * 1000000 + i)
            bad = i;
    if (st != HCOMM_SUCCESS || bad >= 0) {
        snprintf(msg, sizeof(msg), "a peer %.1f s late: %s%s", ctx->late_peer,
                 hcomm_status_name(st), bad >= 0 ? ", wrong data" : "");
        check_fail(ctx, msg);
        ctx->broken = st != HCOMM_SUCCESS;
    } else {
        ctx->passed++;
    }
    free(a);
    free(b);
}

/* Collectives inside a (nested) group: one allreduce, one broadcast, one alltoall. */
static void group_colls(ct_ctx_t *ctx)
{
    ct_case_t cs[3] = {
        {CT_ALLREDUCE, HCOMM_FLOAT32, HCOMM_SUM, 1023, 0, -1, 0},
        {CT_BROADCAST, HCOMM_INT32, HCOMM_SUM, 7, 1, ctx->nranks - 1, 0},
        {CT_ALLTOALL, HCOMM_INT64, HCOMM_SUM, 5, 0, -1, 0},
    };
    ct_run_t       runs[3];
    hcomm_status_t st[3], s1, s2, s3;
    int            n = 0;

    if (ctx->broken)
        return;
    for (; n < 3; n++) {
        cs[n].seed = ct_case_seed(ctx, &cs[n]) ^ 0x6a6a;
        if (ct_prepare(&runs[n], &cs[n], ctx->rank, ctx->nranks) != 0)
            break;
        runs[n].label = "grouped ";
    }
    if (n == 3) {
        s1    = hcomm_group_start();
        st[0] = ct_issue(&runs[0], ctx->comm);
        s2    = hcomm_group_start();
        st[1] = ct_issue(&runs[1], ctx->comm);
        s3    = hcomm_group_end(); /* inner end: issues nothing yet */
        st[2] = ct_issue(&runs[2], ctx->comm);
        st[2] = st[2] ? st[2] : hcomm_group_end();
        if (s1 || s2 || s3 || st[0] || st[1] || st[2]) {
            ct_report(&runs[0], "group: start %d start %d end(inner) %d calls %d %d end %d", s1, s2,
                      s3, st[0], st[1], st[2]);
            ctx->failed++;
            ctx->broken = 1;
        } else {
            for (int i = 0; i < 3; i++)
                ct_verify(&runs[i]) ? ctx->failed++ : ctx->passed++;
        }
    } else {
        check_fail(ctx, "group: out of memory in the test");
    }
    for (int i = 0; i < n; i++)
        ct_release(&runs[i]);
}

/* A group whose ranks interleave an allreduce and a ring of sends and
 * receives differently (even ranks: allreduce first; odd ranks: the p2p
 * first), as NCCL allows: each gets the sum and its neighbour's values. The
 * fused schedule used to post them in call order, and the two swapped data. */
static void group_mixed_order(ct_ctx_t *ctx)
{
    int            n = ctx->nranks, r = ctx->rank, to = (r + 1) % n, from = (r + n - 1) % n;
    float          in[4], out[4] = {0}, snd[4], rcv[4] = {0};
    hcomm_status_t st[3] = {HCOMM_SUCCESS, HCOMM_SUCCESS, HCOMM_SUCCESS}, end;
    if (ctx->broken || n < 2)
        return;
    for (int i = 0; i < 4; i++)
        in[i] = (float)(r + 1), snd[i] = (float)(100 * r + i);
    hcomm_group_start();
    if (r % 2 == 0)
        st[0] = hcomm_allreduce(in, out, 4, HCOMM_FLOAT32, HCOMM_SUM, ctx->comm, NULL);
    st[1] = hcomm_send(snd, 4, HCOMM_FLOAT32, to, ctx->comm, NULL);
    st[2] = hcomm_recv(rcv, 4, HCOMM_FLOAT32, from, ctx->comm, NULL);
    if (r % 2 == 1)
        st[0] = hcomm_allreduce(in, out, 4, HCOMM_FLOAT32, HCOMM_SUM, ctx->comm, NULL);
    end    = hcomm_group_end();
    int ok = !st[0] && !st[1] && !st[2] && !end;
    for (int i = 0; ok && i < 4; i++)
        ok = out[i] == (float)(n * (n + 1) / 2) && rcv[i] == (float)(100 * from + i);
    check(ctx, ok, "group of an allreduce and p2p interleaved differently per rank");
    if (!ok) {
        printf("  rank %d: status %d %d %d end %d; sum %g (want %d); from %d: %g (want %d)\n", r,
               st[0], st[1], st[2], end, out[0], n * (n + 1) / 2, from, rcv[0], 100 * from);
        ctx->broken = 1; /* its pairs' messages may be out of step */
    }
}

/* One group of two sends (a and b elements) to the next rank and two receives
 * from the one before, and with self, a copy of a + b to itself; its values
 * name the round. 1 when every value came right. */
static int group_round(ct_ctx_t *ctx, int round, size_t a, size_t b, int self, hcomm_status_t *st)
{
    int     n = ctx->nranks, r = ctx->rank, to = (r + 1) % n, from = (r + n - 1) % n;
    int32_t snd[64], rcv[64], self_in[64], self_out[64];
    size_t  k;

    for (k = 0; k < a + b; k++)
        snd[k] = 1000000 * round + 1000 * r + (int32_t)k, rcv[k] = -1, self_in[k] = -snd[k],
        self_out[k] = 0;
    *st = hcomm_group_start();
    if (*st == HCOMM_SUCCESS)
        *st = hcomm_send(snd, a, HCOMM_INT32, to, ctx->comm, NULL);
    if (*st == HCOMM_SUCCESS)
        *st = hcomm_send(snd + a, b, HCOMM_INT32, to, ctx->comm, NULL);
    if (*st == HCOMM_SUCCESS)
        *st = hcomm_recv(rcv, a, HCOMM_INT32, from, ctx->comm, NULL);
    if (*st == HCOMM_SUCCESS)
        *st = hcomm_recv(rcv + a, b, HCOMM_INT32, from, ctx->comm, NULL);
    if (*st == HCOMM_SUCCESS && self)
        *st = hcomm_send(self_in, a + b, HCOMM_INT32, r, ctx->comm, NULL);
    if (*st == HCOMM_SUCCESS && self)
        *st = hcomm_recv(self_out, a + b, HCOMM_INT32, r, ctx->comm, NULL);
    hcomm_status_t end = hcomm_group_end();
    *st                = *st != HCOMM_SUCCESS ? *st : end;
    for (k = 0; k < a + b && *st == HCOMM_SUCCESS; k++)
        if (rcv[k] != 1000000 * round + 1000 * from + (int32_t)k ||
            (self && self_out[k] != -snd[k]))
            return 0;
    return *st == HCOMM_SUCCESS;
}

/* Groups whose fused schedules are kept per shape (their calls' schedules):
 * first 100 rounds over 4 shapes that differ only after their first call (a
 * fixed, b 1-4, the fourth with a copy to self), found again and again; then
 * 200 rounds over many shapes (a 1-2, b 1-31, every third shape with a copy
 * to self; each shape twice, alternating with the next), whose single calls
 * overflow the schedule cache, whose evictions must drop the fused ones. */
static void group_repeats(ct_ctx_t *ctx)
{
    hcomm_status_t st  = HCOMM_SUCCESS;
    int            bad = -1;
    if (ctx->broken || ctx->nranks < 2)
        return;
    for (int i = 0; i < 100 && bad < 0; i++)
        if (!group_round(ctx, i, 3, 1 + (size_t)i % 4, i % 4 == 3, &st))
            bad = i;
    for (int i = 100; i < 300 && bad < 0; i++) {
        size_t shape = (size_t)(i / 4 * 2 + i % 2); /* s, s+1, s, s+1, s+2, ... */
        if (!group_round(ctx, i, 1 + shape % 2, 1 + shape * 5 % 31, shape % 3 == 0, &st))
            bad = i;
    }
    check(ctx, bad < 0, "300 groups of two sends and two receives in repeating shapes");
    if (bad >= 0) {
        printf("  rank %d: %s, first wrong group %d\n", ctx->rank, hcomm_status_name(st), bad);
        ctx->broken = 1;
    }
}

/* A barrier must not return before its last rank entered. The ranks share one
 * host (hcomm-run), hence one CLOCK_MONOTONIC: the late root broadcasts when it
 * entered, and every rank checks that its barrier returned after that. */
static void barrier_timing(ct_ctx_t *ctx)
{
    int  roots[2] = {0, ctx->nranks - 1};
    char msg[192];

    for (int k = 0; k < 2 && ctx->nranks > 1 && !ctx->broken; k++) {
        double         entered = 0, left;
        hcomm_status_t st      = hcomm_barrier(ctx->comm, NULL);
        if (st == HCOMM_SUCCESS && ctx->rank == roots[k]) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
            entered = now_s();
        }
        if (st == HCOMM_SUCCESS)
            st = hcomm_barrier(ctx->comm, NULL);
        left = now_s();
        if (st == HCOMM_SUCCESS)
            st = hcomm_broadcast(&entered, &entered, 1, HCOMM_FLOAT64, roots[k], ctx->comm, NULL);
        if (st != HCOMM_SUCCESS) {
            snprintf(msg, sizeof(msg), "barrier timing: %s", hcomm_status_name(st));
            check_fail(ctx, msg);
            ctx->broken = 1;
        } else if (left < entered) {
            snprintf(msg, sizeof(msg),
                     "barrier returned %.3f s before rank %d (which slept 50 ms) entered it",
                     entered - left, roots[k]);
            check_fail(ctx, msg);
        } else {
            ctx->passed++;
        }
    }
}

static void names(ct_ctx_t *ctx)
{
    static const char *const dn[HCOMM_DTYPE_COUNT] = {
        [HCOMM_INT8] = "int8",       [HCOMM_UINT8] = "uint8",       [HCOMM_INT32] = "int32",
        [HCOMM_UINT32] = "uint32",   [HCOMM_INT64] = "int64",       [HCOMM_UINT64] = "uint64",
        [HCOMM_FLOAT16] = "float16", [HCOMM_BFLOAT16] = "bfloat16", [HCOMM_FLOAT32] = "float32",
        [HCOMM_FLOAT64] = "float64"};
    static const char *const on[HCOMM_OP_COUNT] = {[HCOMM_SUM] = "sum", [HCOMM_PROD] = "prod",
                                                   [HCOMM_MIN] = "min", [HCOMM_MAX] = "max",
                                                   [HCOMM_AVG] = "avg"};
    int                      ok                    = 1;

    for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++) {
        const char *n = hcomm_dtype_name((hcomm_dtype_t)dt);
        ok &= hcomm_dtype_size((hcomm_dtype_t)dt) == ct_size((hcomm_dtype_t)dt);
        ok &= n != NULL && strcmp(n, dn[dt]) == 0;
    }
    for (int op = 0; op < HCOMM_OP_COUNT; op++) {
        const char *n = hcomm_op_name((hcomm_op_t)op);
        ok &= n != NULL && strcmp(n, on[op]) == 0;
    }
    ok &= hcomm_dtype_size(HCOMM_DTYPE_COUNT) == 0 && hcomm_dtype_name(HCOMM_DTYPE_COUNT) == NULL;
    ok &= hcomm_op_name(HCOMM_OP_COUNT) == NULL;
    ok &= strcmp(hcomm_status_name(HCOMM_ERR_TIMEOUT), "HCOMM_ERR_TIMEOUT") == 0;
    ok &= hcomm_status_str(HCOMM_SUCCESS) != NULL && hcomm_version() == HCOMM_VERSION_CODE;
    check(ctx, ok, "dtype/op/status names, sizes or version differ from hcomm.h");
}

void ct_run_extras(ct_ctx_t *ctx)
{
    names(ctx);
    nb_all_variants(ctx);
    nb_test_poll(ctx);
    nb_p2p(ctx);
    nb_exchange(ctx);
    group_colls(ctx);
    group_mixed_order(ctx);
    group_repeats(ctx);
    ct_run_split(ctx);
    ct_run_overlap(ctx);
    ct_run_disagree(ctx);
    barrier_timing(ctx);
    if (!ctx->broken)
        check(ctx, hcomm_comm_get_error(ctx->comm) == HCOMM_SUCCESS,
              "hcomm_comm_get_error is not HCOMM_SUCCESS after a clean run");
}
