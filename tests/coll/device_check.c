/*
 * device_check - one rank of the device-buffer test, under hcomm-run (or
 * alone: one rank). Its buffers are of another memory kind than host: built
 * with device_check_test.c, the test kind (src/device/device_test.c), whose
 * addresses fault on any access but the memory kinds' own copies, as a GPU's
 * would, so every collective that passes moved each byte through the
 * executor's host staging (core/stage.h); built with device_check_cuda.c
 * (device_check_cuda), CUDA device memory, and it skips without a GPU.
 * Checks, each collective out of place and in place where it has one, at an
 * odd count and at 0, with int32 sums (exact):
 *   every rank's buffers of the test kind; even ranks' only (a mixed
 *   communicator); the send buffer only; the receive buffer only; a
 *   nonblocking call; a call on a stream; buffers of several staging
 *   chunks, in place where the call has one; calls in a group.
 * Also: the kind's own checks (device_check.h), the memory kinds' reduction
 * on it, profiler hooks that see the caller's buffers, and the calls that do
 * not stage yet refuse it with HCOMM_ERR_UNSUPPORTED.
 * With --bench COUNT ITERS it times staged against host allreduces instead.
 * Exit: 0 all passed, 1 a check failed, 2 init failure, 77 no such memory.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "device/device.h"
#include "device_check.h"
#include "hcomm.h"
#include "hcomm_compress.h"
#include "hcomm_moe.h"
#include "hcomm_profiler.h"
#include "hcomm_stream.h"
#include "test_comm.h"

#define COUNT 1001
#define BIG ((3u << 20) / 4 + 5) /* int32s: over three staging chunks */

int g_rank, g_nranks, g_failed, g_checks;

/* Which buffers of a call are of the kind under test. */
enum { K_BOTH, K_SEND, K_RECV, K_EVEN, K_COUNT };
static const char *const kinds_name[K_COUNT] = {"both", "send only", "recv only", "even ranks"};

typedef enum {
    C_ALLREDUCE,
    C_BCAST,
    C_REDUCE,
    C_ALLGATHER,
    C_RSCATTER,
    C_ALLTOALL,
    C_COUNT
} coll_t;
static const char *const coll_name[C_COUNT] = {"allreduce", "broadcast",      "reduce",
                                               "allgather", "reduce_scatter", "alltoall"};

/* Rank r's input element i. */
static int32_t input(int r, size_t i)
{
    return (int32_t)(r * 1000 + (int)(i % 97));
}

/* A buffer of n int32: of the kind under test when dev, else host; filled
 * with fill (NULL: -1 everywhere). */
static int32_t *buf_new(int dev, size_t n, const int32_t *fill)
{
    size_t   b = n * sizeof(int32_t) + 64;
    int32_t *h = malloc(b), *p = dev ? dc_alloc(b) : malloc(b);
    if (h == NULL || p == NULL) {
        printf("rank %d: out of memory\n", g_rank);
        exit(2);
    }
    for (size_t i = 0; i < b / sizeof(int32_t); i++)
        h[i] = fill != NULL && i < n ? fill[i] : -1;
    hc_mem_copy(p, h, b);
    free(h);
    return p;
}

static void buf_free(int dev, int32_t *p)
{
    if (dev)
        dc_free(p);
    else
        free(p);
}

/* p's first n elements (host copy, to be freed). */
static int32_t *buf_read(const int32_t *p, size_t n)
{
    int32_t *h = malloc(n * sizeof(int32_t) + 1);
    hc_mem_copy(h, p, n * sizeof(int32_t));
    return h;
}

/* What rank r's receive buffer must hold after coll of count per block. */
static int32_t expect(coll_t c, int r, size_t i, size_t count)
{
    int     n = g_nranks;
    int64_t s = 0;
    switch (c) {
    case C_ALLREDUCE:
    case C_REDUCE:
        for (int q = 0; q < n; q++)
            s += input(q, i);
        return (int32_t)s;
    case C_BCAST:
        return input(n - 1, i);
    case C_ALLGATHER:
        return input((int)(i / count), i % count);
    case C_RSCATTER:
        for (int q = 0; q < n; q++)
            s += input(q, (size_t)r * count + i);
        return (int32_t)s;
    case C_ALLTOALL:
        return input((int)(i / count), (size_t)r * count + i % count);
    default:
        return 0;
    }
}

