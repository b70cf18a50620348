/* test_topo.c - discovery, the cluster model, and topology files (round trip,
 * virtual nodes, malformed input). */
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

#include "base/log.h"
#include "base/params.h"
#include "topology/topo.h"

static void test_discover(void **state)
{
    hc_rank_topo_t t;
    (void)state;
    int            owner = -1;
    memset(&t, 0xa5, sizeof(t));
    assert_int_equal(hc_topo_discover(&t, NULL, 0.0, &owner), HCOMM_SUCCESS);
    assert_int_equal(owner, 0);
    assert_true(t.hostname[0] != '\0');
    char host[HC_TOPO_NAME_MAX];
    assert_true(t.host_hash == hc_topo_host_identity(host, sizeof(host))); /* what comm.c shares */
    assert_string_equal(host, t.hostname);
    assert_true(t.ncpus >= 1);
    assert_true(t.nnuma >= 1);
    assert_true(t.numa == -1 || (t.numa >= 0 && t.numa < 4096));
    assert_true(t.cpuset[0] != '\0');
    assert_true(t.nnics >= 0 && t.nnics <= HC_TOPO_MAX_NICS);
    for (int i = 0; i < t.nnics; i++) {
        assert_true(t.nics[i].name[0] != '\0');
        assert_true(strcmp(t.nics[i].name, "lo") != 0);
        assert_true(t.nics[i].speed_gbps >= 0.0);
        assert_true(t.nics[i].numa >= -1);
    }
    assert_true(t.ngpus >= 0 && t.ngpus <= HC_TOPO_MAX_GPUS);
    print_message("host %s numa %d/%d cpus %d (%s) nics %d gpus %d\n", t.hostname, t.numa, t.nnuma,
                  t.ncpus, t.cpuset, t.nnics, t.ngpus);
}

/* Structural invariants every model must satisfy. */
static void check_model(const hc_cluster_t *c)
{
    assert_int_equal(c->node_first[0], 0);
    assert_int_equal(c->node_first[c->nnodes], c->nranks);
    int *seen = calloc((size_t)c->nranks, sizeof(int));
    assert_non_null(seen);
    int lowest_prev = -1;
    for (int n = 0; n < c->nnodes; n++) {
        assert_true(c->node_first[n + 1] > c->node_first[n]);
        /* nodes numbered by lowest rank; ranks in rank order inside */
        assert_true(c->node_ranks[c->node_first[n]] > lowest_prev);
        lowest_prev = c->node_ranks[c->node_first[n]];
        for (int i = c->node_first[n]; i < c->node_first[n + 1]; i++) {
            int r = c->node_ranks[i];
            assert_int_equal(c->node_of[r], n);
            assert_int_equal(c->local_rank[r], i - c->node_first[n]);
            if (i > c->node_first[n])
                assert_true(r > c->node_ranks[i - 1]);
            seen[r]++;
        }
    }
    for (int r = 0; r < c->nranks; r++)
        assert_int_equal(seen[r], 1);
    free(seen);
}

