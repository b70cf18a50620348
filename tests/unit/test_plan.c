/* test_plan.c - plan invariants on synthetic clusters from 1 x 1 to 1024 x 8,
 * node-major, round-robin and uneven hand-built placements: rings visit every
 * rank once and cross node boundaries exactly nnodes times (0 on one node) and
 * differ from each other; trees span all ranks from the root with consistent
 * parent/children links, balanced across nodes, within the child limit; the
 * two double trees never both use a node as interior; hierarchy groups
 * partition the ranks. The checkers are themselves checked on broken plans.
 * The clusters are built here (not by topo_model.c) so this test stands on
 * plan_*.c alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/log.h"
#include "topology/plan.h"

/* ---- synthetic clusters ---- */

static void cluster_free(hc_cluster_t *c)
{
    if (!c)
        return;
    free(c->node_of);
    free(c->local_rank);
    free(c->numa_of);
    free(c->rail_of);
    free(c->node_first);
    free(c->node_ranks);
    free(c);
}

/* From any node labels per rank: nodes numbered by their lowest rank, rank
 * order inside a node, rails by local rank over nics NICs. */
static hc_cluster_t *cluster_from_labels(const int *label, int nranks, int nics)
{
    hc_cluster_t *c   = calloc(1, sizeof(*c));
    int          *map = malloc((size_t)nranks * sizeof(int)); /* label -> node, labels < nranks */
    assert_non_null(c);
    assert_non_null(map);
    c->nranks     = nranks;
    c->node_of    = malloc((size_t)nranks * sizeof(int));
    c->local_rank = malloc((size_t)nranks * sizeof(int));
    c->numa_of    = malloc((size_t)nranks * sizeof(int));
    c->rail_of    = malloc((size_t)nranks * sizeof(int));
    c->node_first = calloc((size_t)nranks + 1, sizeof(int));
    c->node_ranks = malloc((size_t)nranks * sizeof(int));
    assert_true(c->node_of && c->local_rank && c->numa_of && c->rail_of && c->node_first &&
                c->node_ranks);
    for (int i = 0; i < nranks; i++)
        map[i] = -1;
    for (int r = 0; r < nranks; r++) {
        assert_true(label[r] >= 0 && label[r] < nranks);
        if (map[label[r]] < 0)
            map[label[r]] = c->nnodes++;
        c->node_of[r]    = map[label[r]];
        c->local_rank[r] = c->node_first[c->node_of[r] + 1]++;
        c->rail_of[r]    = c->local_rank[r] % nics;
        c->numa_of[r]    = -1;
    }
    for (int n = 0; n < c->nnodes; n++)
        c->node_first[n + 1] += c->node_first[n];
    for (int r = 0; r < nranks; r++)
        c->node_ranks[c->node_first[c->node_of[r]] + c->local_rank[r]] = r;
    free(map);
    return c;
}

static hc_cluster_t *cluster_grid(int nnodes, int ppn, int round_robin)
{
    int  n     = nnodes * ppn;
    int *label = malloc((size_t)n * sizeof(int));
    assert_non_null(label);
    for (int r = 0; r < n; r++)
        label[r] = round_robin ? r % nnodes : r / ppn;
    hc_cluster_t *c = cluster_from_labels(label, n, 4);
    free(label);
    return c;
}

static int ppn_max(const hc_cluster_t *c)
{
    int m = 0;
    for (int n = 0; n < c->nnodes; n++)
        if (c->node_first[n + 1] - c->node_first[n] > m)
            m = c->node_first[n + 1] - c->node_first[n];
    return m;
}

static int floor_log2(int n)
{
    int k = 0;
    while ((1 << (k + 1)) <= n)
        k++;
    return k;
}

/* ---- checkers: NULL when the plan holds, else what is wrong ---- */

static char why[256];

