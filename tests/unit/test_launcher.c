/* test_launcher.c - hcomm_comm_init_env's launcher detection with each
 * launcher's variables set by hand (rank and size never from two launchers),
 * Slurm's hostlist and port, and the PMI-1 client against a scripted server
 * on a socketpair: an id shared, a failed root, garbage, silence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/launcher.h"

static const char *const all_vars[] = {"HCOMM_RANK",
                                       "HCOMM_NRANKS",
                                       "PMIX_RANK",
                                       "PMIX_NAMESPACE",
                                       "PMI_RANK",
                                       "PMI_SIZE",
                                       "PMI_FD",
                                       "SLURM_PROCID",
                                       "SLURM_NTASKS",
                                       "SLURM_LOCALID",
                                       "SLURM_STEP_ID",
                                       "SLURM_JOB_ID",
                                       "SLURM_JOBID",
                                       "SLURM_STEP_NODELIST",
                                       "SLURM_JOB_NODELIST",
                                       "RANK",
                                       "WORLD_SIZE",
                                       "LOCAL_RANK",
                                       "MASTER_ADDR",
                                       "MASTER_PORT",
                                       "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "MPI_LOCALRANKID",
                                       NULL};

static int clear_env(void **state)
{
    (void)state;
    for (const char *const *v = all_vars; *v != NULL; v++)
        unsetenv(*v);
    return 0;
}

/* Sets NAME=VALUE pairs, NULL-terminated. */
static void set(const char *name, ...)
{
    va_list ap;
    va_start(ap, name);
    for (const char *n = name; n != NULL; n = va_arg(ap, const char *))
        setenv(n, va_arg(ap, const char *), 1);
    va_end(ap);
}

static void test_hostlist(void **state)
{
    static const char *const cases[][2] = {
        {"node[07-09,12],gpu1", "node07"},
        {"gpu1,node[07-09]", "gpu1"},
        {"n[3]", "n3"},
        {"rack[1-2]-node[01-04]", "rack1-node01"},
        {"node[012,3]", "node012"},
        {"localhost", "localhost"},
        {"node[", NULL},
        {"node[a-b]", NULL},
        {"node[07-09", NULL},
        {"node]", NULL},
        {"", NULL},
        {",node1", NULL},
    };
    char out[64], tiny[4];
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = hc_launch_hostlist_first(cases[i][0], out, sizeof(out));
        if (cases[i][1] == NULL) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_string_equal(out, cases[i][1]);
        }
    }
    assert_int_equal(hc_launch_hostlist_first("node[07]", tiny, sizeof(tiny)), -1);
    assert_int_equal(hc_launch_hostlist_first(NULL, out, sizeof(out)), -1);
}

static void test_slurm_port(void **state)
{
    (void)state;
    assert_int_equal(hc_launch_slurm_port(0, 0), HC_LAUNCH_SLURM_PORT_BASE);
    assert_int_equal(hc_launch_slurm_port(1, 2), HC_LAUNCH_SLURM_PORT_BASE + 8319);
    /* 100 neighbouring jobs of up to 98 steps: no two share a port (a stride
     * of 64 gave jobs 625 apart the same ports) */
    static unsigned char seen[HC_LAUNCH_SLURM_PORT_SPAN];
    for (unsigned long j = 4700; j < 4800; j++)
        for (unsigned long s = 0; s < 98; s++) {
            int p = hc_launch_slurm_port(j, s) - HC_LAUNCH_SLURM_PORT_BASE;
            assert_int_equal(seen[p], 0);
            seen[p] = 1;
        }
    assert_int_not_equal(hc_launch_slurm_port(100, 0), hc_launch_slurm_port(725, 0));
    assert_int_not_equal(hc_launch_slurm_port(1234, 0), hc_launch_slurm_port(1234, 1));
    assert_int_not_equal(hc_launch_slurm_port(1234, 0), hc_launch_slurm_port(1235, 0));
    for (unsigned long j = 0; j < 100000; j += 997) {
        int p = hc_launch_slurm_port(j, j % 7);
        assert_true(p >= HC_LAUNCH_SLURM_PORT_BASE &&
                    p < HC_LAUNCH_SLURM_PORT_BASE + HC_LAUNCH_SLURM_PORT_SPAN);
    }
}