static void test_build(void **state)
{
    /* hosts A, B, C with 2, 1, 3 ranks: rank order A B C A C C */
    static const int host_of[6] = {0, 1, 2, 0, 2, 2};
    hc_rank_topo_t   rt[6];
    hc_cluster_t    *c = NULL;
    (void)state;
    memset(rt, 0, sizeof(rt));
    for (int r = 0; r < 6; r++) {
        snprintf(rt[r].hostname, sizeof(rt[r].hostname), "host%d", host_of[r]);
        rt[r].host_hash          = 1000 + 7 * (uint64_t)host_of[r];
        rt[r].numa               = r == 5 ? 1 : 0;
        rt[r].nnics              = host_of[r] == 2 ? 2 : 1;
        rt[r].nics[0].speed_gbps = host_of[r] == 1 ? 3.125 : 12.5;
    }
    assert_int_equal(hc_cluster_build(rt, 6, &c), HCOMM_SUCCESS);
    check_model(c);
    assert_int_equal(c->nnodes, 3);
    static const int node_of[6] = {0, 1, 2, 0, 2, 2}, local[6] = {0, 0, 0, 1, 1, 2};
    static const int first[4] = {0, 2, 3, 6}, nranks[6] = {0, 3, 1, 2, 4, 5};
    static const int rail[6] = {0, 0, 0, 0, 1, 0};
    for (int r = 0; r < 6; r++) {
        assert_int_equal(c->node_of[r], node_of[r]);
        assert_int_equal(c->local_rank[r], local[r]);
        assert_int_equal(c->node_ranks[r], nranks[r]);
        assert_int_equal(c->rail_of[r], rail[r]);
        assert_int_equal(c->numa_of[r], r == 5 ? 1 : 0);
    }
    for (int n = 0; n < 4; n++)
        assert_int_equal(c->node_first[n], first[n]);
    assert_int_equal(hc_cluster_link(c, 2, 2), HC_LINK_SELF);
    assert_int_equal(hc_cluster_link(c, 0, 3), HC_LINK_SAME_NUMA);
    assert_int_equal(hc_cluster_link(c, 2, 4), HC_LINK_SAME_NUMA);
    assert_int_equal(hc_cluster_link(c, 4, 5), HC_LINK_CROSS_NUMA);
    assert_int_equal(hc_cluster_link(c, 0, 1), HC_LINK_CROSS_NODE);
    assert_int_equal(hc_cluster_link(c, 3, 5), HC_LINK_CROSS_NODE);
    assert_true(c->link[HC_LINK_CROSS_NODE].bw_gbps == 3.125);
    assert_true(c->link[HC_LINK_SAME_NUMA].bw_gbps > c->link[HC_LINK_CROSS_NODE].bw_gbps);
    assert_true(c->reduce_gbps > 0.0);
    assert_non_null(c->ranks);
    assert_string_equal(c->ranks[4].hostname, "host2");
    hc_cluster_destroy(c);

    /* unknown NIC speeds: the 10 Gbit/s default */
    for (int r = 0; r < 6; r++)
        rt[r].nnics = 0;
    assert_int_equal(hc_cluster_build(rt, 6, &c), HCOMM_SUCCESS);
    assert_true(c->link[HC_LINK_CROSS_NODE].bw_gbps == 1.25);
    hc_cluster_destroy(c);
    assert_int_equal(hc_cluster_build(rt, 0, &c), HCOMM_ERR_INVALID_ARG);
    hc_cluster_destroy(NULL);
}

static void test_synthetic(void **state)
{
    hc_cluster_t *c = NULL;
    (void)state;
    for (int rr = 0; rr < 2; rr++) {
        clock_t t0 = clock();
        assert_int_equal(hc_cluster_synthetic(1024, 8, 4, rr, &c), HCOMM_SUCCESS);
        assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 1.0);
        assert_int_equal(c->nranks, 8192);
        assert_int_equal(c->nnodes, 1024);
        assert_null(c->ranks);
        check_model(c);
        for (int r = 0; r < c->nranks; r++) {
            assert_int_equal(c->node_of[r], rr ? r % 1024 : r / 8);
            assert_int_equal(c->local_rank[r], rr ? r / 1024 : r % 8);
            assert_int_equal(c->rail_of[r], c->local_rank[r] % 4);
        }
        assert_int_equal(hc_cluster_link(c, 0, 1), rr ? HC_LINK_CROSS_NODE : HC_LINK_SAME_NUMA);
        assert_int_equal(hc_cluster_link(c, 0, 1024), rr ? HC_LINK_SAME_NUMA : HC_LINK_CROSS_NODE);
        hc_cluster_destroy(c);
    }
    assert_int_equal(hc_cluster_synthetic(0, 8, 4, 0, &c), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_cluster_synthetic(4, 8, 0, 0, &c), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_cluster_synthetic(1 << 20, 1 << 20, 1, 0, &c), HCOMM_ERR_INVALID_ARG);
}

static char tmp_path[64];