/* One collective on buffers of kinds k; in place where the call has one. */
static void one(hcomm_comm_t comm, coll_t c, int k, int in_place, size_t count, int how)
{
    int      n = g_nranks, r = g_rank;
    int      ds  = k == K_BOTH || k == K_SEND || (k == K_EVEN && r % 2 == 0);
    int      dr  = k == K_BOTH || k == K_RECV || (k == K_EVEN && r % 2 == 0);
    size_t   sn  = c == C_RSCATTER || c == C_ALLTOALL ? count * (size_t)n : count;
    size_t   rn  = c == C_ALLGATHER || c == C_ALLTOALL ? count * (size_t)n : count;
    size_t   big = sn > rn ? sn : rn;
    int32_t *in  = malloc(big * sizeof(int32_t) + 1), *sb, *rb, *snd;
    for (size_t i = 0; i < big; i++)
        in[i] = input(r, i);
    if (in_place) {
        ds = dr = ds || dr;
        if (c == C_ALLGATHER) { /* own block in place */
            int32_t *full = malloc(rn * sizeof(int32_t) + 1);
            for (size_t i = 0; i < rn; i++)
                full[i] = i / count == (size_t)r ? in[i % count] : -1;
            rb = buf_new(dr, rn, full);
            free(full);
        } else {
            rb = buf_new(dr, big, in);
        }
        sb  = NULL;
        snd = c == C_ALLGATHER ? rb + (size_t)r * count : rb;
    } else {
        sb  = buf_new(ds, sn, in);
        rb  = buf_new(dr, rn, NULL);
        snd = sb;
    }
    int32_t        *rcv    = c == C_RSCATTER && in_place ? rb + (size_t)r * count : rb;
    hcomm_status_t  st     = HCOMM_SUCCESS;
    hcomm_request_t req    = NULL;
    hcomm_stream_t  stream = NULL;
    if (how == 2 && (st = hcomm_stream_create(&stream)) != HCOMM_SUCCESS)
        CHECK(0, "stream_create: %s", hcomm_status_str(st));
    switch (c) {
    case C_ALLREDUCE:
        st = how == 1 ? hcomm_iallreduce(snd, rcv, count, HCOMM_INT32, HCOMM_SUM, comm, &req)
                      : hcomm_allreduce(snd, rcv, count, HCOMM_INT32, HCOMM_SUM, comm, stream);
        break;
    case C_BCAST:
        st = hcomm_broadcast(snd, rcv, count, HCOMM_INT32, n - 1, comm, stream);
        break;
    case C_REDUCE:
        st = hcomm_reduce(snd, rcv, count, HCOMM_INT32, HCOMM_SUM, n / 2, comm, stream);
        break;
    case C_ALLGATHER:
        st = hcomm_allgather(snd, rcv, count, HCOMM_INT32, comm, stream);
        break;
    case C_RSCATTER:
        st = hcomm_reduce_scatter(snd, rcv, count, HCOMM_INT32, HCOMM_SUM, comm, stream);
        break;
    case C_ALLTOALL:
        st = hcomm_alltoall(snd, rcv, count, HCOMM_INT32, comm, stream);
        break;
    default:
        break;
    }
    if (st == HCOMM_SUCCESS && req != NULL)
        st = hcomm_wait(&req);
    if (st == HCOMM_SUCCESS && stream != NULL)
        st = hcomm_stream_synchronize(stream);
    if (stream != NULL)
        hcomm_stream_destroy(stream);
    CHECK(st == HCOMM_SUCCESS, "%s (%s%s, count %zu): %s", coll_name[c], kinds_name[k],
          in_place ? ", in place" : "", count, hcomm_status_str(st));
    int      checked = c != C_REDUCE || r == n / 2;
    size_t   len     = c == C_RSCATTER ? count : rn;
    int32_t *got     = buf_read(rcv, len);
    size_t   bad = 0, first = 0;
    for (size_t i = 0; checked && st == HCOMM_SUCCESS && i < len; i++)
        if (got[i] != expect(c, r, i, count) && bad++ == 0)
            first = i;
    CHECK(bad == 0, "%s (%s%s%s, count %zu): %zu wrong, first [%zu] %d, expected %d", coll_name[c],
          kinds_name[k], in_place ? ", in place" : "",
          how == 1   ? ", nonblocking"
          : how == 2 ? ", on a stream"
                     : "",
          count, bad, first, got[first], expect(c, r, first, count));
    free(got);
    free(in);
    if (sb != NULL)
        buf_free(ds, sb);
    buf_free(dr, rb);
}