static const char *ring_check(const hc_cluster_t *c, const int *o)
{
    int   n = c->nranks, cross = 0;
    char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    if (c->node_of[o[0]] != 0) {
        free(seen);
        return "ring does not start on node 0";
    }
    for (int i = 0; i < n; i++) {
        if (o[i] < 0 || o[i] >= n || seen[o[i]]) {
            snprintf(why, sizeof(why), "position %d: rank %d out of range or repeated", i, o[i]);
            free(seen);
            return why;
        }
        seen[o[i]] = 1;
        int a = c->node_of[o[i]], b = c->node_of[o[(i + 1) % n]];
        if (a != b) {
            cross++;
            if (i + 1 < n && b != a + 1) {
                snprintf(why, sizeof(why), "node %d followed by node %d", a, b);
                free(seen);
                return why;
            }
        }
    }
    free(seen);
    if (cross != (c->nnodes > 1 ? c->nnodes : 0)) {
        snprintf(why, sizeof(why), "%d node crossings, want %d", cross,
                 c->nnodes > 1 ? c->nnodes : 0);
        return why;
    }
    return NULL;
}

/* Valid spanning tree, at most HC_TREE_MAX_CHILDREN children, one leader per
 * node (the rank entered from another node or the root), cross-node depth
 * floor(log2 nnodes), total depth within that plus ranks per node. */
static const char *tree_check(const hc_cluster_t *c, const hc_tree_t *t)
{
    int n = c->nranks, pm = ppn_max(c);
    if (t->nranks != n || t->root < 0 || t->root >= n || t->parent[t->root] != -1)
        return "bad nranks or root";
    for (int r = 0; r < n; r++) {
        if (r != t->root && (t->parent[r] < 0 || t->parent[r] >= n))
            return "rank without a valid parent";
        if (t->nchildren[r] < 0 || t->nchildren[r] > HC_TREE_MAX_CHILDREN)
            return "too many children";
        for (int i = 0; i < t->nchildren[r]; i++) {
            int ch = t->children[r * HC_TREE_MAX_CHILDREN + i];
            if (ch < 0 || ch >= n || t->parent[ch] != r)
                return "child whose parent disagrees";
        }
    }
    int *depth = malloc((size_t)n * sizeof(int)), *xdepth = malloc((size_t)n * sizeof(int));
    int *queue = malloc((size_t)n * sizeof(int)), *leaders = calloc((size_t)c->nnodes, sizeof(int));
    assert_true(depth && xdepth && queue && leaders);
    for (int r = 0; r < n; r++)
        depth[r] = -1;
    int         head = 0, tail = 0;
    const char *err = NULL;
    depth[t->root] = xdepth[t->root] = 0;
    queue[tail++]                    = t->root;
    leaders[c->node_of[t->root]]++;
    while (head < tail && !err) {
        int r = queue[head++];
        for (int i = 0; i < t->nchildren[r]; i++) {
            int ch = t->children[r * HC_TREE_MAX_CHILDREN + i];
            if (depth[ch] >= 0) {
                err = "rank reached twice (cycle or shared child)";
                break;
            }
            int x      = c->node_of[ch] != c->node_of[r];
            depth[ch]  = depth[r] + 1;
            xdepth[ch] = xdepth[r] + x;
            leaders[c->node_of[ch]] += x;
            queue[tail++] = ch;
            if (xdepth[ch] > floor_log2(c->nnodes))
                err = "cross-node part too deep";
            else if (depth[ch] > floor_log2(c->nnodes) + pm)
                err = "tree too deep";
        }
    }
    if (!err && tail != n)
        err = "some ranks not reachable from the root";
    for (int m = 0; m < c->nnodes && !err; m++)
        if (leaders[m] != 1)
            err = "node entered more than once";
    free(leaders);
    free(queue);
    free(xdepth);
    free(depth);
    return err;
}

static int node_interior(const hc_cluster_t *c, const hc_tree_t *t, int node)
{
    for (int i = c->node_first[node]; i < c->node_first[node + 1]; i++) {
        int r = c->node_ranks[i];
        for (int j = 0; j < t->nchildren[r]; j++)
            if (c->node_of[t->children[r * HC_TREE_MAX_CHILDREN + j]] != node)
                return 1;
    }
    return 0;
}

/* The node's leader in t: the root or the rank whose parent is off the node. */
static int node_leader(const hc_cluster_t *c, const hc_tree_t *t, int node)
{
    for (int i = c->node_first[node]; i < c->node_first[node + 1]; i++) {
        int r = c->node_ranks[i];
        if (t->parent[r] < 0 || c->node_of[t->parent[r]] != node)
            return r;
    }
    return -1;
}

