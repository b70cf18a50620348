/* test_select.c - the selection pipeline: its stages in order (timing, forced,
 * tuned, calibrated or modelled, rule), and an algorithm the plans cannot
 * serve never chosen at any stage, nor built. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/algo.h"
#include "algorithms/select.h"
#include "base/log.h"
#include "base/params.h"

/* Plans on hosts of the given rank counts (ranks numbered host by host). */
static void plans_on_hosts(const int *per_host, int nhosts, hc_plans_t *p)
{
    hc_rank_topo_t rt[16];
    hc_cluster_t  *c = NULL;
    int            n = 0;
    memset(rt, 0, sizeof(rt));
    for (int h = 0; h < nhosts; h++)
        for (int k = 0; k < per_host[h]; k++, n++) {
            snprintf(rt[n].hostname, sizeof(rt[n].hostname), "host%d", h);
            rt[n].host_hash          = 1000 + (uint64_t)h;
            rt[n].nnics              = 1;
            rt[n].nics[0].speed_gbps = 1.25;
        }
    assert_int_equal(hc_cluster_build(rt, n, &c), HCOMM_SUCCESS);
    assert_int_equal(hc_plans_build(c, 1, p), HCOMM_SUCCESS);
}

/* Loads the tuning entries in text (the file HCOMM_TUNING_FILE names). */
static void tune(const char *text)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    assert_true(hc_tuning_parse(f, "test") >= 0);
    fclose(f);
}

static hc_choice_t pick(const hc_plans_t *p, int nranks, const hc_params_t *prm, hc_algo_t timing,
                        hc_coll_t coll, size_t bytes)
{
    hc_select_ctx_t sc = {.nranks = nranks, .plans = p, .params = prm, .timing = timing};
    hc_coll_args_t  a  = {.coll = coll, .count = bytes, .dtype = HCOMM_UINT8, .op = HCOMM_SUM};
    return hc_select(&sc, &a);
}

/* Each stage wins over the ones after it. */
static void test_stages_in_order(void **state)
{
    static const int two_nodes[] = {4, 4};
    hc_params_t      prm         = *hc_params_get();
    hc_plans_t       p;
    (void)state;
    prm.algo = "";
    plans_on_hosts(two_nodes, 2, &p);
    tune("allreduce 8 0 1024 ring 65536\n");

    hc_choice_t c = pick(&p, 8, &prm, HC_ALGO_RD, HC_COLL_ALLREDUCE, 512);
    assert_int_equal(c.algo, HC_ALGO_RD);
    assert_int_equal(c.by, HC_CHOSEN_TIMING);
    prm.algo = "allreduce:tree";
    c        = pick(&p, 8, &prm, HC_ALGO_AUTO, HC_COLL_ALLREDUCE, 512);
    assert_int_equal(c.algo, HC_ALGO_TREE);
    assert_int_equal(c.by, HC_CHOSEN_FORCED);
    prm.algo = "";
    c        = pick(&p, 8, &prm, HC_ALGO_AUTO, HC_COLL_ALLREDUCE, 512);
    assert_int_equal(c.algo, HC_ALGO_RING);
    assert_int_equal(c.by, HC_CHOSEN_TUNED);
    assert_int_equal(c.chunk, 65536);
    /* above the tuned range: the cost model across nodes */
    c = pick(&p, 8, &prm, HC_ALGO_AUTO, HC_COLL_ALLREDUCE, 4096);
    assert_int_equal(c.by, HC_CHOSEN_MODELLED);
    assert_true(hc_algo_serves(HC_COLL_ALLREDUCE, c.algo, &p));
    p.cluster->step_us = 20; /* what calibration measures */
    assert_int_equal(pick(&p, 8, &prm, HC_ALGO_AUTO, HC_COLL_ALLREDUCE, 4096).by,
                     HC_CHOSEN_CALIBRATED);
    /* the model prices no broadcast: its one algorithm by rule */
    c = pick(&p, 8, &prm, HC_ALGO_AUTO, HC_COLL_BROADCAST, 4096);
    assert_int_equal(c.algo, HC_ALGO_CHAIN);
    assert_int_equal(c.by, HC_CHOSEN_RULE);
    tune("");
    hc_plans_free(&p);
}

/* Nodes of 3 and 1 ranks: the hierarchical alltoall cannot run there, so it
 * is passed over whoever names it, and refused if built anyway. */
