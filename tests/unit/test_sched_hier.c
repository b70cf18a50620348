/* test_sched_hier.c - the hierarchical schedule builders (hc_algo_hier) on
 * hand-made node layouts: equal nodes, one node, uneven nodes with interleaved
 * rank numbers, round-robin placement; every collective x count x type x in
 * place or not x chunk size, run by the executor simulator (sched_sim.c) and
 * compared with a serial reference. HC_TEST_SEED=N explores other interleavings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "algorithms/algo_plan.h"
#include "sched_sim.h"

/* ---- layouts ---- */

#define MAXNODES 8

typedef struct layout {
    const char *name;
    int         nnodes;
    int         sizes[MAXNODES];
    int         ranks[SIM_MAXR]; /* node by node */
} layout_t;

static const layout_t layouts[] = {
    {"1x4", 1, {4}, {0, 1, 2, 3}},
    {"3x2", 3, {2, 2, 2}, {0, 1, 2, 3, 4, 5}},
    {"2x3", 2, {3, 3}, {0, 1, 2, 3, 4, 5}},
    {"1/3/2 interleaved", 3, {1, 3, 2}, {3, 0, 2, 5, 1, 4}},
    {"4x2 round-robin", 4, {2, 2, 2, 2}, {0, 4, 1, 5, 2, 6, 3, 7}},
    {"2/1", 2, {2, 1}, {1, 2, 0}},
    {"5 x 1-3", 5, {3, 1, 2, 3, 1}, {9, 0, 4, 1, 2, 5, 3, 7, 8, 6}},
    {"6x2", 6, {2, 2, 2, 2, 2, 2}, {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}},
};

typedef struct hier_store {
    hc_hier_t h;
    int       node_first[MAXNODES + 1], node_ranks[SIM_MAXR];
    int       rail_first[SIM_MAXR + 1], rail_ranks[SIM_MAXR];
    int       nranks;
} hier_store_t;

/* Fills an hc_hier_t as hc_plan_hier would: rail l holds local rank l of every
 * node that has one, in node order. */
static void make_hier(const layout_t *L, hier_store_t *hs)
{
    int at = 0, ppn_max = 0;

    memset(hs, 0, sizeof(*hs));
    for (int n = 0; n < L->nnodes; n++) {
        hs->node_first[n] = at;
        at += L->sizes[n];
        ppn_max = L->sizes[n] > ppn_max ? L->sizes[n] : ppn_max;
    }
    hs->node_first[L->nnodes] = at;
    memcpy(hs->node_ranks, L->ranks, (size_t)at * sizeof(int));
    at = 0;
    for (int l = 0; l < ppn_max; l++) {
        hs->rail_first[l] = at;
        for (int n = 0; n < L->nnodes; n++)
            if (l < L->sizes[n])
                hs->rail_ranks[at++] = L->ranks[hs->node_first[n] + l];
    }
    hs->rail_first[ppn_max] = at;
    hs->nranks              = at;
    hs->h = (hc_hier_t){L->nnodes,      ppn_max,        hs->node_first, hs->node_ranks,
                        hs->rail_first, hs->rail_ranks, ppn_max};
}

/* ---- one case ---- */

typedef struct tcase {
    const hier_store_t *hs;
    hc_coll_args_t      a; /* root as given; in_place */
    size_t              chunk;
    int                 eager, leader; /* leader: hc_algo_hier_leader */
} tcase_t;

/* Expected RECV of rank r; returns its size. */
static size_t expect(const hc_coll_args_t *a, int n, int r, unsigned char *out, unsigned char *tmp)
{
    size_t c = a->count, blk = c * ref_esize(a->dtype);

    switch (a->coll) {
    case HC_COLL_REDUCE:
        if (r != a->root)
            return 0;
        /* fall through */
    case HC_COLL_ALLREDUCE:
    case HC_COLL_REDUCE_SCATTER: {
        size_t first = a->coll == HC_COLL_REDUCE_SCATTER ? (size_t)r * c : 0;
        ref_fill(out, c, a->dtype, 0, first);
        for (int q = 1; q < n; q++) {
            ref_fill(tmp, c, a->dtype, q, first);
            ref_reduce(out, out, tmp, c, a->dtype, a->op);
        }
        if (a->op == HCOMM_AVG)
            ref_div(out, c, a->dtype, n);
        return blk;
    }
    case HC_COLL_BROADCAST:
        ref_fill(out, c, a->dtype, a->root, 0);
        return blk;
    default: /* allgather */
        for (int q = 0; q < n; q++)
            ref_fill(out + (size_t)q * blk, c, a->dtype, q, 0);
        return (size_t)n * blk;
    }
}

