/* nccl_unit.c - the shim's own logic in one process, one rank, through
 * hcomm_nccl_Xxx (no libnccl.so.2): registration handles, PreMulSum on test
 * memory (src/device/device.h) and with integer scalars a double cannot
 * hold, which failed calls fail an open group, destroyed handles, a destroy
 * that fails (the handle stays valid), and the NCCL_* environment's
 * translation. Every failure is checked to log one line (HCOMM_LOG_FILE). Run by
 * run_shim.sh; arguments name the checks to run (main), none all of them;
 * exit 0 PASS, 1 FAIL. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/params.h"
#include "device/device.h"
#include "hcomm_nccl.h"
#include "hcomm_stream.h"
#include "nccl.h"
#include "shim/nccl/nccl_shim.h" /* hcomm_nccl_Xxx, the communicator's layout */

static int  failures;
static char log_path[512];

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " [last error: %s]\n", hcomm_nccl_GetLastError(NULL));                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* The lines of the library's log so far. */
static long log_lines(void)
{
    FILE *f = fopen(log_path, "r");
    long  n = 0;
    for (int ch; f != NULL && (ch = getc(f)) != EOF;)
        n += ch == '\n';
    if (f != NULL)
        fclose(f);
    return n;
}

/* call returns want, with one log line if it is a failure, none otherwise. */
#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        long         b_ = log_lines();                                                             \
        ncclResult_t r_ = (call);                                                                  \
        long         l_ = log_lines() - b_;                                                        \
        CHECK(r_ == (want) && l_ == ((want) != ncclSuccess), "%s: %d, %ld log lines (want %d)",    \
              #call, (int)r_, l_, (int)(want));                                                    \
    } while (0)

static ncclComm_t new_comm(void)
{
    ncclUniqueId id;
    ncclComm_t   c = NULL;
    if (hcomm_nccl_GetUniqueId(&id) != ncclSuccess ||
        hcomm_nccl_CommInitRank(&c, 1, id, 0) != ncclSuccess) {
        fprintf(stderr, "no communicator: %s\n", hcomm_nccl_GetLastError(NULL));
        exit(1);
    }
    return c;
}

/* A handle is deregistered once; a stray one is refused, not freed. */
static void check_register(ncclComm_t c)
{
    char  buf[64];
    void *h = NULL, *h2 = NULL, *left = NULL;
    EXPECT(hcomm_nccl_CommRegister(c, buf, sizeof(buf), &h), ncclSuccess);
    EXPECT(hcomm_nccl_CommRegister(c, buf, sizeof(buf), &h2), ncclSuccess);
    CHECK(h != NULL && h2 != NULL && h != h2, "handles %p %p", h, h2);
    EXPECT(hcomm_nccl_CommDeregister(c, h), ncclSuccess);
    EXPECT(hcomm_nccl_CommDeregister(c, h), ncclInvalidUsage);   /* twice */
    EXPECT(hcomm_nccl_CommDeregister(c, buf), ncclInvalidUsage); /* the buffer, not its handle */
    EXPECT(hcomm_nccl_CommDeregister(c, NULL), ncclSuccess);
    EXPECT(hcomm_nccl_CommDeregister(c, h2), ncclSuccess);
    ncclComm_t other = new_comm();
    EXPECT(hcomm_nccl_CommRegister(other, buf, sizeof(buf), &h), ncclSuccess);
    EXPECT(hcomm_nccl_CommDeregister(c, h), ncclInvalidUsage); /* another communicator's */
    EXPECT(hcomm_nccl_CommRegister(other, buf, sizeof(buf), &left), ncclSuccess);
    EXPECT(hcomm_nccl_CommDeregister(other, h), ncclSuccess);
    EXPECT(hcomm_nccl_CommDestroy(other), ncclSuccess); /* frees `left` */
}