static void test_unservable_never_chosen(void **state)
{
    static const int uneven[] = {3, 1};
    hc_params_t      prm      = *hc_params_get();
    hc_plans_t       p;
    hc_sched_t      *s = NULL;
    (void)state;
    plans_on_hosts(uneven, 2, &p);
    assert_true(hc_algo_implements(HC_COLL_ALLTOALL, HC_ALGO_HIER));
    assert_false(hc_algo_serves(HC_COLL_ALLTOALL, HC_ALGO_HIER, &p));

    prm.algo = "alltoall:hier";
    for (size_t bytes = 8; bytes <= ((size_t)1 << 22); bytes *= 8)
        assert_int_equal(pick(&p, 4, &prm, HC_ALGO_AUTO, HC_COLL_ALLTOALL, bytes).algo,
                         HC_ALGO_PAIRWISE);
    prm.algo = "";
    tune("alltoall 4 0 18446744073709551615 hier 0\n");
    assert_int_equal(pick(&p, 4, &prm, HC_ALGO_AUTO, HC_COLL_ALLTOALL, 64).algo,
                     HC_ALGO_PAIRWISE);
    assert_int_equal(pick(&p, 4, &prm, HC_ALGO_HIER, HC_COLL_ALLTOALL, 64).algo,
                     HC_ALGO_PAIRWISE);
    tune("");
    hc_coll_args_t a = {.coll = HC_COLL_ALLTOALL, .count = 8, .dtype = HCOMM_UINT8};
    assert_int_equal(hc_algo_build(&a, HC_ALGO_HIER, &p, 4, 0, 0, &s), HCOMM_ERR_UNSUPPORTED);
    assert_null(s);
    hc_plans_free(&p);
}

/* Without plans (a bare schedule build): the algorithms that follow plans are
 * never chosen, and building one says what it lacks. */
static void test_without_plans(void **state)
{
    hc_params_t    prm = *hc_params_get();
    hc_sched_t    *s   = NULL;
    hc_coll_args_t a   = {.coll = HC_COLL_ALLREDUCE, .count = 16, .dtype = HCOMM_FLOAT32};
    (void)state;
    prm.algo = "tree,leader";
    hc_choice_t c = pick(NULL, 4, &prm, HC_ALGO_AUTO, HC_COLL_ALLREDUCE, 64);
    assert_int_equal(c.algo, HC_ALGO_RD);
    assert_int_equal(c.by, HC_CHOSEN_RULE);
    assert_false(hc_algo_serves(HC_COLL_ALLREDUCE, HC_ALGO_TREE, NULL));
    assert_true(hc_algo_serves(HC_COLL_ALLREDUCE, HC_ALGO_RING, NULL));
    assert_int_equal(hc_algo_build(&a, HC_ALGO_LEADER, NULL, 4, 0, 0, &s), HCOMM_ERR_UNSUPPORTED);
    assert_null(s);
    assert_int_equal(hc_algo_build(&a, HC_ALGO_RING, NULL, 4, 0, 0, &s), HCOMM_SUCCESS);
    hc_sched_destroy(s);
}

/* The table: every collective has an algorithm; the cost model prices the
 * allreduce and alltoall ones; a tuning line must name one of its collective's. */
static void test_table(void **state)
{
    (void)state;
    for (int c = 0; c < HC_COLL_COUNT; c++) {
        int n = 0;
        for (int a = 1; a < HC_ALGO_COUNT; a++)
            n += hc_algo_implements((hc_coll_t)c, (hc_algo_t)a);
        assert_true(n >= 1);
        const char *name = hc_coll_name((hc_coll_t)c);
        assert_int_equal(hc_coll_parse_n(name, strlen(name)), c);
    }
    assert_int_equal(hc_algo_cost(HC_COLL_ALLREDUCE, HC_ALGO_LEADER), HC_COST_LEADER);
    assert_int_equal(hc_algo_cost(HC_COLL_ALLTOALL, HC_ALGO_HIER), HC_COST_A2A_HIER);
    assert_int_equal(hc_algo_cost(HC_COLL_BROADCAST, HC_ALGO_TREE), HC_COST_NONE);
    static const char bad[] = "allreduce 4 0 64 chain 0\n";
    FILE *f = fmemopen((void *)bad, strlen(bad), "r");
    assert_int_equal(hc_tuning_parse(f, "test"), -1);
    fclose(f);
    assert_string_equal(hc_chosen_by_name(HC_CHOSEN_CALIBRATED), "calibrated");
}

static int tune_bytes(const char *text, size_t len)
{
    FILE *f = fmemopen((void *)text, len, "r");
    assert_non_null(f);
    int n = hc_tuning_parse(f, "test");
    fclose(f);
    return n;
}

/* A tuning entry's chunk: bytes, 0 (HCOMM_CHUNK_BYTES's) or "none" (not
 * pipelined: chunk 0 downstream, as HCOMM_CHUNK_BYTES=0); anything else
 * refuses the file. */