/* Structure: header, count 0 means no step, exactly one DIV where avg has output. */
static void check_struct(const tcase_t *tc, int r, const hc_sched_t *s)
{
    const hc_coll_args_t *a = &tc->a;
    int                   n = tc->hs->nranks, ndiv = 0;
    int                   want = a->op == HCOMM_AVG && n > 1 && a->count > 0 &&
               (a->coll == HC_COLL_ALLREDUCE || a->coll == HC_COLL_REDUCE_SCATTER ||
                (a->coll == HC_COLL_REDUCE && r == a->root));

    if (s->nbufs != HC_BUF_PER_OP || s->nranks != n || s->rank != r)
        sim_fail("rank %d: schedule header nbufs %u nranks %d rank %d", r, s->nbufs, s->nranks,
                 s->rank);
    if (a->count == 0 && s->nsteps != 0)
        sim_fail("rank %d: %u steps for count 0", r, s->nsteps);
    for (uint32_t i = 0; i < s->nsteps; i++) {
        const hc_step_t *st = &s->steps[i];
        if (st->kind == HC_STEP_DIV && (++ndiv, st->peer != n || st->len != a->count * 4))
            sim_fail("rank %d: DIV by %d over %zu bytes", r, st->peer, st->len);
    }
    if (sim_err[0] == '\0' && ndiv != want)
        sim_fail("rank %d: %d DIV steps, expected %d", r, ndiv, want);
}

static int setup(const tcase_t *tc, sim_t *sm, lay_t *lay)
{
    int n = tc->hs->nranks;

    for (int r = 0; r < n; r++) {
        sim_rank_t    *k  = &sm->rk[r];
        hc_sched_t    *s  = NULL;
        hcomm_status_t st = tc->leader ? hc_algo_hier_leader(&tc->a, &tc->hs->h, r, tc->chunk, &s)
                                       : hc_algo_hier(&tc->a, &tc->hs->h, r, tc->chunk, &s);
        if (st != HCOMM_SUCCESS) {
            sim_fail("rank %d: build failed: %s", r, hcomm_status_name(st));
            return -1;
        }
        lay[r] = sim_layout(&tc->a, n, r);
        sim_place(k, s, &lay[r], (lay[r].regsz + 15) / 16 * 16);
        check_struct(tc, r, s);
        if (sim_has_input(&tc->a, &lay[r], r)) {
            ref_fill(k->mem + lay[r].send_at, lay[r].sendsz / ref_esize(tc->a.dtype), tc->a.dtype,
                      r, 0);
            memset(k->def + lay[r].send_at, 1, lay[r].sendsz);
        }
    }
    return sim_err[0] != '\0' ? -1 : 0;
}

static void verify(const tcase_t *tc, sim_t *sm, const lay_t *lay, unsigned char *exp,
                   unsigned char *tmp)
{
    int    n  = tc->hs->nranks;
    size_t es = ref_esize(tc->a.dtype);

    for (int r = 0; r < n && sim_err[0] == '\0'; r++) {
        sim_rank_t *k   = &sm->rk[r];
        size_t      got = expect(&tc->a, n, r, exp, tmp);
        if (got != lay[r].recvsz) {
            sim_fail("rank %d: reference has %zu bytes, RECV %zu", r, got, lay[r].recvsz);
            break;
        }
        for (size_t b = 0; b < got && sim_err[0] == '\0'; b++) {
            if (!k->def[lay[r].recv_at + b])
                sim_fail("rank %d: output byte %zu never written", r, b);
            else if (k->mem[lay[r].recv_at + b] != exp[b])
                sim_fail("rank %d: element %zu wrong", r, b / es);
        }
        if (sim_err[0] == '\0' && !tc->a.in_place && sim_has_input(&tc->a, &lay[r], r)) {
            ref_fill(exp, lay[r].sendsz / es, tc->a.dtype, r, 0);
            if (memcmp(exp, k->mem + lay[r].send_at, lay[r].sendsz) != 0)
                sim_fail("rank %d: SEND was modified", r);
        }
    }
}

static uint64_t g_seed = 0x9e3779b97f4a7c15ull;
static unsigned g_runs;

static void run_case(const tcase_t *tc)
{
    sim_t          sm;
    lay_t          lay[SIM_MAXR];
    size_t         maxb = tc->a.count * 8 * SIM_MAXR + 16;
    unsigned char *exp = malloc(maxb), *tmp = malloc(maxb);
    int            n = tc->hs->nranks;

    assert_true(exp && tmp);
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    sim_begin(&sm, n, tc->eager, g_seed);
    if (setup(tc, &sm, lay) == 0 && sim_run(&sm) == 0)
        verify(tc, &sm, lay, exp, tmp);
    free(exp), free(tmp);
    sim_end(&sm);
    g_runs++;
    if (sim_err[0] != '\0')
        fail_msg("%s n=%d %s count=%zu dt=%d op=%d root=%d inplace=%d chunk=%zu eager=%d\n  -> %s",
                 tc->leader ? "leader" : "hier", n, hc_coll_name(tc->a.coll), tc->a.count,
                 tc->a.dtype, tc->a.op, tc->a.root, tc->a.in_place, tc->chunk, tc->eager, sim_err);
}

/* ---- the matrix ---- */

static const size_t count_list[] = {0, 1, 7, 1023, 10007};

static const struct {
    hcomm_dtype_t dt;
    hcomm_op_t    op;
} red_types[] = {{HCOMM_INT32, HCOMM_SUM}, {HCOMM_FLOAT32, HCOMM_SUM}, {HCOMM_INT32, HCOMM_AVG}};
static const hcomm_dtype_t move_types[] = {HCOMM_INT32, HCOMM_FLOAT64};