/* A PreMulSum allreduce of n elements of dt from s into r (one rank: r = s x scalar). */
static ncclResult_t premul(ncclComm_t c, ncclDataType_t dt, void *scalar, const void *s, void *r,
                           size_t n)
{
    ncclRedOp_t  op;
    ncclResult_t res = hcomm_nccl_RedOpCreatePreMulSum(&op, scalar, dt, ncclScalarHostImmediate, c);
    if (res == ncclSuccess) {
        res = hcomm_nccl_AllReduce(s, r, n, dt, op, c, NULL);
        hcomm_nccl_RedOpDestroy(op, c);
    }
    return res;
}

/* The send buffer is device memory (the test kind, which faults on a host
 * load): copied out as the plain ops' staging does, never read in place. */
static void check_premul_device(ncclComm_t c)
{
    enum { N = 64 };
    float *d = hc_mem_test_alloc(N * sizeof(float)), *r = hc_mem_test_alloc(N * sizeof(float));
    float *ds = hc_mem_test_shadow(d), *rs = hc_mem_test_shadow(r), h[N], s = 2.0f;
    if (ds == NULL || rs == NULL) {
        CHECK(0, "no test memory");
        return;
    }
    for (int i = 0; i < N; i++)
        ds[i] = (float)i;
    EXPECT(premul(c, ncclFloat32, &s, d, r, N), ncclSuccess);
    EXPECT(premul(c, ncclFloat32, &s, d, h, N), ncclSuccess);
    for (int i = 0; i < N; i++)
        CHECK(rs[i] == 2.0f * (float)i && h[i] == 2.0f * (float)i, "device premul [%d]: %g %g", i,
              rs[i], h[i]);
    EXPECT(premul(c, ncclFloat32, &s, d, d, N), ncclSuccess); /* in place */
    CHECK(ds[5] == 10.0f, "device premul in place: %g", ds[5]);
    hc_mem_test_free(d);
    hc_mem_test_free(r);
}

/* Integer scalars multiply in their type, exactly (and wrapping, as the
 * device does); a NaN float scalar is a NaN product, no integer. */
static void check_premul_scalars(ncclComm_t c)
{
    int64_t  big = ((int64_t)1 << 53) + 1, x[2] = {1, 3}, y[2] = {0};
    uint64_t ubig = ((uint64_t)1 << 63) + 2, ux[2] = {1, 2}, uy[2] = {0};
    int8_t   b8 = -3, x8[2] = {50, -7}, y8[2] = {0};
    uint32_t u32 = 4000000000u, x32[1] = {3}, y32[1] = {0};
    EXPECT(premul(c, ncclInt64, &big, x, y, 2), ncclSuccess);
    CHECK(y[0] == big && y[1] == 3 * big, "int64 x (2^53 + 1): %lld %lld", (long long)y[0],
          (long long)y[1]);
    EXPECT(premul(c, ncclUint64, &ubig, ux, uy, 2), ncclSuccess);
    CHECK(uy[0] == ubig && uy[1] == 4, "uint64 x (2^63 + 2): %llu %llu", (unsigned long long)uy[0],
          (unsigned long long)uy[1]);
    EXPECT(premul(c, ncclInt8, &b8, x8, y8, 2), ncclSuccess);
    CHECK(y8[0] == (int8_t)(50 * -3 + 256) && y8[1] == 21, "int8 x -3: %d %d", y8[0], y8[1]);
    EXPECT(premul(c, ncclUint32, &u32, x32, y32, 1), ncclSuccess);
    CHECK(y32[0] == (uint32_t)(3ull * 4000000000ull), "uint32 x 4e9: %u", y32[0]);
    double nan_s = NAN, inf_s = INFINITY, dx[1] = {2}, dy[1] = {0};
    float  fx[1] = {2}, fy[1] = {0}, finf = INFINITY;
    EXPECT(premul(c, ncclFloat64, &nan_s, dx, dy, 1), ncclSuccess);
    CHECK(isnan(dy[0]), "float64 x NaN: %g", dy[0]);
    EXPECT(premul(c, ncclFloat64, &inf_s, dx, dy, 1), ncclSuccess);
    CHECK(isinf(dy[0]), "float64 x inf: %g", dy[0]);
    EXPECT(premul(c, ncclFloat32, &finf, fx, fy, 1), ncclSuccess);
    CHECK(isinf(fy[0]), "float32 x inf: %g", fy[0]);
}