static void test_hcomm_run(void **state)
{
    hc_launch_t l;
    (void)state;
    /* its variables win over any other launcher's */
    set("HCOMM_RANK", "2", "RANK", "0", "WORLD_SIZE", "8", "MASTER_ADDR", "h", "MASTER_PORT", "1",
        NULL);
    assert_int_equal(hc_launch_detect(2, 4, &l), HCOMM_SUCCESS);
    assert_int_equal(l.kind, HC_LAUNCH_HCOMM);
    assert_int_equal(l.rank, 2);
    assert_int_equal(l.nranks, 4);
    assert_int_equal(l.kvs, 0);
    assert_string_equal(l.root, "");
    assert_int_equal(hc_launch_detect(4, 4, &l), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_launch_detect(-1, 4, &l), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_launch_detect(0, HC_BOOTSTRAP_MAX_RANKS + 1, &l), HCOMM_ERR_INVALID_ARG);
}

/* Detects the launch from the environment and checks what it found. */
static void expect_launch(hc_launch_t *l, hc_launch_kind_t kind, int rank, int nranks,
                          int local_rank, int kvs)
{
    assert_int_equal(hc_launch_detect(-1, -1, l), HCOMM_SUCCESS);
    assert_int_equal(l->kind, kind);
    assert_int_equal(l->rank, rank);
    assert_int_equal(l->nranks, nranks);
    assert_int_equal(l->local_rank, local_rank);
    assert_int_equal(l->kvs, kvs);
}