static void run_matrix(hc_coll_t coll, int leader)
{
    int reduces =
        coll == HC_COLL_ALLREDUCE || coll == HC_COLL_REDUCE || coll == HC_COLL_REDUCE_SCATTER;
    int      ntypes = reduces ? 3 : 2;
    unsigned before = g_runs;
    clock_t  t0     = clock();

    for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++) {
        hier_store_t hs;
        make_hier(&layouts[li], &hs);
        for (size_t ci = 0; ci < sizeof(count_list) / sizeof(count_list[0]); ci++) {
            for (int ti = 0; ti < ntypes; ti++) {
                for (int v = 0; v < 4; v++) { /* in place x chunk */
                    tcase_t tc = {.hs = &hs, .chunk = (v & 2) ? 256 * 1024 : 64, .leader = leader};
                    tc.a       = (hc_coll_args_t){
                              coll,
                              count_list[ci],
                        reduces ? red_types[ti].dt : move_types[ti],
                        reduces ? red_types[ti].op : HCOMM_SUM,
                              (int)((ci * 5 + (size_t)ti * 2 + (size_t)v) % (size_t)hs.nranks),
                              v & 1, NULL};
                    tc.eager = (int)((ci + (size_t)ti + (size_t)v) % 2);
                    run_case(&tc);
                }
            }
        }
    }
    print_message("%s/%s: %u runs, %.1f s\n", hc_coll_name(coll), leader ? "leader" : "hier",
                  g_runs - before, (double)(clock() - t0) / CLOCKS_PER_SEC);
}

static void test_allreduce(void **state)
{
    (void)state;
    run_matrix(HC_COLL_ALLREDUCE, 0);
}
/* The leaders' allreduce, on the same layouts (folded leaders on 3 and 5 nodes). */
static void test_leader_allreduce(void **state)
{
    (void)state;
    run_matrix(HC_COLL_ALLREDUCE, 1);
}
static void test_broadcast(void **state)
{
    (void)state;
    run_matrix(HC_COLL_BROADCAST, 0);
}
static void test_reduce(void **state)
{
    (void)state;
    run_matrix(HC_COLL_REDUCE, 0);
}
static void test_allgather(void **state)
{
    (void)state;
    run_matrix(HC_COLL_ALLGATHER, 0);
}
static void test_reduce_scatter(void **state)
{
    (void)state;
    run_matrix(HC_COLL_REDUCE_SCATTER, 0);
}

/* Every root of broadcast and reduce on the uneven layout. */
static void test_all_roots(void **state)
{
    hier_store_t hs;
    (void)state;
    make_hier(&layouts[3], &hs);
    for (int root = 0; root < hs.nranks; root++)
        for (int v = 0; v < 4; v++) {
            tcase_t tc = {.hs = &hs, .chunk = 64, .eager = v >> 1};
            tc.a       = (hc_coll_args_t){(v & 1) ? HC_COLL_REDUCE : HC_COLL_BROADCAST,
                                    301,
                                    HCOMM_INT32,
                                    (v & 1) ? HCOMM_AVG : HCOMM_SUM,
                                    root,
                                    root % 2,
                                    NULL};
            run_case(&tc);
        }
}

/* Bad hierarchies and unsupported collectives are refused. */
static void test_refused(void **state)
{
    hier_store_t   hs;
    hc_sched_t    *s = NULL;
    hc_coll_args_t a = {HC_COLL_ALLREDUCE, 8, HCOMM_INT32, HCOMM_SUM, 0, 0, NULL};
    (void)state;
    make_hier(&layouts[1], &hs);
    assert_int_equal(hc_algo_hier(&a, &hs.h, 6, 64, &s), HCOMM_ERR_INVALID_ARG);
    hs.node_ranks[1] = 0; /* rank 0 twice, rank 1 missing */
    assert_int_equal(hc_algo_hier(&a, &hs.h, 0, 64, &s), HCOMM_ERR_INVALID_ARG);
    make_hier(&layouts[1], &hs);
    a.coll = HC_COLL_ALLTOALL;
    assert_int_equal(hc_algo_hier(&a, &hs.h, 0, 64, &s), HCOMM_ERR_UNSUPPORTED);
    a.coll = HC_COLL_BROADCAST;
    assert_int_equal(hc_algo_hier_leader(&a, &hs.h, 0, 64, &s), HCOMM_ERR_UNSUPPORTED);
    a.coll = HC_COLL_REDUCE, a.root = 6;
    assert_int_equal(hc_algo_hier(&a, &hs.h, 0, 64, &s), HCOMM_ERR_INVALID_RANK);
    assert_null(s);
}

int main(void)
{
    const char *seed = getenv("HC_TEST_SEED");
    if (seed != NULL)
        g_seed ^= strtoull(seed, NULL, 0) * 0x2545f4914f6cdd1dull;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce),  cmocka_unit_test(test_leader_allreduce),
        cmocka_unit_test(test_broadcast),  cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_allgather),  cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_all_roots),  cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