static const char *hier_check(const hc_cluster_t *c, const hc_hier_t *h)
{
    int n = c->nranks;
    if (h->nnodes != c->nnodes || h->ppn_max != ppn_max(c) || h->nrails != h->ppn_max)
        return "bad counts";
    if (memcmp(h->node_first, c->node_first, (size_t)(c->nnodes + 1) * sizeof(int)) ||
        memcmp(h->node_ranks, c->node_ranks, (size_t)n * sizeof(int)))
        return "node groups differ from the cluster's";
    if (h->rail_first[0] != 0 || h->rail_first[h->nrails] != n)
        return "rails do not cover the ranks";
    char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    const char *err = NULL;
    for (int l = 0; l < h->nrails && !err; l++) {
        if (h->rail_first[l + 1] <= h->rail_first[l])
            err = "empty rail";
        for (int i = h->rail_first[l]; i < h->rail_first[l + 1] && !err; i++) {
            int r = h->rail_ranks[i];
            if (r < 0 || r >= n || seen[r] || c->local_rank[r] != l)
                err = "rail rank repeated or of another local rank";
            else if (i > h->rail_first[l] && c->node_of[h->rail_ranks[i - 1]] >= c->node_of[r])
                err = "rail not in node order";
            else
                seen[r] = 1;
        }
    }
    free(seen);
    return err;
}

#define assert_ok(msg)                                                                             \
    do {                                                                                           \
        const char *m_ = (msg);                                                                    \
        if (m_)                                                                                    \
            fail_msg("%s", m_);                                                                    \
    } while (0)

/* ---- whole-cluster checks ---- */

static void check_rings(const hc_cluster_t *c, int want)
{
    hc_rings_t rg;
    int        pm = ppn_max(c), distinct = pm <= 2 ? pm : 2 * pm;
    assert_int_equal(hc_plan_rings(c, want, &rg), HCOMM_SUCCESS);
    assert_int_equal(rg.nranks, c->nranks);
    assert_int_equal(rg.nrings, want < distinct ? want : distinct);
    for (int k = 0; k < rg.nrings; k++) {
        const int *o = rg.order + (size_t)k * (size_t)c->nranks;
        assert_ok(ring_check(c, o));
        for (int j = 0; j < k; j++)
            if (!memcmp(o, rg.order + (size_t)j * (size_t)c->nranks,
                        (size_t)c->nranks * sizeof(int)))
                fail_msg("rings %d and %d are equal", j, k);
    }
    /* On a full node the first min(nrings, ppn) rings leave through distinct ranks. */
    for (int n = 0; n < c->nnodes; n++) {
        int s = c->node_first[n + 1] - c->node_first[n];
        if (s != pm)
            continue;
        for (int k = 0; k < rg.nrings && k < s; k++)
            for (int j = 0; j < k; j++) {
                int ek = -1, ej = -1;
                for (int i = 0; i < c->nranks; i++) {
                    if (c->node_of[rg.order[(size_t)k * c->nranks + i]] == n)
                        ek = rg.order[(size_t)k * c->nranks + i];
                    if (c->node_of[rg.order[(size_t)j * c->nranks + i]] == n)
                        ej = rg.order[(size_t)j * c->nranks + i];
                }
                if (s > 1 && ek == ej)
                    fail_msg("rings %d and %d leave node %d through the same rank", j, k, n);
            }
        break;
    }
    hc_plan_rings_free(&rg);
    assert_null(rg.order);
}

static void check_tree(const hc_cluster_t *c, int root)
{
    hc_tree_t t;
    assert_int_equal(hc_plan_tree(c, root, &t), HCOMM_SUCCESS);
    assert_int_equal(t.root, root);
    assert_ok(tree_check(c, &t));
    for (int n = 0; n < c->nnodes; n++)
        if (n != c->node_of[root])
            assert_int_equal(node_leader(c, &t, n), c->node_ranks[c->node_first[n]]);
    hc_plan_tree_free(&t);
}

