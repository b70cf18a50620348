/* test_sched_plan.c - the schedule builders added for plans: Rabenseifner
 * allreduce and Bruck allgather (through hc_algo_build), rings along any order,
 * trees and double trees (algo_plan.h), run by the executor simulator
 * (sched_sim.c) in rendezvous and eager runs and compared with a serial
 * reference: outputs fully written, inputs left alone. HC_TEST_SEED=N explores
 * other interleavings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "algorithms/algo.h"
#include "algorithms/algo_plan.h"
#include "base/log.h"
#include "base/params.h"
#include "sched_sim.h"

#define MAXR 9

/* ---- plans the test builds ---- */

typedef struct tree_buf {
    hc_tree_t t;
    int       parent[MAXR], nchildren[MAXR], children[MAXR * HC_TREE_MAX_CHILDREN];
} tree_buf_t;

static uint64_t g_seed = 0x2545f4914f6cdd1dull;
static unsigned g_runs;

static uint64_t rnd(void)
{
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 7;
    g_seed ^= g_seed << 17;
    return g_seed;
}

/* A random permutation of 0..n-1 with perm[0] = first (first < 0: any). */
static void rand_perm(int *perm, int n, int first)
{
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int i = 0; first >= 0 && i < n; i++)
        if (perm[i] == first)
            perm[i] = perm[0], perm[0] = first;
}

static void tree_link(tree_buf_t *b, int child, int parent)
{
    b->parent[child]                                                    = parent;
    b->children[parent * HC_TREE_MAX_CHILDREN + b->nchildren[parent]++] = child;
}

enum { TREE_CHAIN, TREE_BINARY, TREE_TERNARY, TREE_RANDOM, TREE_KINDS };

/* A tree over n ranks rooted at root; ranks placed in a random order (the
 * root first), position i hangs under position (i-1)/k, or at random. */
static void tree_make(tree_buf_t *b, int kind, int n, int root)
{
    int perm[MAXR];

    memset(b, 0, sizeof(*b));
    b->t = (hc_tree_t){n, root, b->parent, b->nchildren, b->children};
    rand_perm(perm, n, root);
    b->parent[root] = -1;
    for (int i = 1; i < n; i++) {
        int p = 0;
        if (kind == TREE_CHAIN)
            p = i - 1;
        else if (kind == TREE_BINARY)
            p = (i - 1) / 2;
        else if (kind == TREE_TERNARY)
            p = (i - 1) / 3;
        else
            do
                p = (int)(rnd() % (uint64_t)i);
            while (b->nchildren[perm[p]] == HC_TREE_MAX_CHILDREN);
        tree_link(b, perm[i], perm[p]);
    }
}

/* ---- cases ---- */

enum { B_ALGO, B_RING, B_TREE, B_DTREE };

typedef struct tcase {
    int              n, inplace, eager, kind; /* kind: B_* */
    size_t           chunk;
    hc_algo_t        algo;
    hc_coll_args_t   a; /* root as for every rank */
    const int       *order; /* nrings (0: 1) orders of n ranks */
    int              nrings;
    const hc_tree_t *trees; /* one, or two for a double tree */
} tcase_t;

/* The expected RECV of rank r; returns its size. */
static size_t case_expect(const tcase_t *tc, int r, unsigned char *out, unsigned char *tmp)
{
    const hc_coll_args_t *a = &tc->a;
    size_t                c = a->count, blk = c * ref_esize(a->dtype);

    if (a->coll == HC_COLL_BROADCAST) {
        ref_fill(out, c, a->dtype, a->root, 0);
        return blk;
    }
    if (a->coll == HC_COLL_ALLGATHER) {
        for (int q = 0; q < tc->n; q++)
            ref_fill(out + (size_t)q * blk, c, a->dtype, q, 0);
        return (size_t)tc->n * blk;
    }
    if (a->coll == HC_COLL_REDUCE && r != a->root)
        return 0;
    size_t first = a->coll == HC_COLL_REDUCE_SCATTER ? (size_t)r * c : 0;
    ref_fill(out, c, a->dtype, 0, first);
    for (int q = 1; q < tc->n; q++) {
        ref_fill(tmp, c, a->dtype, q, first);
        ref_reduce(out, out, tmp, c, a->dtype, a->op);
    }
    if (a->op == HCOMM_AVG)
        ref_div(out, c, a->dtype, tc->n);
    return blk;
}

