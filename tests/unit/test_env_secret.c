/* test_env_secret.c - hcomm_comm_init_env without HCOMM_COOKIE: a root on a
 * loopback address (one host) goes ahead with a cookie derived from it; any
 * other root needs a secret, or the explicit HCOMM_COOKIE_FROM_ROOT=1.
 * 192.0.2.1 is TEST-NET-1: never bound here, and no packet is sent to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/params.h"
#include "hcomm.h"

static char log_path[64];

static int log_has(const char *needle)
{
    FILE *f = fopen(log_path, "r");
    char  line[2048];
    int   n = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, needle) != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

static hcomm_status_t init_env_cookie(const char *rank, const char *root, const char *from_root,
                                      const char *cookie)
{
    hcomm_comm_t comm = NULL;
    unlink(log_path);
    setenv("HCOMM_RANK", rank, 1);
    setenv("HCOMM_NRANKS", "2", 1);
    setenv("HCOMM_ROOT", root, 1);
    setenv("HCOMM_TIMEOUT", "1", 1);
    setenv("HCOMM_LOG_FILE", log_path, 1);
    setenv("HCOMM_LOG_LEVEL", "info", 1);
    if (cookie != NULL)
        setenv("HCOMM_COOKIE", cookie, 1);
    else
        unsetenv("HCOMM_COOKIE");
    if (from_root != NULL)
        setenv("HCOMM_COOKIE_FROM_ROOT", from_root, 1);
    else
        unsetenv("HCOMM_COOKIE_FROM_ROOT");
    hc_params_reload();
    hcomm_status_t st = hcomm_comm_init_env(&comm);
    if (st == HCOMM_SUCCESS)
        hcomm_comm_destroy(comm);
    return st;
}

static hcomm_status_t init_env(const char *rank, const char *root, const char *from_root)
{
    return init_env_cookie(rank, root, from_root, NULL);
}

/* HCOMM_COOKIE is 32 hex digits and nothing else: "1 " and "+f" were bytes to
 * sscanf's "%2x", so a cookie of spaces and signs was taken for a key. */
static void test_cookie_hex_only(void **state)
{
    static const char *const bad[] = {
        "1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 ", "+f+f+f+f+f+f+f+f+f+f+f+f+f+f+f+f",
        "-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1-1", "0x0x0x0x0x0x0x0x0x0x0x0x0x0x0x0x",
        "00112233445566778899aabbccddeef",  "00112233445566778899aabbccddeeff0",
        "00112233445566778899aabbccddeefg"};
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(init_env_cookie("1", "127.0.0.1:9", NULL, bad[i]), HCOMM_ERR_INVALID_ARG);
        assert_int_equal(log_has("HCOMM_COOKIE: expected 32 hex digits"), 1);
    }
    /* a good one goes ahead (no root listens there) */
    assert_int_equal(init_env_cookie("1", "127.0.0.1:9", NULL, "00112233445566778899AAbbCCddEEff"),
                     HCOMM_ERR_TIMEOUT);
}

/* Across hosts, no secret: refused at once, before any connection. */
static void test_remote_root_needs_secret(void **state)
{
    (void)state;
    assert_int_equal(init_env("1", "192.0.2.1:9", NULL), HCOMM_ERR_INVALID_USAGE);
    assert_int_equal(log_has("HCOMM_COOKIE is not set"), 1);
}

/* The opt-in goes ahead (rank 0 then fails to bind an address it lacks),
 * with a warning that the job has no secret. */
static void test_opt_in_goes_ahead(void **state)
{
    (void)state;
    hcomm_status_t st = init_env("0", "192.0.2.1:9", "1");
    assert_int_not_equal(st, HCOMM_ERR_INVALID_USAGE);
    assert_int_not_equal(st, HCOMM_SUCCESS);
    assert_int_equal(log_has("(no secret)"), 1);
    assert_int_equal(log_has("HCOMM_COOKIE is not set"), 0);
}

/* One host: allowed (rank 1 times out: no root listens there). */
static void test_loopback_root_allowed(void **state)
{
    (void)state;
    assert_int_equal(init_env("1", "127.0.0.1:9", NULL), HCOMM_ERR_TIMEOUT);
    assert_int_equal(log_has("(no secret)"), 1);
}

int main(void)
{
    snprintf(log_path, sizeof(log_path), "/tmp/hcomm-test-env-secret-%d.log", (int)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_root_needs_secret),
        cmocka_unit_test(test_opt_in_goes_ahead),
        cmocka_unit_test(test_loopback_root_allowed),
        cmocka_unit_test(test_cookie_hex_only),
    };
    int failed = cmocka_run_group_tests_name("env_secret", tests, NULL, NULL);
    unlink(log_path);
    return failed;
}
