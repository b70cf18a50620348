/* test_agree.c - the settings every rank must share: their digests, and an
 * init whose ranks differ in one (HCOMM_ALGO) fails on every rank with an
 * error naming it, instead of hanging in the first collective. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/params.h"
#include "hcomm.h"

static int agreed_index(const char *name)
{
    for (int i = 0; i < HC_PARAMS_AGREED_MAX; i++)
        if (strcmp(hc_params_agreed_name(i), name) == 0)
            return i;
    fail_msg("%s is not an agreed setting", name);
    return -1;
}

/* The digest of one agreed setting with the environment as it is now. */
static uint64_t digest_now(const char *name)
{
    uint64_t d[HC_PARAMS_AGREED_MAX];

    hc_params_reload();
    assert_true(hc_params_agreed_digests(hc_params_get(), d, HC_PARAMS_AGREED_MAX) > 0);
    return d[agreed_index(name)];
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_digests(void **state)
{
    char a[64], b[64];
    (void)state;

    setenv("HCOMM_CHUNK_BYTES", "256K", 1);
    uint64_t k = digest_now("CHUNK_BYTES");
    setenv("HCOMM_CHUNK_BYTES", "262144", 1);
    assert_true(digest_now("CHUNK_BYTES") == k); /* the value, not its spelling */
    setenv("HCOMM_CHUNK_BYTES", "128K", 1);
    assert_true(digest_now("CHUNK_BYTES") != k);
    unsetenv("HCOMM_CHUNK_BYTES");

    uint64_t none = digest_now("ALGO");
    setenv("HCOMM_ALGO", "ring", 1);
    assert_true(digest_now("ALGO") != none);
    /* long values that differ only past what a log line shows */
    char algo[256];
    int  len = snprintf(algo, sizeof(algo), "%s", "allreduce:ring");
    while (len < 180)
        len += snprintf(algo + len, sizeof(algo) - (size_t)len, ",allgather:ring");
    snprintf(algo + len, sizeof(algo) - (size_t)len, ",alltoall:pairwise");
    setenv("HCOMM_ALGO", algo, 1);
    uint64_t pairwise = digest_now("ALGO");
    snprintf(algo + len, sizeof(algo) - (size_t)len, ",alltoall:hier");
    setenv("HCOMM_ALGO", algo, 1);
    assert_true(digest_now("ALGO") != pairwise);
    unsetenv("HCOMM_ALGO");

    /* a file setting: its bytes, not its path */
    snprintf(a, sizeof(a), "/tmp/hcomm-agree-%d-a", (int)getpid());
    snprintf(b, sizeof(b), "/tmp/hcomm-agree-%d-b", (int)getpid());
    write_file(a, "allreduce 2 0 1M ring\n");
    write_file(b, "allreduce 2 0 1M ring\n");
    setenv("HCOMM_TUNING_FILE", a, 1);
    uint64_t fa = digest_now("TUNING_FILE");
    setenv("HCOMM_TUNING_FILE", b, 1);
    assert_true(digest_now("TUNING_FILE") == fa);
    write_file(b, "allreduce 2 0 1M rd\n");
    assert_true(digest_now("TUNING_FILE") != fa);
    unsetenv("HCOMM_TUNING_FILE");
    unlink(a);
    unlink(b);
    hc_params_reload();
}

/* A file setting is read up to HC_PARAMS_FILE_MAX: /dev/zero (endless) is an
 * error naming the variable, not an init that never ends. */
static void test_endless_file(void **state)
{
    static const char *const vars[] = {"HCOMM_TOPO_FILE", "HCOMM_TUNING_FILE"};
    uint64_t                 d[HC_PARAMS_AGREED_MAX];
    (void)state;
    alarm(60); /* the old digest never returned */
    for (int i = 0; i < 2; i++) {
        setenv(vars[i], "/dev/zero", 1);
        hc_params_reload();
        assert_int_equal(hc_params_agreed_digests(hc_params_get(), d, HC_PARAMS_AGREED_MAX), -1);
        unsetenv(vars[i]);
    }
    alarm(0);
    hc_params_reload();
    assert_true(hc_params_agreed_digests(hc_params_get(), d, HC_PARAMS_AGREED_MAX) > 0);
}

static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t          len = sizeof(sa);
    int                fd  = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Rank of 2 through hcomm_comm_init_env; rank 1 alone forces an algorithm.
 * Passes when init fails with an argument error and the log names it. */
static int mismatch_rank(int rank, int port, const char *log)
{
    char           v[64], line[512];
    hcomm_comm_t   comm = NULL;
    int            named = 0;
    FILE          *f;

    alarm(60); /* the old behaviour: a hang in the warm-up allreduce */
    snprintf(v, sizeof(v), "%d", rank);
    setenv("HCOMM_RANK", v, 1);
    setenv("HCOMM_NRANKS", "2", 1);
    snprintf(v, sizeof(v), "127.0.0.1:%d", port);
    setenv("HCOMM_ROOT", v, 1);
    setenv("HCOMM_COOKIE", "00112233445566778899aabbccddeeff", 1);
    setenv("HCOMM_TIMEOUT", "20", 1);
    setenv("HCOMM_LOG_FILE", log, 1);
    if (rank == 1)
        setenv("HCOMM_ALGO", "ring", 1);
    hc_params_reload();
    hcomm_status_t st = hcomm_comm_init_env(&comm);
    if (st == HCOMM_SUCCESS)
        hcomm_comm_destroy(comm);
    f = fopen(log, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        named |= strstr(line, "HCOMM_ALGO differs between rank 0 and rank 1") != NULL;
    if (f != NULL)
        fclose(f);
    if (st != HCOMM_ERR_INVALID_ARG || !named)
        fprintf(stderr, "  rank %d: init returned %s; the log %s HCOMM_ALGO\n", rank,
                hcomm_status_str(st), named ? "names" : "does not name");
    return st == HCOMM_ERR_INVALID_ARG && named ? 0 : 1;
}

static void test_init_mismatch(void **state)
{
    int   port = free_port(), bad = 0;
    pid_t pid[2];
    char  log[2][64];
    (void)state;

    for (int r = 0; r < 2; r++) {
        snprintf(log[r], sizeof(log[r]), "/tmp/hcomm-agree-%d-%d.log", (int)getpid(), r);
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0)
            _exit(mismatch_rank(r, port, log[r]));
    }
    for (int r = 0; r < 2; r++) {
        int status;
        assert_int_equal(waitpid(pid[r], &status, 0), pid[r]);
        bad += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        unlink(log[r]);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digests),
        cmocka_unit_test(test_endless_file),
        cmocka_unit_test(test_init_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