static void check_double_tree(const hc_cluster_t *c)
{
    hc_tree_t t[2];
    assert_int_equal(hc_plan_double_tree(c, t), HCOMM_SUCCESS);
    for (int k = 0; k < 2; k++)
        assert_ok(tree_check(c, &t[k]));
    for (int n = 0; n < c->nnodes; n++) {
        int s = c->node_first[n + 1] - c->node_first[n];
        if (node_interior(c, &t[0], n) && node_interior(c, &t[1], n))
            fail_msg("node %d interior in both trees (%d nodes)", n, c->nnodes);
        int l0 = node_leader(c, &t[0], n), l1 = node_leader(c, &t[1], n);
        if (s > 1 && l0 == l1)
            fail_msg("node %d has the same leader %d in both trees", n, l0);
    }
    hc_plan_tree_free(&t[0]);
    hc_plan_tree_free(&t[1]);
}

static void check_hier(const hc_cluster_t *c)
{
    hc_hier_t h;
    assert_int_equal(hc_plan_hier(c, &h), HCOMM_SUCCESS);
    assert_ok(hier_check(c, &h));
    hc_plan_hier_free(&h);
    assert_null(h.rail_ranks);
}

static void check_all(hc_cluster_t *c, int every_root)
{
    for (int want = 1; want <= 2 * ppn_max(c) + 2; want++)
        check_rings(c, want);
    if (every_root) {
        for (int r = 0; r < c->nranks; r++)
            check_tree(c, r);
    } else {
        check_tree(c, 0);
        check_tree(c, c->nranks / 2 + 1);
        check_tree(c, c->nranks - 1);
    }
    check_double_tree(c);
    check_hier(c);
    cluster_free(c);
}

/* ---- tests ---- */