static hcomm_status_t case_build(const tcase_t *tc, const hc_coll_args_t *a, int r, hc_sched_t **s)
{
    switch (tc->kind) {
    case B_ALGO:
        return hc_algo_build(a, tc->algo, NULL, tc->n, r, tc->chunk, s);
    case B_RING:
        return hc_algo_ring_ordered(a, tc->order, tc->nrings > 0 ? tc->nrings : 1, tc->n, r, tc->chunk,
                                    s);
    case B_TREE:
        return hc_algo_tree(a, tc->trees, r, tc->chunk, s);
    default:
        return hc_algo_double_tree(a, tc->trees, r, tc->chunk, s);
    }
}

/* Peers, pseq, lengths, dtype/op and the DIV count, before running. */
static void case_check_struct(const tcase_t *tc, int r, const hc_sched_t *s)
{
    const hc_coll_args_t *a            = &tc->a;
    size_t                es           = ref_esize(a->dtype);
    uint32_t              cnt[2][MAXR] = {{0}};
    int                   ndiv = 0, n = tc->n;
    int                   want = a->op == HCOMM_AVG && n > 1 && a->count > 0 &&
               (a->coll == HC_COLL_ALLREDUCE || a->coll == HC_COLL_REDUCE_SCATTER ||
                (a->coll == HC_COLL_REDUCE && r == a->root));

    if (s->nbufs != HC_BUF_PER_OP || s->nranks != n || s->rank != r)
        sim_fail("rank %d: schedule header", r);
    if (a->count == 0 && s->nsteps != 0)
        sim_fail("rank %d: %u steps for count 0", r, s->nsteps);
    for (uint32_t i = 0; i < s->nsteps && sim_err[0] == '\0'; i++) {
        const hc_step_t *st = &s->steps[i];
        int              d  = sim_msg_dir(st->kind);
        if (st->len == 0 || st->len % es != 0)
            sim_fail(SIM_STEP_FMT ": empty or partial-element step", SIM_STEP_ARGS(st));
        if (d >= 0 &&
            (st->peer < 0 || st->peer >= n || st->peer == r || st->pseq != cnt[d][st->peer]++))
            sim_fail(SIM_STEP_FMT ": bad peer or pseq %u", SIM_STEP_ARGS(st), st->pseq);
        if ((st->kind == HC_STEP_RECV_REDUCE || st->kind == HC_STEP_REDUCE) &&
            (st->dtype != a->dtype || st->op != a->op))
            sim_fail(SIM_STEP_FMT ": reduce with dtype %d op %d", SIM_STEP_ARGS(st), st->dtype,
                     st->op);
        if (st->kind == HC_STEP_DIV && (++ndiv, st->peer != n || st->dtype != a->dtype))
            sim_fail(SIM_STEP_FMT ": bad DIV", SIM_STEP_ARGS(st));
    }
    if (sim_err[0] == '\0' && ndiv != want)
        sim_fail("rank %d: %d DIV steps, expected %d", r, ndiv, want);
}

static int case_setup(const tcase_t *tc, sim_t *sm, lay_t *lay)
{
    for (int r = 0; r < tc->n; r++) {
        sim_rank_t    *k  = &sm->rk[r];
        hc_sched_t    *s  = NULL;
        hcomm_status_t st = case_build(tc, &tc->a, r, &s);
        if (st != HCOMM_SUCCESS) {
            sim_fail("rank %d: build failed: %s", r, hcomm_status_name(st));
            return -1;
        }
        lay[r] = sim_layout(&tc->a, tc->n, r);
        sim_place(k, s, &lay[r], lay[r].regsz);
        case_check_struct(tc, r, s);
        if (sim_has_input(&tc->a, &lay[r], r)) {
            ref_fill(k->mem + lay[r].send_at, lay[r].sendsz / ref_esize(tc->a.dtype), tc->a.dtype,
                      r, 0);
            memset(k->def + lay[r].send_at, 1, lay[r].sendsz);
        }
        if (sim_err[0] != '\0')
            return -1;
    }
    return 0;
}