/* A ring of sends and receives on memory of the kind. */
static void ring_p2p(hcomm_comm_t comm)
{
    int      r = g_rank, n = g_nranks, right = (r + 1) % n, left = (r + n - 1) % n;
    int32_t *in = malloc(COUNT * sizeof(int32_t));
    for (size_t i = 0; i < COUNT; i++)
        in[i] = input(r, i);
    int32_t       *sb = buf_new(1, COUNT, in), *rb = buf_new(1, COUNT, NULL);
    hcomm_status_t st = HCOMM_SUCCESS;
    /* one operation runs at a time per communicator: even ranks send first */
    for (int turn = 0; turn < 2 && st == HCOMM_SUCCESS; turn++)
        st = (turn == r % 2) ? hcomm_send(sb, COUNT, HCOMM_INT32, right, comm, NULL)
                             : hcomm_recv(rb, COUNT, HCOMM_INT32, left, comm, NULL);
    int32_t *got = buf_read(rb, COUNT);
    size_t   bad = 0;
    for (size_t i = 0; st == HCOMM_SUCCESS && i < COUNT; i++)
        bad += got[i] != input(left, i);
    CHECK(st == HCOMM_SUCCESS && bad == 0, "send/recv ring: %s, %zu wrong", hcomm_status_str(st),
          bad);
    free(got);
    free(in);
    buf_free(1, sb);
    buf_free(1, rb);
}

/* hc_mem_reduce and its division on the kind: the host kernels through the
 * test kind's shadow; CUDA's own kernels on device memory. */
static void reduce_on_kind(void)
{
    int32_t *in = malloc(COUNT * sizeof(int32_t));
    for (size_t i = 0; i < COUNT; i++)
        in[i] = input(g_rank, i) - 500;
    int32_t *a = buf_new(1, COUNT, in), *b = buf_new(1, COUNT, in), *d = buf_new(1, COUNT, NULL);
    hcomm_status_t st = hc_mem_reduce(d, a, b, COUNT, HCOMM_INT32, HCOMM_SUM);
    if (st == HCOMM_SUCCESS)
        st = hc_mem_reduce_div(d, COUNT, HCOMM_INT32, 2);
    int32_t *got = buf_read(d, COUNT);
    size_t   bad = 0;
    for (size_t i = 0; st == HCOMM_SUCCESS && i < COUNT; i++)
        bad += got[i] != in[i];
    CHECK(st == HCOMM_SUCCESS && bad == 0, "hc_mem_reduce on %s memory: %s, %zu wrong",
          dc_kind_name, hcomm_status_str(st), bad);
    free(got);
    free(in);
    buf_free(1, a);
    buf_free(1, b);
    buf_free(1, d);
}

/* What a profiler's op_start saw of the last call. */
static const void *g_prof_send;
static void       *g_prof_recv;

static void prof_start(void *user, const hcomm_prof_op_t *op, void **data)
{
    (void)user, (void)data;
    if (op->ncalls == 1)
        g_prof_send = op->calls[0].sendbuf, g_prof_recv = op->calls[0].recvbuf;
}