static void test_small_grids(void **state)
{
    (void)state;
    static const int shapes[][2] = {{1, 1}, {1, 2}, {1, 8}, {2, 1}, {2, 2},  {3, 2},
                                    {5, 3}, {7, 1}, {6, 4}, {9, 5}, {16, 2}, {33, 3}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (int rr = 0; rr < 2; rr++)
            check_all(cluster_grid(shapes[i][0], shapes[i][1], rr), 1);
}

/* Every node count from 1 to 300: the double tree's parity split and balance. */
static void test_node_counts(void **state)
{
    (void)state;
    for (int nn = 1; nn <= 300; nn++) {
        hc_cluster_t *c = cluster_grid(nn, nn % 3 + 1, nn % 2);
        check_double_tree(c);
        check_tree(c, nn / 3);
        cluster_free(c);
    }
}

static void test_uneven(void **state)
{
    (void)state;
    /* nodes of 4, 1 and 2 ranks, interleaved */
    static const int a[] = {0, 1, 0, 2, 0, 2, 0};
    /* nodes of 1, 4, 2 ranks */
    static const int b[] = {3, 5, 5, 6, 5, 6, 5};
    /* nodes of 3, 1, 5, 2 ranks, scattered */
    static const int d[] = {2, 7, 2, 9, 9, 1, 9, 2, 9, 1, 9};
    check_all(cluster_from_labels(a, 7, 2), 1);
    check_all(cluster_from_labels(b, 7, 1), 1);
    check_all(cluster_from_labels(d, 11, 4), 1);
}

static void test_large(void **state)
{
    (void)state;
    for (int rr = 0; rr < 2; rr++)
        check_all(cluster_grid(128, 8, rr), 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1024 x 8: every plan built in well under the second hcomm-topo may spend. */
static void test_1024x8(void **state)
{
    (void)state;
    for (int rr = 0; rr < 2; rr++) {
        hc_cluster_t *c = cluster_grid(1024, 8, rr);
        hc_rings_t    rg;
        hc_tree_t     t[2], one;
        hc_hier_t     h;
        double        t0 = now_s();
        assert_int_equal(hc_plan_rings(c, 16, &rg), HCOMM_SUCCESS);
        assert_int_equal(hc_plan_double_tree(c, t), HCOMM_SUCCESS);
        assert_int_equal(hc_plan_tree(c, 4099, &one), HCOMM_SUCCESS);
        assert_int_equal(hc_plan_hier(c, &h), HCOMM_SUCCESS);
        double dt = now_s() - t0;
        print_message("1024x8 %s: plans built in %.3f ms\n", rr ? "round-robin" : "node-major",
                      dt * 1e3);
        assert_true(dt < 1.0);
        assert_int_equal(rg.nrings, 16);
        for (int k = 0; k < rg.nrings; k++)
            assert_ok(ring_check(c, rg.order + (size_t)k * (size_t)c->nranks));
        assert_ok(tree_check(c, &t[0]));
        assert_ok(tree_check(c, &t[1]));
        for (int n = 0; n < c->nnodes; n++)
            assert_false(node_interior(c, &t[0], n) && node_interior(c, &t[1], n));
        assert_ok(tree_check(c, &one));
        assert_int_equal(one.root, 4099);
        assert_ok(hier_check(c, &h));
        hc_plan_rings_free(&rg);
        hc_plan_tree_free(&t[0]);
        hc_plan_tree_free(&t[1]);
        hc_plan_tree_free(&one);
        hc_plan_hier_free(&h);
        cluster_free(c);
    }
}

/* The checkers catch broken plans, so the tests above can fail. */
static void test_checkers_fail(void **state)
{
    (void)state;
    hc_cluster_t *c = cluster_grid(3, 2, 1);
    hc_rings_t    rg;
    hc_tree_t     t;
    hc_hier_t     h;
    assert_int_equal(hc_plan_rings(c, 1, &rg), HCOMM_SUCCESS);
    int tmp     = rg.order[1];
    rg.order[1] = rg.order[2];
    rg.order[2] = tmp;
    assert_non_null(ring_check(c, rg.order)); /* splits node 0: too many crossings */
    rg.order[2] = rg.order[0];
    assert_non_null(ring_check(c, rg.order)); /* repeated rank */
    hc_plan_rings_free(&rg);

    assert_int_equal(hc_plan_tree(c, 0, &t), HCOMM_SUCCESS);
    assert_null(tree_check(c, &t));
    int leaf = -1;
    for (int r = 0; r < c->nranks && leaf < 0; r++)
        if (t.nchildren[r] == 0)
            leaf = r;
    assert_true(leaf >= 0);
    /* the root's first child becomes a child of a leaf too: reached twice */
    int ch                                  = t.children[0];
    t.children[leaf * HC_TREE_MAX_CHILDREN] = ch;
    t.nchildren[leaf]                       = 1;
    assert_non_null(tree_check(c, &t));
    hc_plan_tree_free(&t);

    assert_int_equal(hc_plan_hier(c, &h), HCOMM_SUCCESS);
    h.rail_ranks[0] = h.rail_ranks[h.rail_first[1]];
    assert_non_null(hier_check(c, &h));
    hc_plan_hier_free(&h);
    cluster_free(c);
}

static void test_bad_args(void **state)
{
    (void)state;
    hc_cluster_t *c    = cluster_grid(2, 2, 0);
    hc_rings_t    rg   = {.nrings = -7};
    hc_tree_t     t[2] = {{.root = -7}, {.root = -7}};
    hc_hier_t     h    = {.nnodes = -7};
    hc_log_level_g     = HC_LOG_NONE;
    assert_int_equal(hc_plan_rings(c, 0, &rg), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_plan_rings(NULL, 1, &rg), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_plan_tree(c, 4, &t[0]), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_plan_tree(c, -1, &t[0]), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_plan_double_tree(NULL, t), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_plan_hier(NULL, &h), HCOMM_ERR_INVALID_ARG);
    /* outputs untouched on failure */
    assert_int_equal(rg.nrings, -7);
    assert_int_equal(t[0].root, -7);
    assert_int_equal(h.nnodes, -7);
    /* frees are NULL-safe and idempotent */
    hc_plan_rings_free(NULL);
    hc_plan_tree_free(NULL);
    hc_plan_hier_free(NULL);
    hc_rings_t z = {0};
    hc_plan_rings_free(&z);
    hc_plan_rings_free(&z);
    cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_grids), cmocka_unit_test(test_node_counts),
        cmocka_unit_test(test_uneven),      cmocka_unit_test(test_large),
        cmocka_unit_test(test_1024x8),      cmocka_unit_test(test_checkers_fail),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