/* A failed query inside a group leaves it be (as NCCL's); a failed
 * collective fails it, and ncclGroupEnd names that one. */
static void check_group(ncclComm_t c)
{
    int          x = 1, y = 0, dev = 0;
    hcomm_comm_t hc = NULL;
    ncclWindow_t w;
    EXPECT(hcomm_nccl_GroupStart(), ncclSuccess);
    EXPECT(hcomm_nccl_CommCount(c, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommUserRank(c, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommCuDevice(c, &dev), ncclInvalidUsage);
    EXPECT(hcomm_nccl_CommGetAsyncError(c, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_GetVersion(NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommDeregister(c, &x), ncclInvalidUsage);
    EXPECT(hcomm_nccl_CommWindowRegister(c, &x, 4, &w, 0), ncclInvalidUsage);
    EXPECT(hcomm_nccl_MemAlloc(NULL, 0), ncclInvalidArgument);
    CHECK(hcomm_comm_from_nccl(c, NULL) == HCOMM_ERR_INVALID_COMM, "from_nccl(NULL)");
    EXPECT(hcomm_nccl_AllReduce(&x, &y, 1, ncclInt, ncclSum, c, NULL), ncclSuccess);
    EXPECT(hcomm_nccl_GroupEnd(), ncclSuccess);
    CHECK(y == 1, "the group's allreduce did not run after failed queries (y = %d)", y);
    CHECK(hcomm_comm_from_nccl(c, &hc) == HCOMM_SUCCESS, "from_nccl");
    y = 0;
    EXPECT(hcomm_nccl_GroupStart(), ncclSuccess);
    EXPECT(hcomm_nccl_AllReduce(&x, &y, 1, (ncclDataType_t)99, ncclSum, c, NULL),
           ncclInvalidArgument);
    EXPECT(hcomm_nccl_AllReduce(&x, &y, 1, ncclInt, ncclSum, c, NULL), ncclSuccess);
    EXPECT(hcomm_nccl_CommCount(c, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_GroupEnd(), ncclInvalidArgument);
    CHECK(y == 0, "a failed group's allreduce ran");
    CHECK(strstr(hcomm_nccl_GetLastError(c), "datatype") != NULL, "group end names: %s",
          hcomm_nccl_GetLastError(c));
}

/* Three ranks' communicators created by one thread in one group (NCCL's
 * single-process form): they exist once the group ends, and a group of an
 * allreduce on each, from that thread, sums over the three. A group with a
 * failed init leaves none of its communicators. */
static void check_group_init(void)
{
    enum { N = 3 };
    ncclUniqueId id;
    ncclComm_t   comms[N] = {NULL};
    int          x[N], y[N];
    EXPECT(hcomm_nccl_GetUniqueId(&id), ncclSuccess);
    EXPECT(hcomm_nccl_GroupStart(), ncclSuccess);
    for (int r = 0; r < N; r++)
        EXPECT(hcomm_nccl_CommInitRank(&comms[r], N, id, r), ncclSuccess);
    EXPECT(hcomm_nccl_GroupEnd(), ncclSuccess);
    for (int r = 0; r < N; r++)
        CHECK(comms[r] != NULL, "rank %d's communicator after the group", r);
    if (comms[0] == NULL || comms[1] == NULL || comms[2] == NULL)
        return;
    EXPECT(hcomm_nccl_GroupStart(), ncclSuccess);
    for (int r = 0; r < N; r++) {
        x[r] = r + 1, y[r] = 0;
        EXPECT(hcomm_nccl_AllReduce(&x[r], &y[r], 1, ncclInt, ncclSum, comms[r], NULL),
               ncclSuccess);
    }
    EXPECT(hcomm_nccl_GroupEnd(), ncclSuccess);
    for (int r = 0; r < N; r++) {
        CHECK(y[r] == 6, "rank %d's sum over the group's communicators: %d", r, y[r]);
        EXPECT(hcomm_nccl_CommDestroy(comms[r]), ncclSuccess);
    }
    /* an id serves one init: a rank given a used one fails at once, and the
     * group's other communicator, made meanwhile, is aborted with it */
    ncclComm_t   used = NULL, a = NULL, b = NULL;
    ncclUniqueId fresh;
    EXPECT(hcomm_nccl_GetUniqueId(&id), ncclSuccess);
    EXPECT(hcomm_nccl_CommInitRank(&used, 1, id, 0), ncclSuccess);
    EXPECT(hcomm_nccl_CommDestroy(used), ncclSuccess);
    EXPECT(hcomm_nccl_GetUniqueId(&fresh), ncclSuccess);
    EXPECT(hcomm_nccl_GroupStart(), ncclSuccess);
    EXPECT(hcomm_nccl_CommInitRank(&a, 1, fresh, 0), ncclSuccess);
    EXPECT(hcomm_nccl_CommInitRank(&b, 2, id, 1), ncclSuccess);
    CHECK(hcomm_nccl_GroupEnd() != ncclSuccess, "a group with a used id succeeded");
    CHECK(a == NULL && b == NULL, "a failed group left communicators %p %p", (void *)a, (void *)b);
}

/* A destroyed handle is refused (ncclInvalidArgument, one line) by every
 * call, never read: the core's registry vouches for a handle before the shim
 * looks inside it (ASan: tests/sanitize/run.sh). No communicator is made
 * between the destroy and the calls, which could reuse its address. */
static void check_destroyed(void)
{
    ncclComm_t   d = new_comm(), sub = NULL;
    int          x = 1, y = 0, n = -1, ex = 0;
    void        *h = NULL;
    ncclRedOp_t  op;
    ncclResult_t async = ncclSuccess;
    hcomm_comm_t hc    = NULL;
    EXPECT(hcomm_nccl_CommDestroy(d), ncclSuccess);
    EXPECT(hcomm_nccl_CommCount(d, &n), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommUserRank(d, &n), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommGetAsyncError(d, &async), ncclInvalidArgument);
    EXPECT(hcomm_nccl_AllReduce(&x, &y, 1, ncclInt, ncclSum, d, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_Broadcast(&x, &y, 1, ncclInt, 0, d, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_Send(&x, 1, ncclInt, 0, d, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_Gather(&x, &y, 1, ncclInt, 0, d, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommRegister(d, &x, sizeof(x), &h), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommDeregister(d, &x), ncclInvalidArgument);
    EXPECT(hcomm_nccl_RedOpCreatePreMulSum(&op, &x, ncclInt, ncclScalarHostImmediate, d),
           ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommSplit(d, 0, 0, &sub, NULL), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommShrink(d, &ex, 0, &sub, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommFinalize(d), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommRevoke(d, NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommDestroy(d), ncclInvalidArgument);
    EXPECT(hcomm_nccl_CommAbort(d), ncclInvalidArgument);
    CHECK(hcomm_comm_from_nccl(d, &hc) == HCOMM_ERR_INVALID_COMM && hc == NULL,
          "hcomm_comm_from_nccl of a destroyed handle gave %p", (void *)hc);
    CHECK(y == 0 && n == -1 && sub == NULL, "a destroyed handle's call wrote (%d, %d, %p)", y, n,
          (void *)sub);
    /* the program's next allocations of that size may get the freed memory
     * back (glibc's do), holding there what a live communicator would:
     * still refused (compared, never read, where it is not) */
    struct hcomm_comm *reuse[16] = {NULL}, *got = NULL;
    for (int i = 0; i < 16 && got == NULL; i++)
        if ((reuse[i] = malloc(sizeof(*reuse[i]))) != NULL && (void *)reuse[i] == (void *)d)
            got = reuse[i];
    if (got != NULL) {
        memset(got, 0, sizeof(*got));
        got->frontend_state = HC_NCCL_COMM_LIVE;
        got->nranks         = 7;
        EXPECT(hcomm_nccl_CommCount(d, &n), ncclInvalidArgument);
        EXPECT(hcomm_nccl_AllReduce(&x, &y, 1, ncclInt, ncclSum, d, NULL), ncclInvalidArgument);
        EXPECT(hcomm_nccl_CommDestroy(d), ncclInvalidArgument);
        CHECK(n == -1 && y == 0, "a reused handle's call wrote (%d, %d)", n, y);
    }
    for (int i = 0; i < 16; i++)
        free(reuse[i]);
}

/* A destroy (or abort) that fails, here because a request the program took
 * from an hcomm stream holds the communicator past its timeout, leaves it
 * valid: it still works, and a destroy or an abort once the request was
 * waited for ends it (and LSan sees nothing left). */
/* A host function that holds its stream until *arg is set (10 s at most). */
static void hold_stream(void *arg)
{
    for (int i = 0; i < 10000 && !__atomic_load_n((int *)arg, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
}

/* Work queued on an hcomm stream that has not run yet holds the communicator:
 * destroy and abort fail and leave it valid; once the stream ran, again frees
 * it. (A request taken with hcomm_stream_last_request does not hold it.) */
static void check_destroy_held(int abort)
{
    ncclComm_t     c  = new_comm();
    hcomm_comm_t   hc = NULL;
    hcomm_stream_t s  = NULL;
    int            x = 1, y = 0, n = 0, go = 0;
    if (hcomm_comm_from_nccl(c, &hc) != HCOMM_SUCCESS ||
        hcomm_comm_set_timeout(hc, 0.3) != HCOMM_SUCCESS ||
        hcomm_stream_create(&s) != HCOMM_SUCCESS ||
        hcomm_launch_host_func(s, hold_stream, &go) != HCOMM_SUCCESS ||
        hcomm_allreduce(&x, &y, 1, HCOMM_INT32, HCOMM_SUM, hc, s) != HCOMM_SUCCESS) {
        CHECK(0, "no stream work to hold the communicator");
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        return;
    }
    /* two lines: hcomm's (what held it, for how long) and the shim's outcome */
    long         b = log_lines();
    ncclResult_t r = hcomm_nccl_CommDestroy(c);
    CHECK(r == ncclSystemError && log_lines() - b == 2, "held destroy: %d, %ld lines", (int)r,
          log_lines() - b);
    CHECK(strstr(hcomm_nccl_GetLastError(c), "stays valid") != NULL, "destroy's error: %s",
          hcomm_nccl_GetLastError(c));
    if (abort) { /* still held */
        b = log_lines(), r = hcomm_nccl_CommAbort(c);
        CHECK(r == ncclSystemError && log_lines() - b == 2, "held abort: %d, %ld lines", (int)r,
              log_lines() - b);
    }
    EXPECT(hcomm_nccl_CommCount(c, &n), ncclSuccess);
    CHECK(n == 1, "count %d after a failed destroy", n);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    hcomm_status_t st = hcomm_stream_synchronize(s);
    CHECK(abort || (st == HCOMM_SUCCESS && y == 1), "the held allreduce: %s, %d",
          hcomm_status_name(st), y);
    if (abort)
        EXPECT(hcomm_nccl_CommAbort(c), ncclSuccess);
    else
        EXPECT(hcomm_nccl_CommDestroy(c), ncclSuccess);
    EXPECT(hcomm_nccl_CommCount(c, &n), ncclInvalidArgument); /* now it is gone */
    st = hcomm_stream_destroy(s); /* it reports the aborted allreduce, and is freed */
    CHECK(st == (abort ? HCOMM_ERR_ABORTED : HCOMM_SUCCESS), "hcomm_stream_destroy: %s",
          hcomm_status_name(st));
}

/* NCCL_* variables: whole words dedupe ("all" is not in "coll"); a value
 * with no translation logs one info line. Last: it reloads the parameters. */
static void check_env(void)
{
    hcomm_nccl_env_enable();
    setenv("HCOMM_LOG_LEVEL", "info", 1);
    static const char *const bad[][2] = {
        {"NCCL_ALGO", "^Ring"}, {"NCCL_DEBUG", "garbage"}, {"NCCL_DEBUG_SUBSYS", "^COLL,ALL"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv(bad[i][0], bad[i][1], 1);
        long b = log_lines();
        hc_params_reload();
        char  line[1024], want[64];
        int   found = 0;
        FILE *f     = fopen(log_path, "r");
        snprintf(want, sizeof(want), "%s=%s", bad[i][0], bad[i][1]);
        for (long n = 0; f != NULL && fgets(line, sizeof(line), f) != NULL; n++)
            found += n >= b && strstr(line, want) != NULL;
        if (f != NULL)
            fclose(f);
        CHECK(found == 1, "%s: %d info lines (want 1)", want, found);
        unsetenv(bad[i][0]);
    }
    /* last: hcomm's log keeps a subsystem mask where "all" follows one */
    setenv("NCCL_DEBUG_SUBSYS", "COLL,ALL", 1);
    hc_params_reload();
    CHECK(strcmp(hc_params_get()->log_subsys, "all") == 0, "COLL,ALL -> %s",
          hc_params_get()->log_subsys);
    setenv("NCCL_DEBUG_SUBSYS", "P2P,COLL,INIT,COLL", 1);
    hc_params_reload();
    CHECK(strcmp(hc_params_get()->log_subsys, "p2p,coll,init") == 0, "P2P,COLL,INIT,COLL -> %s",
          hc_params_get()->log_subsys);
    unsetenv("NCCL_DEBUG_SUBSYS");
    setenv("HCOMM_LOG_LEVEL", "warn", 1);
    hc_params_reload();
}

/* The checks named on the command line, or all. */
static int wanted(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return argc < 2;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("TMPDIR");
    snprintf(log_path, sizeof(log_path), "%s/hcomm_nccl_unit.%d.log", dir ? dir : "/tmp",
             (int)getpid());
    setenv("HCOMM_LOG_FILE", log_path, 1);
    setenv("HCOMM_LOG_LEVEL", "warn", 1);
    ncclComm_t c = new_comm();
    if (wanted(argc, argv, "register"))
        check_register(c);
    if (wanted(argc, argv, "premul_device"))
        check_premul_device(c);
    if (wanted(argc, argv, "premul_scalars"))
        check_premul_scalars(c);
    if (wanted(argc, argv, "group"))
        check_group(c);
    EXPECT(hcomm_nccl_CommDestroy(c), ncclSuccess);
    if (wanted(argc, argv, "group_init"))
        check_group_init();
    if (wanted(argc, argv, "destroyed"))
        check_destroyed();
    if (wanted(argc, argv, "destroy_held")) {
        check_destroy_held(0);
        check_destroy_held(1);
    }
    if (wanted(argc, argv, "env"))
        check_env();
    if (failures == 0)
        unlink(log_path);
    printf("nccl_unit: %s (%d failures)%s%s\n", failures ? "FAIL" : "PASS", failures,
           failures ? ", log " : "", failures ? log_path : "");
    return failures ? 1 : 0;
}