static void case_verify(const tcase_t *tc, sim_t *sm, const lay_t *lay, unsigned char *exp,
                        unsigned char *tmp)
{
    size_t es = ref_esize(tc->a.dtype);

    for (int r = 0; r < tc->n && sim_err[0] == '\0'; r++) {
        sim_rank_t    *k   = &sm->rk[r];
        size_t         got = case_expect(tc, r, exp, tmp);
        unsigned char *out = k->mem + lay[r].recv_at;
        if (got != lay[r].recvsz) {
            sim_fail("rank %d: reference has %zu bytes, RECV %zu", r, got, lay[r].recvsz);
            return;
        }
        for (size_t b = 0; b < got && sim_err[0] == '\0'; b++) {
            if (!k->def[lay[r].recv_at + b])
                sim_fail("rank %d: output byte %zu never written", r, b);
            else if (out[b] != exp[b])
                sim_fail("rank %d: element %zu wrong", r, b / es);
        }
        if (!tc->inplace && sim_has_input(&tc->a, &lay[r], r)) {
            ref_fill(exp, lay[r].sendsz / es, tc->a.dtype, r, 0);
            if (memcmp(exp, k->mem + lay[r].send_at, lay[r].sendsz) != 0)
                sim_fail("rank %d: SEND was modified", r);
        }
    }
}

static void run_case(tcase_t *tc)
{
    sim_t          sm;
    lay_t          lay[MAXR];
    size_t         maxb = tc->a.count * 8 * (size_t)tc->n + 16;
    unsigned char *exp = malloc(maxb), *tmp = malloc(maxb);

    assert_true(exp && tmp);
    tc->a.in_place = tc->inplace;
    sim_begin(&sm, tc->n, tc->eager, rnd());
    if (case_setup(tc, &sm, lay) == 0 && sim_run(&sm) == 0)
        case_verify(tc, &sm, lay, exp, tmp);
    sim_end(&sm);
    free(exp), free(tmp);
    g_runs++;
    if (sim_err[0] != '\0')
        fail_msg("%s/%s n=%d count=%zu dt=%d op=%d root=%d chunk=%zu inplace=%d eager=%d\n  -> %s",
                 hc_coll_name(tc->a.coll),
                 tc->kind == B_ALGO   ? hc_algo_name(tc->algo)
                 : tc->kind == B_RING ? "ring_ordered"
                 : tc->kind == B_TREE ? "tree"
                                      : "double_tree",
                 tc->n, tc->a.count, tc->a.dtype, tc->a.op, tc->a.root, tc->chunk, tc->inplace,
                 tc->eager, sim_err);
}

/* ---- the tests ---- */

static const size_t count_list[] = {0, 1, 7, 1023, 10007};
#define NCOUNTS (sizeof(count_list) / sizeof(count_list[0]))
#define BIG_COUNT 10007

static const struct {
    hcomm_dtype_t dt;
    hcomm_op_t    op;
} red_types[] = {{HCOMM_INT32, HCOMM_SUM},
                 {HCOMM_FLOAT32, HCOMM_SUM},
                 {HCOMM_FLOAT32, HCOMM_MAX},
                 {HCOMM_INT32, HCOMM_AVG}};
#define NRED (sizeof(red_types) / sizeof(red_types[0]))

/* Runs tc over every count, type (reductions; int32 and int8 otherwise) and
 * in place x chunk (64 B, 256 KiB) x eager; the big count only on some. */
static void run_variants(tcase_t *tc)
{
    int reduces = tc->a.coll != HC_COLL_ALLGATHER && tc->a.coll != HC_COLL_BROADCAST;
    int ntypes  = reduces ? (int)NRED : 2;

    for (size_t ci = 0; ci < NCOUNTS; ci++) {
        for (int ti = 0; ti < ntypes; ti++) {
            for (int v = 0; v < 8; v++) {
                if (count_list[ci] == BIG_COUNT && (ti > 1 || (v >> 2) != ti))
                    continue;
                tc->a.count = count_list[ci];
                tc->a.dtype = reduces ? red_types[ti].dt : ti == 0 ? HCOMM_INT32 : HCOMM_INT8;
                tc->a.op    = reduces ? red_types[ti].op : HCOMM_SUM;
                tc->inplace = v & 1;
                tc->chunk   = (v & 2) ? (v & 4 ? 0 : 256 * 1024) : 64; /* 0: unchunked */
                tc->eager   = (v >> 2) & 1;
                run_case(tc);
            }
        }
    }
}