/* Profiler hooks see the caller's buffers, not the host copies. */
static void profiler_sees_caller(hcomm_comm_t comm)
{
    hcomm_profiler_t p = {prof_start, NULL, NULL};
    int              id;
    int32_t         *s = buf_new(1, COUNT, NULL), *r = buf_new(1, COUNT, NULL);
    if (hcomm_profiler_register(&p, &id) != HCOMM_SUCCESS) {
        CHECK(0, "profiler_register failed");
        return;
    }
    hcomm_status_t st = hcomm_allreduce(s, r, COUNT, HCOMM_INT32, HCOMM_SUM, comm, NULL);
    hcomm_profiler_unregister(id);
    CHECK(st == HCOMM_SUCCESS && g_prof_send == s && g_prof_recv == r,
          "profiler saw %p/%p for a staged allreduce of %p/%p (%s)", g_prof_send,
          (void *)g_prof_recv, (void *)s, (void *)r, hcomm_status_str(st));
    buf_free(1, s);
    buf_free(1, r);
}

/* MoE dispatch reads the router's outputs on the host: expert ids left in
 * device memory on the last rank are refused there, every other rank hears
 * it in the count exchange, and the communicator stays usable. */
static void moe_refusal(hcomm_comm_t comm)
{
    hcomm_moe_config_t cfg = {4, NULL, 2, 8, HCOMM_FLOAT32};
    hcomm_moe_t        moe = NULL;
    hcomm_moe_recv_t   rv;
    float              x[3 * 8] = {0}, w[6] = {1, 1, 1, 1, 1, 1};
    int32_t            ids[6] = {0, 1, 2, 3, -1, 0};
    int32_t           *dids   = buf_new(1, 6, ids);
    int                last   = g_rank == g_nranks - 1;
    if (hcomm_moe_create(comm, &cfg, &moe) != HCOMM_SUCCESS) {
        CHECK(0, "hcomm_moe_create failed");
        buf_free(1, dids);
        return;
    }
    hcomm_status_t st   = hcomm_moe_dispatch(moe, x, 3, last ? dids : ids, w, &rv);
    hcomm_status_t want = last           ? HCOMM_ERR_UNSUPPORTED
                          : g_nranks > 1 ? HCOMM_ERR_REMOTE
                                         : HCOMM_ERR_UNSUPPORTED;
    CHECK(st == want, "moe dispatch, ids in device memory on the last rank: %s, want %s",
          hcomm_status_name(st), hcomm_status_name(want));
    st = hcomm_moe_dispatch(moe, x, 3, ids, w, &rv);
    CHECK(st == HCOMM_SUCCESS, "moe dispatch after the refusal: %s", hcomm_status_name(st));
    hcomm_moe_destroy(moe);
    buf_free(1, dids);
}

/* The dynamic alltoallv takes host memory only: a receive buffer in test
 * memory on the last rank is refused before the counts are exchanged, so the
 * others hear it at once instead of waiting for it in the data exchange. */
static void dynamic_a2a_refusal(hcomm_comm_t comm)
{
    int32_t *s = calloc((size_t)g_nranks, sizeof(int32_t));
    int32_t *h = calloc((size_t)g_nranks, sizeof(int32_t));
    int32_t *d = buf_new(1, (size_t)g_nranks, NULL);
    size_t  *v = calloc(3 * (size_t)g_nranks, sizeof(size_t)), *got = v + 2 * g_nranks;
    int      last = g_rank == g_nranks - 1;
    for (int p = 0; p < g_nranks && v != NULL; p++)
        v[p] = 1, v[g_nranks + p] = (size_t)p;
    if (s == NULL || h == NULL || v == NULL) {
        CHECK(0, "out of memory in the test");
    } else {
        hcomm_status_t st =
            hcomm_alltoallv_dynamic(s, v, v + g_nranks, last ? (void *)d : (void *)h,
                                    (size_t)g_nranks, got, HCOMM_INT32, comm, NULL);
        hcomm_status_t want = last || g_nranks == 1 ? HCOMM_ERR_UNSUPPORTED : HCOMM_ERR_REMOTE;
        CHECK(st == want,
              "alltoallv_dynamic, recvbuf in device memory on the last rank: %s, want %s",
              hcomm_status_name(st), hcomm_status_name(want));
        st = hcomm_alltoallv_dynamic(s, v, v + g_nranks, h, (size_t)g_nranks, got, HCOMM_INT32,
                                     comm, NULL);
        CHECK(st == HCOMM_SUCCESS, "alltoallv_dynamic after the refusal: %s",
              hcomm_status_name(st));
    }
    free(s);
    free(h);
    free(v);
    buf_free(1, d);
}