static const char *write_tmp(const char *text, size_t len)
{
    snprintf(tmp_path, sizeof(tmp_path), "/tmp/hc_test_topo_%d.xml", (int)getpid());
    FILE *f = fopen(tmp_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return tmp_path;
}

static void assert_same_model(const hc_cluster_t *a, const hc_cluster_t *b)
{
    assert_int_equal(a->nranks, b->nranks);
    assert_int_equal(a->nnodes, b->nnodes);
    size_t n = (size_t)a->nranks * sizeof(int);
    assert_memory_equal(a->node_of, b->node_of, n);
    assert_memory_equal(a->local_rank, b->local_rank, n);
    assert_memory_equal(a->numa_of, b->numa_of, n);
    assert_memory_equal(a->rail_of, b->rail_of, n);
    assert_memory_equal(a->node_ranks, b->node_ranks, n);
    assert_memory_equal(a->node_first, b->node_first, ((size_t)a->nnodes + 1) * sizeof(int));
    for (int k = 0; k < HC_LINK_CLASS_COUNT; k++) {
        assert_true(a->link[k].alpha_us == b->link[k].alpha_us);
        assert_true(a->link[k].bw_gbps == b->link[k].bw_gbps);
    }
    assert_true(a->reduce_gbps == b->reduce_gbps);
}

static void round_trip(hc_cluster_t *c)
{
    char         *text = NULL;
    size_t        len  = 0;
    FILE         *f    = open_memstream(&text, &len);
    hc_cluster_t *d    = NULL;
    assert_non_null(f);
    assert_int_equal(hc_cluster_dump(c, f), HCOMM_SUCCESS);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(hc_cluster_load(write_tmp(text, len), c->nranks, &d), HCOMM_SUCCESS);
    assert_same_model(c, d);
    assert_null(d->ranks);
    hc_cluster_destroy(d);
    assert_int_equal(hc_cluster_load(tmp_path, c->nranks + 1, &d), HCOMM_ERR_INVALID_ARG);
    if (c->nranks > 1)
        assert_int_equal(hc_cluster_load(tmp_path, c->nranks - 1, &d), HCOMM_ERR_INVALID_ARG);
    free(text);
}

static void test_round_trip(void **state)
{
    hc_rank_topo_t rt[5];
    hc_cluster_t  *c = NULL;
    (void)state;
    memset(rt, 0, sizeof(rt));
    for (int r = 0; r < 5; r++) {
        snprintf(rt[r].hostname, sizeof(rt[r].hostname), "h<%d>&\"", r % 2);
        rt[r].host_hash          = (uint64_t)(r % 2);
        rt[r].numa               = r == 4 ? -1 : r / 2;
        rt[r].nnics              = 2;
        rt[r].nics[0].speed_gbps = 1.0 / 3.0;
    }
    assert_int_equal(hc_cluster_build(rt, 5, &c), HCOMM_SUCCESS);
    c->link[HC_LINK_CROSS_NUMA].alpha_us = 0.1 + 0.2;
    c->reduce_gbps                       = 1e-3;
    round_trip(c);
    hc_cluster_destroy(c);
    assert_int_equal(hc_cluster_synthetic(64, 8, 4, 1, &c), HCOMM_SUCCESS);
    round_trip(c);
    hc_cluster_destroy(c);
}

static void test_virtual_nodes(void **state)
{
    static const char text[] =
        "<?xml version=\"1.0\"?>\n<!-- one host, two virtual nodes -->\n"
        "<hcomm_topology version='1'>\n"
        "  <link bw_gbps=\"0.125\"   class=\"cross_node\" alpha_us=\"50\" />\n"
        "  <node host=\"vm\" id=\"7\">\n"
        "    <rank id=\"3\"/> <rank id=\"1\" rail=\"1\" numa=\"0\"></rank>\n"
        "  </node>\n"
        "  <node id=\"2\" host=\"vm\"><rank id=\"2\"/><rank id=\"0\"/></node>\n"
        "</hcomm_topology>\n";
    hc_cluster_t *c = NULL;
    (void)state;
    assert_int_equal(hc_cluster_load(write_tmp(text, sizeof(text) - 1), 4, &c), HCOMM_SUCCESS);
    check_model(c);
    assert_int_equal(c->nnodes, 2);
    /* renumbered by lowest rank: ranks 0 and 2 form node 0 */
    static const int node_of[4] = {0, 1, 0, 1}, rail[4] = {0, 1, 0, 0};
    for (int r = 0; r < 4; r++) {
        assert_int_equal(c->node_of[r], node_of[r]);
        assert_int_equal(c->rail_of[r], rail[r]);
        assert_int_equal(c->numa_of[r], r == 1 ? 0 : -1);
    }
    assert_int_equal(hc_cluster_link(c, 0, 1), HC_LINK_CROSS_NODE);
    assert_int_equal(hc_cluster_link(c, 1, 3), HC_LINK_SAME_NUMA);
    assert_true(c->link[HC_LINK_CROSS_NODE].bw_gbps == 0.125);
    assert_true(c->link[HC_LINK_CROSS_NODE].alpha_us == 50.0);
    assert_true(c->link[HC_LINK_SAME_NUMA].bw_gbps == 8.0); /* default kept */
    hc_cluster_destroy(c);
}

#define HDR "<hcomm_topology version=\"1\">"
#define N01 "<node id=\"0\"><rank id=\"0\"/><rank id=\"1\"/></node>"
#define END "</hcomm_topology>"

static void test_malformed(void **state)
{
    static const char *const bad[] = {
        "",
        "   \n  ",
        HDR N01,                                             /* truncated */
        HDR "<node id=\"0\"><rank id=\"0\"/><rank id=",      /* truncated in a tag */
        HDR "<node id=\"0\"><rank id=\"0\"/><rank id=\"1\"", /* truncated */
        "<!-- " HDR N01 END,                                 /* unterminated comment */
        HDR             N01 "<bogus/>" END,                  /* unknown element */
        HDR N01 "<link class=\"self\" alpha_us=\"0\" bw_gbps=\"1\" colour=\"red\"/>" END,
        HDR "<link class=\"warp\" alpha_us=\"0\" bw_gbps=\"1\"/>" N01 END,
        HDR "<link class=\"self\" alpha_us=\"0\"/>" N01               END, /* missing bw */
        HDR "<node id=\"0\"><rank id=\"0\"/><rank id=\"0\"/></node>" END,  /* duplicate */
        HDR "<node id=\"0\"><rank id=\"1\"/></node>" END,                  /* missing rank 0 */
        HDR N01 "<node id=\"1\"><rank id=\"2\"/></node>" END,              /* 3 ranks for 2 */
        HDR N01 "<node id=\"1\"></node>" END,                              /* empty node */
        HDR "<node id=\"0\"><rank id=\"0\"/></node><node id=\"0\"><rank id=\"1\"/></node>" END,
        HDR "<rank id=\"0\"/>" N01 END, /* rank outside a node */
        HDR "<node id=\"0\"><node id=\"1\"/></node>" END,
        HDR N01 END HDR N01 END, /* two roots */
        N01,                     /* no root */
        "<hcomm_topology version=\"2\">" N01 END,
        "<hcomm_topology>" N01               END,
        HDR                                  N01 "</node>" END,
        HDR                                  N01 "</hcomm_topologyx>",
        HDR "junk" N01                       END,
        HDR "<node id=\"0\"><rank id=\"0\" numa=\"99999999999999999999999\"/><rank "
            "id=\"1\"/></node>" END,
        HDR "<node id=\"0\"><rank id=\"1e3\"/><rank id=\"1\"/></node>" END,
        HDR "<node id=\"0\"><rank id=\" 0\"/><rank id=\"1\"/></node>" END,
        HDR "<node id=\"-1\"><rank id=\"0\"/><rank id=\"1\"/></node>" END,
        HDR "<reduce bw_gbps=\"1e999\"/>" N01                          END,
        HDR "<reduce bw_gbps=\"nan\"/>" N01                            END,
        HDR "<reduce bw_gbps=\"0\"/>" N01                              END,
        HDR "<reduce bw_gbps=\"-1\"/>" N01                             END,
        HDR "<reduce bw_gbps=\"1\"/><reduce bw_gbps=\"1\"/>" N01       END,
        HDR "<link class=\"self\" alpha_us=\"1x\" bw_gbps=\"1\"/>" N01 END,
        HDR "<reduce bw_gbps=\"0x1p3\"/>" N01                          END, /* hex */
        HDR "<node id=\"0\" id=\"1\"><rank id=\"0\"/><rank id=\"1\"/></node>" END,
        HDR "<node id=\"0\" host=\"a<b\"><rank id=\"0\"/><rank id=\"1\"/></node>" END,
        HDR "<node id=\"0\" "
            "host=\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\">"
            "<rank id=\"0\"/><rank id=\"1\"/></node>" END,
        HDR "<node id=0><rank id=\"0\"/><rank id=\"1\"/></node>" END,
        HDR "<!DOCTYPE x>" N01 END,
        HDR N01                END "<?pi?>",
    };
    hc_cluster_t *c = NULL;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hcomm_status_t st = hc_cluster_load(write_tmp(bad[i], strlen(bad[i])), 2, &c);
        if (st != HCOMM_ERR_INVALID_ARG)
            print_error("case %zu accepted or wrong status %d: %s\n", i, (int)st, bad[i]);
        assert_int_equal(st, HCOMM_ERR_INVALID_ARG);
    }
    /* the good file these were derived from loads */
    static const char good[] = HDR N01 END;
    assert_int_equal(hc_cluster_load(write_tmp(good, sizeof(good) - 1), 2, &c), HCOMM_SUCCESS);
    hc_cluster_destroy(c);
    /* garbage bytes, NULs included, and every prefix of a good file (quietly) */
    hc_log_level_t saved = hc_log_level_g;
    hc_log_level_g       = HC_LOG_NONE;
    unsigned char junk[4096];
    srand(42);
    for (int iter = 0; iter < 200; iter++) {
        size_t n = (size_t)(rand() % (int)sizeof(junk));
        for (size_t i = 0; i < n; i++)
            junk[i] = (unsigned char)rand();
        if (n > 0)
            junk[0] = '<';
        assert_int_equal(hc_cluster_load(write_tmp((char *)junk, n), 2, &c), HCOMM_ERR_INVALID_ARG);
    }
    for (size_t n = 0; n + 1 < sizeof(good); n++)
        assert_int_equal(hc_cluster_load(write_tmp(good, n), 2, &c), HCOMM_ERR_INVALID_ARG);
    /* a NUL byte inside a name ended it as a match: the file loaded */
    static const char nul[] = "<hcomm_topology\0junk version=\"1\">" N01 END;
    assert_int_equal(hc_cluster_load(write_tmp(nul, sizeof(nul) - 1), 2, &c),
                     HCOMM_ERR_INVALID_ARG);
    hc_log_level_g = saved;
    /* a file of exactly the size limit loads (the buffer's doubling skipped
     * the limit + 1 and refused it as larger); one byte more does not */
    size_t big = HC_PARAMS_FILE_MAX;
    char  *pad = malloc(big + 1);
    assert_non_null(pad);
    memset(pad, ' ', big + 1);
    memcpy(pad, good, sizeof(good) - 1);
    assert_int_equal(hc_cluster_load(write_tmp(pad, big), 2, &c), HCOMM_SUCCESS);
    hc_cluster_destroy(c);
    assert_int_equal(hc_cluster_load(write_tmp(pad, big + 1), 2, &c), HCOMM_ERR_INVALID_ARG);
    free(pad);
    assert_int_equal(hc_cluster_load("/nonexistent/topo.xml", 2, &c), HCOMM_ERR_IO);
    assert_int_equal(hc_cluster_load(tmp_path, 0, &c), HCOMM_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discover),      cmocka_unit_test(test_build),
        cmocka_unit_test(test_synthetic),     cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_virtual_nodes), cmocka_unit_test(test_malformed),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(tmp_path);
    return rc;
}