static void run_algo(hc_coll_t coll, hc_algo_t algo)
{
    unsigned before = g_runs;
    clock_t  t0     = clock();

    for (int n = 1; n <= MAXR; n++) {
        tcase_t tc = {.n = n, .kind = B_ALGO, .algo = algo};
        tc.a.coll  = coll;
        run_variants(&tc);
    }
    print_message("%s/%s: %u runs, %.1f s\n", hc_coll_name(coll), hc_algo_name(algo),
                  g_runs - before, (double)(clock() - t0) / CLOCKS_PER_SEC);
}

static void test_rabenseifner(void **state)
{
    (void)state;
    run_algo(HC_COLL_ALLREDUCE, HC_ALGO_RABENSEIFNER);
}

static void test_bruck(void **state)
{
    (void)state;
    run_algo(HC_COLL_ALLGATHER, HC_ALGO_BRUCK);
}

/* Rings along random orders, and the identity order against the rank ring. */
static void test_ring_ordered(void **state)
{
    static const int       ns[]    = {1, 2, 3, 5, 8, 9};
    static const hc_coll_t colls[] = {HC_COLL_ALLREDUCE, HC_COLL_ALLGATHER, HC_COLL_REDUCE_SCATTER};
    clock_t                t0      = clock();
    unsigned               before  = g_runs;
    (void)state;

    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        for (int rep = 0; rep < 3; rep++) {
            int order[MAXR];
            rand_perm(order, ns[ni], -1);
            for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
                tcase_t tc = {.n = ns[ni], .kind = B_RING, .order = order};
                tc.a.coll  = colls[ci];
                run_variants(&tc);
            }
        }
    }
    /* allreduce split over several rings, each its own random order */
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        for (int nr = 2; nr <= 3; nr++) {
            int order[3 * MAXR];
            for (int q = 0; q < nr; q++)
                rand_perm(order + q * ns[ni], ns[ni], -1);
            tcase_t tc = {.n = ns[ni], .kind = B_RING, .order = order, .nrings = nr};
            tc.a.coll  = HC_COLL_ALLREDUCE;
            run_variants(&tc);
        }
    }
    print_message("ring_ordered: %u runs, %.1f s\n", g_runs - before,
                  (double)(clock() - t0) / CLOCKS_PER_SEC);
}

/* Every tree shape, roots 0 and n-1: reduce, broadcast, allreduce. */
static void test_tree(void **state)
{
    static const hc_coll_t colls[] = {HC_COLL_REDUCE, HC_COLL_BROADCAST, HC_COLL_ALLREDUCE};
    clock_t                t0      = clock();
    unsigned               before  = g_runs;
    tree_buf_t             tb;
    (void)state;

    for (int n = 1; n <= MAXR; n += (n < 4 ? 1 : 2)) {
        for (int kind = 0; kind < TREE_KINDS; kind++) {
            for (int ri = 0; ri < 2; ri++) {
                int root = ri == 0 ? 0 : n - 1;
                if (ri == 1 && n == 1)
                    continue;
                tree_make(&tb, kind, n, root);
                for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
                    tcase_t tc = {.n = n, .kind = B_TREE, .trees = &tb.t};
                    tc.a.coll  = colls[ci];
                    tc.a.root  = root;
                    run_variants(&tc);
                }
            }
        }
    }
    print_message("tree: %u runs, %.1f s\n", g_runs - before,
                  (double)(clock() - t0) / CLOCKS_PER_SEC);
}

/* Pairs of different trees, some linking the same ranks in both directions. */
static void test_double_tree(void **state)
{
    clock_t    t0     = clock();
    unsigned   before = g_runs;
    tree_buf_t tb[2];
    hc_tree_t  two[2];
    (void)state;

    for (int n = 1; n <= MAXR; n++) {
        for (int kind = 0; kind < TREE_KINDS; kind++) {
            tree_make(&tb[0], kind, n, 0);
            tree_make(&tb[1], (kind + 1 + (int)(rnd() % 3)) % TREE_KINDS, n, n - 1);
            two[0] = tb[0].t, two[1] = tb[1].t;
            tcase_t tc = {.n = n, .kind = B_DTREE, .trees = two};
            tc.a.coll  = HC_COLL_ALLREDUCE;
            run_variants(&tc);
        }
    }
    print_message("double_tree: %u runs, %.1f s\n", g_runs - before,
                  (double)(clock() - t0) / CLOCKS_PER_SEC);
}

