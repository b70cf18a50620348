/* test_params.c - the HCOMM_* parameter table: defaults, parsing, bad values. */
#include <math.h>
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

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"

static void test_defaults(void **state)
{
    (void)state;
    unsetenv("HCOMM_CHUNK_BYTES");
    unsetenv("HCOMM_TIMEOUT");
    hc_params_reload();
    const hc_params_t *p = hc_params_get();
    assert_int_equal(p->chunk_bytes, 256 * 1024);
    assert_true(p->timeout == 300.0);
    assert_string_equal(p->transport, "auto");
}

static void test_parse_size(void **state)
{
    size_t v;
    (void)state;
    assert_int_equal(hc_params_parse_size("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(hc_params_parse_size("4K", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(hc_params_parse_size("3m", &v), 0);
    assert_int_equal(v, 3u << 20);
    assert_int_equal(hc_params_parse_size("2GB", &v), 0);
    assert_int_equal(v, (size_t)2 << 30);
    assert_int_not_equal(hc_params_parse_size("", &v), 0);
    assert_int_not_equal(hc_params_parse_size("-1", &v), 0);
    assert_int_not_equal(hc_params_parse_size(" -1", &v), 0); /* strtoull skips the blank */
    assert_int_not_equal(hc_params_parse_size("12Q", &v), 0);
    assert_int_not_equal(hc_params_parse_size("99999999999999999999", &v), 0);
    assert_int_not_equal(hc_params_parse_size("17179869184G", &v), 0);
}

static void test_env_values(void **state)
{
    (void)state;
    setenv("HCOMM_CHUNK_BYTES", "64K", 1);
    setenv("HCOMM_TIMEOUT", "2.5", 1);
    setenv("HCOMM_TCP_NSOCKS", "4", 1);
    hc_params_reload();
    const hc_params_t *p = hc_params_get();
    assert_int_equal(p->chunk_bytes, 64 * 1024);
    assert_true(p->timeout == 2.5);
    assert_int_equal(p->tcp_nsocks, 4);
    unsetenv("HCOMM_TCP_NSOCKS");
}

static void test_invalid_keeps_default(void **state)
{
    (void)state;
    setenv("HCOMM_TIMEOUT", "soon", 1);
    setenv("HCOMM_TCP_NSOCKS", "4x", 1);
    setenv("HCOMM_NO_SUCH_PARAMETER", "1", 1); /* warns, is ignored */
    setenv("HCOMM_RING_ORDER", "ranks", 1);    /* neither plan nor rank */
    hc_params_reload();
    const hc_params_t *p = hc_params_get();
    assert_true(p->timeout == 300.0);
    assert_int_equal(p->tcp_nsocks, 1);
    assert_string_equal(p->ring_order, "plan");
    setenv("HCOMM_RING_ORDER", "rank", 1);
    hc_params_reload();
    assert_string_equal(hc_params_get()->ring_order, "rank");
    unsetenv("HCOMM_RING_ORDER");
    unsetenv("HCOMM_TIMEOUT");
    unsetenv("HCOMM_TCP_NSOCKS");
    unsetenv("HCOMM_NO_SUCH_PARAMETER");
}

/* The NCCL front end's (src/shim/nccl/nccl_params.c); libnccl.so.2 calls it when loaded. */
void hcomm_nccl_env_enable(void);

/* NCCL_* variables stand in for their HCOMM_* equivalents, which win, in
 * programs on the NCCL API only. */
static void test_nccl_fallbacks(void **state)
{
    (void)state;
    setenv("NCCL_ALGO", "Ring", 1);
    hc_params_reload();
    assert_string_equal(hc_params_get()->algo, ""); /* a native hcomm program */
    hcomm_nccl_env_enable();
    setenv("NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,GRAPH,PROXY", 1);
    setenv("NCCL_ALGO", "Ring,CollnetDirect", 1);
    setenv("NCCL_SHM_DISABLE", "1", 1);
    setenv("NCCL_SOCKET_IFNAME", "^docker,lo", 1);
    setenv("NCCL_NSOCKS_PERTHREAD", "3", 1);
    setenv("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1", 1);
    setenv("NCCL_IB_GID_INDEX", "3", 1);
    setenv("NCCL_NET", "Socket", 1);
    setenv("NCCL_IB_DISABLE", "1", 1); /* NCCL_NET comes first in the table: it wins */
    setenv("NCCL_IB_TC", "106", 1); /* no equivalent: an info line, ignored */
    setenv("HCOMM_TCP_NSOCKS", "2", 1);
    hc_params_reload();
    const hc_params_t *p = hc_params_get();
    assert_string_equal(p->log_subsys, "init,boot,topo");
    assert_string_equal(p->algo, "ring");
    assert_string_equal(p->transport, "tcp");
    assert_string_equal(p->socket_ifname, "^docker,lo");
    assert_int_equal(p->tcp_nsocks, 2); /* HCOMM_ wins */
    assert_string_equal(p->ib_hca, "=mlx5_0:1,mlx5_1");
    assert_int_equal(p->ib_gid_index, 3);
    assert_string_equal(p->net, "tcp,ib,ofi,ucx");
    unsetenv("NCCL_NET");
    hc_params_reload();
    assert_string_equal(hc_params_get()->net, "ofi,ucx,tcp"); /* NCCL_IB_DISABLE=1 */
    setenv("NCCL_NET", "IB", 1);
    setenv("NCCL_IB_DISABLE", "0", 1);
    hc_params_reload();
    assert_string_equal(hc_params_get()->net, "ib,ofi,ucx,tcp");
    setenv("NCCL_NET", "Nonesuch", 1); /* a plugin hcomm lacks: the default */
    hc_params_reload();
    assert_string_equal(hc_params_get()->net, "ib,ofi,ucx,tcp");
    setenv("NCCL_ALGO", "CollnetChain", 1); /* nothing hcomm knows: default */
    setenv("NCCL_SHM_DISABLE", "0", 1);
    setenv("NCCL_DEBUG_SUBSYS", "^INIT,NET", 1); /* all but: the ^ must survive */
    hc_params_reload();
    assert_string_equal(hc_params_get()->log_subsys, "^init,net");
    assert_string_equal(hc_params_get()->algo, "");
    assert_string_equal(hc_params_get()->transport, "auto");
    const char *vars[] = {"NCCL_DEBUG_SUBSYS",     "NCCL_ALGO",       "NCCL_SHM_DISABLE",
                          "NCCL_SOCKET_IFNAME",    "NCCL_IB_HCA",     "NCCL_IB_GID_INDEX",
                          "NCCL_NSOCKS_PERTHREAD", "NCCL_NET",        "NCCL_IB_DISABLE",
                          "NCCL_IB_TC",            "HCOMM_TCP_NSOCKS"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    hc_params_reload();
}

/* Lines of path that contain s. */
static int count_lines(const char *path, const char *s)
{
    char  line[1024];
    int   n = 0;
    FILE *f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, s) != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

/* Values that parse but are out of range are refused at load, each with one
 * warning naming it, and the default kept; the limits themselves are taken. */
static void test_out_of_range(void **state)
{
    static const struct {
        const char *name, *bad, *edge;
    } cases[] = {
        {"WATCH_TIMEOUT", "0", "0.001"},  {"WATCH_TIMEOUT", "-1", "0.001"},
        {"HEALTH_PERIOD", "0.01", "0.1"}, {"HEALTH_PERIOD", "0", "0.1"},
        {"HEALTH_WINDOW", "15", "16"},    {"HEALTH_WINDOW", "257", "256"},
        {"HEALTH_ALPHA", "0", "0.999"},   {"HEALTH_ALPHA", "1", "0.001"},
        {"TIMEOUT", "0", "0.5"},          {"CHUNK_BYTES", "512", "1K"},
        {"CHUNK_BYTES", "1", "0"},
    };
    char log[] = "/tmp/hcomm-test-params-XXXXXX", name[64], want[128];
    int  fd    = mkstemp(log);
    (void)state;
    assert_true(fd >= 0);
    close(fd);
    setenv("HCOMM_LOG_FILE", log, 1);
    setenv("HCOMM_LOG_LEVEL", "warn", 1);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(name, sizeof(name), "HCOMM_%s", cases[i].name);
        setenv(name, cases[i].bad, 1);
        hc_params_reload();
        const hc_params_t *p = hc_params_get();
        assert_true(p->watch_timeout == 0.5);
        assert_true(p->health_period == 1.0);
        assert_int_equal(p->health_window, 64);
        assert_true(p->health_alpha == 0.05);
        assert_true(p->timeout == 300.0);
        snprintf(want, sizeof(want), "%s: invalid value %s (must be ", name, cases[i].bad);
        assert_int_equal(count_lines(log, want), 1);
        assert_int_equal(count_lines(log, "invalid value"), 1);
        assert_int_equal(truncate(log, 0), 0);
        setenv(name, cases[i].edge, 1);
        hc_params_reload();
        assert_int_equal(count_lines(log, "invalid value"), 0);
        unsetenv(name);
    }
    setenv("HCOMM_HEALTH_WINDOW", "16", 1);
    setenv("HCOMM_HEALTH_PERIOD", "0.1", 1);
    setenv("HCOMM_HEALTH_ALPHA", "0.2", 1);
    setenv("HCOMM_WATCH_TIMEOUT", "0.25", 1);
    hc_params_reload();
    const hc_params_t *p = hc_params_get();
    assert_int_equal(p->health_window, 16);
    assert_true(p->health_period == 0.1);
    assert_true(p->health_alpha == 0.2);
    assert_true(p->watch_timeout == 0.25);
    unsetenv("HCOMM_HEALTH_WINDOW");
    unsetenv("HCOMM_HEALTH_PERIOD");
    unsetenv("HCOMM_HEALTH_ALPHA");
    unsetenv("HCOMM_WATCH_TIMEOUT");
    setenv("HCOMM_LOG_LEVEL", "error", 1);
    unsetenv("HCOMM_LOG_FILE");
    hc_params_reload();
    unlink(log);
}

/* A mistyped level, subsystem or file is said (a warning each), and errors
 * and warnings pass any subsystem mask: a typo must not hide them. */
static void test_log_settings(void **state)
{
    char log[] = "/tmp/hcomm-test-log-XXXXXX";
    int  fd    = mkstemp(log);
    (void)state;
    assert_true(fd >= 0);
    close(fd);
    setenv("HCOMM_LOG_FILE", log, 1);
    setenv("HCOMM_LOG_LEVEL", "warn", 1);
    hc_params_reload();
    setenv("HCOMM_LOG_LEVEL", "verbose", 1);
    setenv("HCOMM_LOG_SUBSYS", "colls,algo", 1);
    hc_params_reload();
    assert_int_equal(count_lines(log, "HCOMM_LOG_LEVEL=verbose is not a level"), 1);
    assert_int_equal(count_lines(log, "HCOMM_LOG_SUBSYS: no subsystem named colls; ignored"), 1);
    hc_error(COLL, "an error outside the mask");
    hc_warn(NET, "a warning outside the mask");
    assert_int_equal(count_lines(log, "an error outside the mask"), 1);
    assert_int_equal(count_lines(log, "a warning outside the mask"), 1);
    setenv("HCOMM_LOG_LEVEL", "info", 1);
    hc_params_reload();
    hc_info(COLL, "info outside the mask");
    hc_info(ALGO, "info inside the mask");
    assert_int_equal(count_lines(log, "info outside the mask"), 0);
    assert_int_equal(count_lines(log, "info inside the mask"), 1);
    setenv("HCOMM_LOG_SUBSYS", "all", 1);
    setenv("HCOMM_LOG_FILE", "/nonexistent-dir/hcomm.log", 1);
    hc_params_reload(); /* the warning goes where the log went so far */
    assert_int_equal(
        count_lines(log, "HCOMM_LOG_FILE: cannot open /nonexistent-dir/hcomm.log: No such file"),
        1);
    setenv("HCOMM_LOG_LEVEL", "error", 1);
    unsetenv("HCOMM_LOG_SUBSYS");
    unsetenv("HCOMM_LOG_FILE");
    hc_params_reload();
    unlink(log);
}

/* A timeout set huge to mean "never" is a deadline far ahead, not one that
 * wrapped to now (a stream's waits would all fail at once). */
static void test_huge_timeout(void **state)
{
    (void)state;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double spans[] = {2e10, 1e12, 1e300, HUGE_VAL};
    for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
        struct timespec at = hc_clock_abs_in(spans[i]);
        assert_true(at.tv_sec >= now.tv_sec + (time_t)HC_CLOCK_SPAN_MAX);
        assert_true(at.tv_nsec >= 0 && at.tv_nsec < 1000000000L);
    }
    struct timespec none = hc_clock_span(-1.0);
    assert_true(none.tv_sec == 0 && none.tv_nsec == 0);
    struct timespec half = hc_clock_span(2.5);
    assert_true(half.tv_sec == 2 && half.tv_nsec == 500000000L);
}

int main(void)
{
    setenv("HCOMM_LOG_LEVEL", "error", 1); /* the invalid-value warnings are expected */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),       cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_env_values),     cmocka_unit_test(test_invalid_keeps_default),
        cmocka_unit_test(test_nccl_fallbacks), cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_log_settings),   cmocka_unit_test(test_huge_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