/* One group of an in-place allreduce, an allgather into memory of the kind
 * from host memory, and a ring of a send and a receive, each rank's buffers
 * of the kind (even ranks' only with mixed): the group's calls are staged
 * together. */
static void group_calls(hcomm_comm_t comm, int mixed)
{
    int      r = g_rank, n = g_nranks, right = (r + 1) % n, left = (r + n - 1) % n;
    int      dev = !mixed || r % 2 == 0;
    int32_t *in  = malloc(COUNT * sizeof(int32_t));
    for (size_t i = 0; i < COUNT; i++)
        in[i] = input(r, i);
    int32_t *ar = buf_new(dev, COUNT, in), *ag = buf_new(dev, COUNT * (size_t)n, NULL);
    int32_t *sb = buf_new(dev, COUNT, in), *rb = buf_new(dev, COUNT, NULL);
    hcomm_group_start();
    hcomm_status_t st = hcomm_allreduce(ar, ar, COUNT, HCOMM_INT32, HCOMM_SUM, comm, NULL);
    if (st == HCOMM_SUCCESS)
        st = hcomm_allgather(in, ag, COUNT, HCOMM_INT32, comm, NULL);
    if (st == HCOMM_SUCCESS && n > 1)
        st = hcomm_send(sb, COUNT, HCOMM_INT32, right, comm, NULL);
    if (st == HCOMM_SUCCESS && n > 1)
        st = hcomm_recv(rb, COUNT, HCOMM_INT32, left, comm, NULL);
    hcomm_status_t end = hcomm_group_end();
    CHECK(st == HCOMM_SUCCESS && end == HCOMM_SUCCESS, "group%s: %s, end %s",
          mixed ? " (even ranks' memory of the kind)" : "", hcomm_status_str(st),
          hcomm_status_str(end));
    int32_t *got_ar = buf_read(ar, COUNT), *got_ag = buf_read(ag, COUNT * (size_t)n);
    int32_t *got_rb = buf_read(rb, COUNT);
    size_t   bad    = 0;
    for (size_t i = 0; st == HCOMM_SUCCESS && end == HCOMM_SUCCESS && i < COUNT; i++) {
        bad += got_ar[i] != expect(C_ALLREDUCE, r, i, COUNT);
        bad += n > 1 && got_rb[i] != input(left, i);
        for (int q = 0; q < n; q++)
            bad += got_ag[(size_t)q * COUNT + i] != input(q, i);
    }
    CHECK(bad == 0, "group%s: %zu wrong", mixed ? " (even ranks' memory of the kind)" : "", bad);
    free(got_ar);
    free(got_ag);
    free(got_rb);
    free(in);
    buf_free(dev, ar);
    buf_free(dev, ag);
    buf_free(dev, sb);
    buf_free(dev, rb);
}

/* The calls that do not stage yet refuse such memory, naming it. */
static void refusals(hcomm_comm_t comm)
{
    int32_t                *d = buf_new(1, COUNT, NULL);
    int32_t                *h = malloc(COUNT * sizeof(int32_t));
    hcomm_compress_config_t cfg;
    hcomm_compress_t        cs = NULL;
    hcomm_status_t          st;
    memset(h, 0, COUNT * sizeof(int32_t));
    if (hcomm_compress_parse("bf16", &cfg) == HCOMM_SUCCESS &&
        hcomm_compress_create(comm, &cfg, COUNT, HCOMM_FLOAT32, &cs) == HCOMM_SUCCESS) {
        float *f = (float *)d;
        st       = hcomm_allreduce_compressed(f, f, COUNT, HCOMM_FLOAT32, cs, comm, NULL);
        CHECK(st == HCOMM_ERR_UNSUPPORTED, "compressed allreduce on device memory: %s",
              hcomm_status_str(st));
        hcomm_compress_destroy(cs);
    }
    free(h);
    buf_free(1, d);
    moe_refusal(comm);
    dynamic_a2a_refusal(comm);
}