/* Names, forcing through HCOMM_ALGO, unchanged defaults, and argument checks. */
static void test_names_and_errors(void **state)
{
    hc_params_t    p  = *hc_params_get();
    hc_coll_args_t ar = {HC_COLL_ALLREDUCE, 1 << 20, HCOMM_FLOAT32, HCOMM_SUM, 0, 0, NULL};
    hc_coll_args_t ag = {HC_COLL_ALLGATHER, 16, HCOMM_FLOAT32, HCOMM_SUM, 0, 0, NULL};
    hc_sched_t    *s  = NULL;
    tree_buf_t     tb;
    int            order[4] = {2, 0, 3, 0};
    (void)state;

    assert_int_equal(hc_algo_parse("rabenseifner"), HC_ALGO_RABENSEIFNER);
    assert_int_equal(hc_algo_parse("Bruck"), HC_ALGO_BRUCK);
    assert_string_equal(hc_algo_name(HC_ALGO_BRUCK), "bruck");
    p.algo = "";
    assert_int_equal(sim_select(&ar, 4, &p), HC_ALGO_RING);
    assert_int_equal(sim_select(&ag, 4, &p), HC_ALGO_RING);
    p.algo = "bruck,allreduce:rabenseifner";
    assert_int_equal(sim_select(&ar, 4, &p), HC_ALGO_RABENSEIFNER);
    assert_int_equal(sim_select(&ag, 4, &p), HC_ALGO_BRUCK);
    assert_int_equal(hc_algo_build(&ag, HC_ALGO_RABENSEIFNER, NULL, 4, 0, 64, &s),
                     HCOMM_ERR_UNSUPPORTED);
    assert_int_equal(hc_algo_build(&ar, HC_ALGO_BRUCK, NULL, 4, 0, 64, &s), HCOMM_ERR_UNSUPPORTED);

    assert_int_equal(hc_algo_ring_ordered(&ag, order, 1, 4, 0, 64, &s), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hc_algo_ring_ordered(&ar, order, 0, 4, 0, 64, &s), HCOMM_ERR_INVALID_ARG);
    order[3] = 1;
    assert_int_equal(hc_algo_ring_ordered(&ag, order, 1, 4, 4, 64, &s), HCOMM_ERR_INVALID_RANK);
    ag.coll = HC_COLL_BROADCAST;
    assert_int_equal(hc_algo_ring_ordered(&ag, order, 1, 4, 0, 64, &s), HCOMM_ERR_UNSUPPORTED);
    tree_make(&tb, TREE_BINARY, 4, 1);
    assert_int_equal(hc_algo_tree(&ag, &tb.t, 0, 64, &s), HCOMM_ERR_INVALID_ARG); /* root 0 != 1 */
    ag.coll = HC_COLL_ALLGATHER;
    assert_int_equal(hc_algo_tree(&ag, &tb.t, 0, 64, &s), HCOMM_ERR_UNSUPPORTED);
    tb.parent[1] = 2; /* the root with a parent */
    assert_int_equal(hc_algo_tree(&ar, &tb.t, 1, 64, &s), HCOMM_ERR_INVALID_ARG);
    assert_null(s);
    tb.parent[1] = -1;
    assert_int_equal(hc_algo_tree(&ar, &tb.t, 1, 64, &s), HCOMM_SUCCESS);
    assert_non_null(s);
    hc_sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_errors),
        cmocka_unit_test(test_rabenseifner),
        cmocka_unit_test(test_bruck),
        cmocka_unit_test(test_ring_ordered),
        cmocka_unit_test(test_tree),
        cmocka_unit_test(test_double_tree),
    };
    const char *seed = getenv("HC_TEST_SEED");

    if (seed != NULL)
        g_seed = strtoull(seed, NULL, 0) | 1;
    (void)hc_params_get();
    if (getenv("HCOMM_LOG_LEVEL") == NULL)
        hc_log_level_g = HC_LOG_NONE; /* the error paths tested here log by design */
    print_message("seed 0x%llx (HC_TEST_SEED)\n", (unsigned long long)g_seed);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