static void test_torchrun(void **state)
{
    hc_launch_t l;
    (void)state;
    set("RANK", "1", "WORLD_SIZE", "3", "LOCAL_RANK", "1", "MASTER_ADDR", "10.1.2.3", "MASTER_PORT",
        "29500", NULL);
    expect_launch(&l, HC_LAUNCH_TORCHRUN, 1, 3, 1, 0);
    assert_string_equal(l.root, "10.1.2.3:29501"); /* the agent's store holds 29500 */
    set("MASTER_ADDR", "fd00::1", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_string_equal(l.root, "[fd00::1]:29501");
    set("MASTER_PORT", "65535", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_string_equal(l.root, ""); /* no port above it: HCOMM_ROOT must say */
    set("MASTER_PORT", "29500", "RANK", "3", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_ARG);
    set("RANK", "1", "WORLD_SIZE", "4194305", NULL); /* more than the root takes */
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_ARG);
    set("WORLD_SIZE", "3", NULL);
    set("RANK", "1x", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_ARG);
    unsetenv("MASTER_ADDR"); /* RANK and WORLD_SIZE alone are no torchrun */
    set("RANK", "1", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_USAGE);
}

static void test_slurm(void **state)
{
    hc_launch_t l;
    char        want[64];
    (void)state;
    set("SLURM_PROCID", "4", "SLURM_NTASKS", "6", "SLURM_LOCALID", "0", "SLURM_STEP_ID", "2",
        "SLURM_JOB_ID", "4711", "SLURM_STEP_NODELIST", "gpu[002-003]", "SLURM_JOB_NODELIST",
        "gpu[001-004]", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_int_equal(l.kind, HC_LAUNCH_SLURM);
    assert_int_equal(l.rank, 4);
    assert_int_equal(l.nranks, 6);
    assert_int_equal(l.local_rank, 0);
    assert_int_equal(l.kvs, 0);
    snprintf(want, sizeof(want), "gpu002:%d", hc_launch_slurm_port(4711, 2));
    assert_string_equal(l.root, want);
    unsetenv("SLURM_STEP_NODELIST"); /* the job's list stands in */
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    snprintf(want, sizeof(want), "gpu001:%d", hc_launch_slurm_port(4711, 2));
    assert_string_equal(l.root, want);
    set("SLURM_JOB_NODELIST", "gpu[", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_string_equal(l.root, "");
    /* a batch script's shell (step 4294967291) is no task of srun */
    set("SLURM_STEP_ID", "4294967291", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_USAGE);
    /* srun --mpi=pmi2 inside: PMI-1 comes first */
    set("SLURM_STEP_ID", "0", "PMI_RANK", "1", "PMI_SIZE", "2", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_int_equal(l.kind, HC_LAUNCH_PMI);
}

static void test_pmi_vars(void **state)
{
    hc_launch_t l;
    int         sv[2];
    char        fd[16];
    (void)state;
    set("PMI_RANK", "2", "PMI_SIZE", "3", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_int_equal(l.kind, HC_LAUNCH_PMI);
    assert_int_equal(l.rank, 2);
    assert_int_equal(l.nranks, 3);
    assert_int_equal(l.kvs, 0); /* no PMI_FD */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    snprintf(fd, sizeof(fd), "%d", sv[0]);
    set("PMI_FD", fd, NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_int_equal(l.kvs, 1);
    assert_int_equal(l.pmi_fd, sv[0]);
    close(sv[0]);
    close(sv[1]);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_int_equal(l.kvs, 0); /* a closed PMI_FD */
    set("PMI_SIZE", "0", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_ARG);
}

/* The mispairing of old: PMIx's rank with PMI-1's size is no launcher. */
static void test_mispaired(void **state)
{
    hc_launch_t l;
    (void)state;
    set("PMIX_RANK", "1", "PMI_SIZE", "3", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_USAGE);
    set("SLURM_PROCID", "1", "WORLD_SIZE", "3", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_USAGE);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_USAGE);
}

/* PMIx's variables with no server to ask (or no libpmix): Open MPI's own pair
 * gives rank and size, and the root must be set; without it, no size. */
static void test_pmix_no_server(void **state)
{
    hc_launch_t l;
    (void)state;
    unsetenv("PMIX_SERVER_URI4"), unsetenv("PMIX_SERVER_URI41");
    unsetenv("PMIX_SERVER_URI3"), unsetenv("PMIX_SERVER_URI2"), unsetenv("PMIX_SERVER_URI21");
    set("PMIX_RANK", "1", "PMIX_NAMESPACE", "no-such-job", "PMI_SIZE", "9", "OMPI_COMM_WORLD_RANK",
        "1", "OMPI_COMM_WORLD_SIZE", "2", NULL);
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_SUCCESS);
    assert_int_equal(l.kind, HC_LAUNCH_PMIX);
    assert_int_equal(l.kvs, 0);
    assert_int_equal(l.rank, 1);
    assert_int_equal(l.nranks, 2); /* not PMI_SIZE */
    assert_string_equal(l.root, "");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    assert_int_equal(hc_launch_detect(-1, -1, &l), HCOMM_ERR_INVALID_USAGE);
    /* srun --mpi=pmix: Slurm's variables give rank, size and root */
    set("SLURM_PROCID", "3", "SLURM_NTASKS", "4", "SLURM_LOCALID", "1", "SLURM_STEP_ID", "0",
        "SLURM_JOB_ID", "77", "SLURM_STEP_NODELIST", "node[7-8]", NULL);
    expect_launch(&l, HC_LAUNCH_SLURM, 3, 4, 1, 0);
    assert_true(strncmp(l.root, "node7:", 6) == 0);
}

/* ---- PMI-1 against a scripted server ---- */

static int         srv_fd = -1;
static const char *srv_value;  /* what get answers: value=<srv_value> */
static int         srv_silent; /* 1: no answer to barrier_in */
static char        srv_put[1024];

static void *server(void *arg)
{
    char line[1024], reply[1200];
    (void)arg;
    for (;;) {
        size_t n = 0;
        char   c;
        while (read(srv_fd, &c, 1) == 1 && c != '\n' && n + 1 < sizeof(line))
            line[n++] = c;
        if (n == 0)
            return NULL;
        line[n] = '\0';
        if (strncmp(line, "cmd=init ", 9) == 0)
            snprintf(reply, sizeof(reply), "cmd=response_to_init pmi_version=1 rc=0\n");
        else if (strcmp(line, "cmd=get_maxes") == 0)
            snprintf(reply, sizeof(reply),
                     "cmd=maxes kvsname_max=256 keylen_max=64 "
                     "vallen_max=1024\n");
        else if (strcmp(line, "cmd=get_my_kvsname") == 0)
            snprintf(reply, sizeof(reply), "cmd=my_kvsname kvsname=kvs_7_0\n");
        else if (strncmp(line, "cmd=put kvsname=kvs_7_0 ", 24) == 0) {
            snprintf(srv_put, sizeof(srv_put), "%s", line + 24);
            snprintf(reply, sizeof(reply), "cmd=put_result rc=0 msg=success\n");
        } else if (strcmp(line, "cmd=barrier_in") == 0 && srv_silent)
            continue;
        else if (strcmp(line, "cmd=barrier_in") == 0)
            snprintf(reply, sizeof(reply), "cmd=barrier_out\n");
        else if (strncmp(line, "cmd=get kvsname=kvs_7_0 key=", 28) == 0)
            snprintf(reply, sizeof(reply), "cmd=get_result rc=0 msg=success value=%s\n", srv_value);
        else
            snprintf(reply, sizeof(reply), "cmd=unknown rc=-1\n");
        if (write(srv_fd, reply, strlen(reply)) < 0)
            return NULL;
    }
}

static void test_pmi_share(void **state)
{
    hc_launch_t l = {.kind = HC_LAUNCH_PMI, .name = "PMI-1", .rank = 1, .nranks = 2, .kvs = 1};
    hcomm_unique_id_t id, got;
    char              hex[2 * sizeof(id) + 1];
    int               sv[2];
    pthread_t         t;
    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    srv_fd   = sv[1];
    l.pmi_fd = sv[0];
    assert_int_equal(pthread_create(&t, NULL, server, NULL), 0);

    /* rank 1 gets rank 0's id */
    assert_int_equal(
        hc_bootstrap_id_from_addr("127.0.0.1:9", (const uint8_t *)"0123456789abcdef", &id),
        HCOMM_SUCCESS);
    for (size_t i = 0; i < sizeof(id); i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id.internal[i]);
    srv_value = hex;
    assert_int_equal(hc_launch_share_id(&l, NULL, 5, &got), HCOMM_SUCCESS);
    assert_memory_equal(&got, &id, sizeof(id));
    srv_value = "failed"; /* rank 0 could not start its root */
    assert_int_equal(hc_launch_share_id(&l, NULL, 5, &got), HCOMM_ERR_REMOTE);
    srv_value = "00zz";
    assert_int_equal(hc_launch_share_id(&l, NULL, 5, &got), HCOMM_ERR_PROTOCOL);

    /* rank 0 starts a root and puts its id */
    l.rank = 0;
    assert_int_equal(hc_launch_share_id(&l, "127.0.0.1:0", 5, &got), HCOMM_SUCCESS);
    assert_non_null(strstr(srv_put, "key=hcomm-uid-3 value="));
    assert_int_equal(strlen(strstr(srv_put, "value=") + 6), 2 * sizeof(id));

    /* a server that never answers: the bound holds, and the link is given up */
    srv_silent = 1;
    l.rank     = 1;
    double t0  = hc_clock_now();
    assert_int_equal(hc_launch_share_id(&l, NULL, 0.5, &got), HCOMM_ERR_TIMEOUT);
    assert_true(hc_clock_now() - t0 < 3);
    assert_int_equal(hc_launch_share_id(&l, NULL, 0.5, &got), HCOMM_ERR_INVALID_USAGE);
    close(sv[0]);
    pthread_join(t, NULL);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostlist),
        cmocka_unit_test(test_slurm_port),
        cmocka_unit_test_setup(test_hcomm_run, clear_env),
        cmocka_unit_test_setup(test_torchrun, clear_env),
        cmocka_unit_test_setup(test_slurm, clear_env),
        cmocka_unit_test_setup(test_pmi_vars, clear_env),
        cmocka_unit_test_setup(test_mispaired, clear_env),
        cmocka_unit_test_setup(test_pmix_no_server, clear_env),
        cmocka_unit_test_setup(test_pmi_share, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