/* --bench COUNT ITERS: rank 0 prints the mean time of an int32 sum
 * allreduce of COUNT elements on host buffers and on the kind's (staged),
 * ITERS calls each after 3 untimed, alternating the two kinds 3 times. */
static int bench(hcomm_comm_t comm, size_t count, int iters)
{
    double t[2] = {0, 0};
    for (int round = 0; round < 3; round++)
        for (int dev = 0; dev < 2; dev++) {
            int32_t *s = buf_new(dev, count, NULL), *r = buf_new(dev, count, NULL);
            double   t0 = 0;
            for (int i = -3; i < iters; i++) {
                if (i == 0 && hcomm_barrier(comm, NULL) == HCOMM_SUCCESS)
                    t0 = hc_clock_now_ns() * 1e-9;
                if (hcomm_allreduce(s, r, count, HCOMM_INT32, HCOMM_SUM, comm, NULL) !=
                    HCOMM_SUCCESS)
                    return 1;
            }
            t[dev] += hc_clock_now_ns() * 1e-9 - t0;
            buf_free(dev, s);
            buf_free(dev, r);
        }
    /* busbw as nccl-tests: bytes x 2(n-1)/n over the time; the staging's own
     * rate: the two copies (in and out) over the time staging added */
    double bytes = (double)count * sizeof(int32_t), th = t[0] / (3.0 * iters),
           ts = t[1] / (3.0 * iters), f = g_nranks > 1 ? 2.0 * (g_nranks - 1) / g_nranks : 1;
    if (g_rank == 0)
        printf("allreduce of %.0f bytes on %d ranks: host %.1f us (busbw %.2f GB/s), "
               "%s %.1f us (busbw %.2f GB/s), %.2fx; staging copies %.2f GB/s\n",
               bytes, g_nranks, th * 1e6, bytes * f / th * 1e-9, dc_kind_name, ts * 1e6,
               bytes * f / ts * 1e-9, ts / th, ts > th ? 2 * bytes / (ts - th) * 1e-9 : 0.0);
    return 0;
}

int main(int argc, char **argv)
{
    hcomm_comm_t comm;
    const char  *why = dc_unusable();
    if (why != NULL) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    if (test_comm_init(&comm, &g_rank, &g_nranks) != HCOMM_SUCCESS) {
        printf("device_check: init failed\n");
        return 2;
    }
    dc_bind(g_rank);
    if (argc == 4 && strcmp(argv[1], "--bench") == 0) {
        int rc = bench(comm, (size_t)atol(argv[2]), atoi(argv[3]));
        hcomm_comm_destroy(comm);
        return rc;
    }
    if (argc == 3 && strcmp(argv[1], "--copies") == 0) {
        if (g_rank == 0)
            dc_copy_rates((size_t)atol(argv[2]));
        hcomm_comm_destroy(comm);
        return 0;
    }
    dc_kind_checks(comm);
    reduce_on_kind();
    profiler_sees_caller(comm);
    for (int c = 0; c < C_COUNT; c++)
        for (int k = 0; k < K_COUNT; k++) {
            one(comm, (coll_t)c, k, 0, COUNT, 0);
            one(comm, (coll_t)c, k, 0, 0, 0);
            if (c != C_ALLTOALL && k == K_BOTH)
                one(comm, (coll_t)c, k, 1, COUNT, 0);
        }
    /* several staging chunks (core/stage.h): steps wait for their part */
    for (int c = 0; c < C_COUNT; c++)
        one(comm, (coll_t)c, K_BOTH, c != C_ALLTOALL, BIG, 0);
    one(comm, C_ALLREDUCE, K_SEND, 0, BIG, 0);
    one(comm, C_ALLREDUCE, K_BOTH, 0, COUNT, 1);
    one(comm, C_ALLREDUCE, K_EVEN, 1, COUNT, 2);
    if (g_nranks > 1)
        ring_p2p(comm);
    group_calls(comm, 0);
    group_calls(comm, 1);
    refusals(comm);
    hcomm_comm_destroy(comm);
    printf("device_check (%s) rank %d: %d of %d checks passed\n", dc_kind_name, g_rank,
           g_checks - g_failed, g_checks);
    return g_failed != 0;
}