static void test_tuning_chunks(void **state)
{
    static const int two_nodes[] = {4, 4};
    hc_params_t      prm         = *hc_params_get();
    hc_plans_t       p;
    (void)state;
    prm.algo        = "";
    prm.chunk_bytes = 1 << 20;
    plans_on_hosts(two_nodes, 2, &p);
    tune("allreduce 8 0 99 ring none\n"
         "allreduce 8 100 199 ring 0\n"
         "allreduce 8 200 299 ring 4096\n");
    assert_int_equal(pick(&p, 8, &prm, HC_ALGO_AUTO, HC_COLL_ALLREDUCE, 50).chunk, 0);
    assert_int_equal(pick(&p, 8, &prm, HC_ALGO_AUTO, HC_COLL_ALLREDUCE, 150).chunk, 1 << 20);
    assert_int_equal(pick(&p, 8, &prm, HC_ALGO_AUTO, HC_COLL_ALLREDUCE, 250).chunk, 4096);
    static const char *const bad[] = {"-1", "12x", "None", "18446744073709551615", "0x100"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char line[64];
        snprintf(line, sizeof(line), "allreduce 8 0 99 ring %s\n", bad[i]);
        assert_int_equal(tune_bytes(line, strlen(line)), -1);
    }
    tune("");
    hc_plans_free(&p);
}

/* Lines the tuning file refuses whole: one past 255 characters (its tail was
 * read as a line of its own, so a long comment could end in an entry), a NUL
 * byte (the rest of its line went unseen), more than 1 MiB, and /dev/zero
 * (no line end, ever: the loader went round for ever). */
static void test_tuning_bad_lines(void **state)
{
    static const char entry[] = "allreduce 2 0 10 ring 0\n";
    char             *text    = malloc((1 << 20) + 2);
    (void)state;
    assert_non_null(text);

    memset(text, 'x', 300);
    text[0] = '#';
    memcpy(text + 300 - (sizeof(entry) - 1), entry, sizeof(entry));
    assert_int_equal(tune_bytes(text, 300), -1); /* a comment: its tail an entry */
    memset(text, 'x', 255);
    text[0]   = '#';
    text[255] = '\n';
    memcpy(text + 256, entry, sizeof(entry));
    assert_int_equal(tune_bytes(text, strlen(text)), 1); /* 255 characters: a line */
    text[255] = 'x';
    text[256] = '\n';
    assert_int_equal(tune_bytes(text, strlen(text)), -1);

    static const char nul[] = "allreduce 2 0 10 ring 0\0 # and more\n";
    assert_int_equal(tune_bytes(nul, sizeof(nul) - 1), -1);

    memset(text, '\n', (1 << 20) + 1);
    assert_int_equal(tune_bytes(text, 1 << 20), 0);
    assert_int_equal(tune_bytes(text, (1 << 20) + 1), -1);
    free(text);

    alarm(20); /* the old loader never returned */
    FILE *f = fopen("/dev/zero", "r");
    assert_non_null(f);
    assert_int_equal(hc_tuning_parse(f, "/dev/zero"), -1);
    fclose(f);
    alarm(0);
}

/* Ranks compare the digest of the table lookups use, which the process read
 * once: another table, another digest; the file rewritten afterwards, the
 * same (the old digest of the file as it is now let ranks that read it at
 * different times agree while selecting differently). */
static void test_tuning_digest(void **state)
{
    char path[64];
    (void)state;
    snprintf(path, sizeof(path), "/tmp/hc_test_tuning_%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("allreduce 2 0 1000 ring 0\n", f);
    fclose(f);
    setenv("HCOMM_TUNING_FILE", path, 1);
    hc_params_reload();
    uint64_t loaded = hc_tuning_digest(); /* the file read, unless an earlier lookup read none */
    f               = fopen(path, "w");
    assert_non_null(f);
    fputs("allreduce 2 0 1000 rd 0\n", f);
    fclose(f);
    assert_true(hc_tuning_digest() == loaded);
    tune("allreduce 2 0 1000 ring 0\n");
    uint64_t ring = hc_tuning_digest();
    tune("allreduce 2 0 1000 rd 0\n");
    assert_true(hc_tuning_digest() != ring);
    tune("allreduce 2 0 1000 ring 0\n");
    assert_true(hc_tuning_digest() == ring);
    tune("allreduce 2 0 1000 ring 4096\n");
    assert_true(hc_tuning_digest() != ring);
    unlink(path);
    unsetenv("HCOMM_TUNING_FILE");
    hc_params_reload();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stages_in_order),  cmocka_unit_test(test_unservable_never_chosen),
        cmocka_unit_test(test_without_plans),    cmocka_unit_test(test_table),
        cmocka_unit_test(test_tuning_bad_lines), cmocka_unit_test(test_tuning_digest),
        cmocka_unit_test(test_tuning_chunks),
    };
    (void)hc_params_get();
    if (getenv("HCOMM_LOG_LEVEL") == NULL)
        hc_log_level_g = HC_LOG_NONE; /* the passed-over choices log by design */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
