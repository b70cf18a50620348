/* test_sched_a2a.c - the hierarchical alltoall (hc_algo_hier_alltoall) on plans
 * from hc_cluster_synthetic + hc_plan_hier: 1..5 nodes x 1..4 ranks, block and
 * round-robin placement, counts, chunk sizes, in place or not, several types,
 * run by the executor simulator (sched_sim.c) and compared with the serial
 * result; the cross-node messages counted in the schedules against pairwise
 * exchange; uneven nodes refused; the alltoall cost model. HC_TEST_SEED=N
 * explores other interleavings. */
#include <math.h>
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
#include "sched_sim.h"
#include "topology/cost.h"
#include "topology/plan.h"

/* ---- shapes ---- */

typedef struct shape {
    hc_cluster_t *c;
    hc_hier_t     h;
    int           n;
} shape_t;

static void shape_make(shape_t *sh, int nnodes, int ppn, int rr)
{
    assert_int_equal(hc_cluster_synthetic(nnodes, ppn, 1, rr, &sh->c), HCOMM_SUCCESS);
    assert_int_equal(hc_plan_hier(sh->c, &sh->h), HCOMM_SUCCESS);
    sh->n = nnodes * ppn;
}

static void shape_free(shape_t *sh)
{
    hc_plan_hier_free(&sh->h);
    hc_cluster_destroy(sh->c);
}

/* ---- one simulated case ---- */

typedef struct tcase {
    const shape_t *sh;
    hc_coll_args_t a;
    size_t         chunk;
    int            eager;
    int            mixed; /* odd ranks in place, even ones not (NCCL lets each rank choose) */
} tcase_t;

static hc_coll_args_t rank_args(const tcase_t *tc, int r)
{
    hc_coll_args_t a = tc->a;
    if (tc->mixed)
        a.in_place = r % 2;
    return a;
}

/* Element i of rank r's SEND: distinct enough that a misplaced block shows. */
static void put_val(void *buf, size_t i, int dt, int r, size_t gi)
{
    long v = (long)(((uint64_t)(r + 1) * 2654435761u + gi * 40503u) % 100003u);
    ref_store(buf, i, dt, dt == HCOMM_INT8 ? v % 251 - 125 : v);
}

static hc_sched_t *build(const tcase_t *tc, int r)
{
    hc_sched_t    *s  = NULL;
    hc_coll_args_t a  = rank_args(tc, r);
    hcomm_status_t st = hc_algo_hier_alltoall(&a, &tc->sh->h, r, tc->chunk, &s);
    if (st != HCOMM_SUCCESS) {
        sim_fail("rank %d: build failed: %s", r, hcomm_status_name(st));
        return NULL;
    }
    if (s->nbufs != HC_BUF_PER_OP || s->nranks != tc->sh->n || s->rank != r)
        sim_fail("rank %d: schedule header nbufs %u nranks %d rank %d", r, s->nbufs, s->nranks,
                 s->rank);
    if (tc->a.count == 0 && s->nsteps != 0)
        sim_fail("rank %d: %u steps for count 0", r, s->nsteps);
    return s;
}

static int setup(const tcase_t *tc, sim_t *sm, lay_t *lay)
{
    int    n  = tc->sh->n;
    size_t es = ref_esize(tc->a.dtype);

    for (int r = 0; r < n; r++) {
        sim_rank_t *k = &sm->rk[r];
        hc_sched_t    *s = build(tc, r);
        hc_coll_args_t a = rank_args(tc, r);
        if (s == NULL)
            return -1;
        lay[r] = sim_layout(&a, n, r);
        sim_place(k, s, &lay[r], (lay[r].regsz + 15) / 16 * 16);
        for (size_t i = 0; i < lay[r].sendsz / es; i++)
            put_val(k->mem + lay[r].send_at, i, tc->a.dtype, r, i);
        memset(k->def + lay[r].send_at, 1, lay[r].sendsz);
    }
    return sim_err[0] != '\0' ? -1 : 0;
}

/* RECV block q of rank r is block r of rank q's SEND; SEND untouched out of place. */
static void verify(const tcase_t *tc, sim_t *sm, const lay_t *lay, unsigned char *exp)
{
    int    n = tc->sh->n, dt = tc->a.dtype;
    size_t es = ref_esize(dt), cnt = tc->a.count;

    for (int r = 0; r < n && sim_err[0] == '\0'; r++) {
        sim_rank_t *k = &sm->rk[r];
        for (int q = 0; q < n; q++)
            for (size_t e = 0; e < cnt; e++)
                put_val(exp, (size_t)q * cnt + e, dt, q, (size_t)r * cnt + e);
        for (size_t b = 0; b < lay[r].recvsz && sim_err[0] == '\0'; b++) {
            if (!k->def[lay[r].recv_at + b])
                sim_fail("rank %d: output byte %zu never written", r, b);
            else if (k->mem[lay[r].recv_at + b] != exp[b])
                sim_fail("rank %d: element %zu (block %zu) wrong", r, b / es, b / es / cnt);
        }
        if (sim_err[0] != '\0' || rank_args(tc, r).in_place)
            continue;
        for (size_t i = 0; i < lay[r].sendsz / es; i++)
            put_val(exp, i, dt, r, i);
        if (memcmp(exp, k->mem + lay[r].send_at, lay[r].sendsz) != 0)
            sim_fail("rank %d: SEND was modified", r);
    }
}

static uint64_t g_seed = 0x9e3779b97f4a7c15ull;
static unsigned g_runs;

static void run_case(const tcase_t *tc)
{
    sim_t          sm;
    lay_t          lay[SIM_MAXR];
    int            n   = tc->sh->n;
    unsigned char *exp = malloc(tc->a.count * 8 * (size_t)n + 16);

    assert_true(exp != NULL);
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    sim_begin(&sm, n, tc->eager, g_seed);
    if (setup(tc, &sm, lay) == 0 && sim_run(&sm) == 0)
        verify(tc, &sm, lay, exp);
    free(exp);
    sim_end(&sm);
    g_runs++;
    if (sim_err[0] != '\0')
        fail_msg("alltoall/hier %d nodes x %d count=%zu dt=%d inplace=%d%s chunk=%zu eager=%d\n"
                 "  -> %s",
                 tc->sh->h.nnodes, n / tc->sh->h.nnodes, tc->a.count, tc->a.dtype, tc->a.in_place,
                 tc->mixed ? " (odd ranks)" : "", tc->chunk, tc->eager, sim_err);
}

/* ---- exact results ---- */

static const size_t        count_list[] = {0, 1, 7, 1000};
static const size_t        chunk_list[] = {0, 64, 1000, 256 * 1024};
static const hcomm_dtype_t dt_list[]    = {HCOMM_INT32, HCOMM_INT8, HCOMM_FLOAT64, HCOMM_FLOAT32};

/* Every shape of 1..5 nodes x 1..4 ranks the simulator holds, for placement rr;
 * per shape every count x in place x two chunk sizes, types and eagerness
 * rotating through the lists. */
static void run_shapes(int rr)
{
    unsigned before = g_runs, skipped = 0;
    clock_t  t0 = clock();

    for (int nn = 1; nn <= 5; nn++)
        for (int ppn = 1; ppn <= 4; ppn++) {
            shape_t sh;
            if (nn * ppn > SIM_MAXR) {
                skipped++;
                continue;
            }
            shape_make(&sh, nn, ppn, rr);
            for (size_t ci = 0; ci < sizeof(count_list) / sizeof(count_list[0]); ci++)
                for (int v = 0; v < 4; v++) {
                    size_t  x  = ci * 4 + (size_t)v + (size_t)nn + (size_t)ppn;
                    tcase_t tc = {.sh = &sh, .eager = (int)(x % 2)};
                    tc.chunk   = chunk_list[(v >> 1) * 2 + (int)((x / 2) % 2)];
                    tc.a       = (hc_coll_args_t){HC_COLL_ALLTOALL,
                                                  count_list[ci],
                                                  dt_list[x % 4],
                                                  HCOMM_SUM,
                                                  0,
                                                  v & 1,
                                                  NULL};
                    run_case(&tc);
                }
            shape_free(&sh);
        }
    print_message("alltoall/hier %s: %u runs, %u shapes over %d ranks skipped, %.1f s\n",
                  rr ? "round-robin" : "block", g_runs - before, skipped, SIM_MAXR,
                  (double)(clock() - t0) / CLOCKS_PER_SEC);
}

static void test_block(void **state)
{
    (void)state;
    run_shapes(0);
}

static void test_round_robin(void **state)
{
    (void)state;
    run_shapes(1);
}

/* Every chunk size and type on the benchmark's shape, 4 nodes x 2 round-robin,
 * and on 3 x 3; both eager and rendezvous. */
static void test_chunks(void **state)
{
    static const int shapes[][2] = {{4, 2}, {3, 3}, {2, 4}};
    (void)state;
    for (size_t si = 0; si < 3; si++) {
        shape_t sh;
        shape_make(&sh, shapes[si][0], shapes[si][1], 1);
        for (size_t ch = 0; ch < sizeof(chunk_list) / sizeof(chunk_list[0]); ch++)
            for (size_t d = 0; d < sizeof(dt_list) / sizeof(dt_list[0]); d++)
                for (int v = 0; v < 4; v++) {
                    tcase_t tc = {.sh = &sh, .chunk = chunk_list[ch], .eager = v >> 1};
                    tc.a       = (hc_coll_args_t){
                              HC_COLL_ALLTOALL, 1000, dt_list[d], HCOMM_SUM, 0, v & 1, NULL};
                    run_case(&tc);
                }
        shape_free(&sh);
    }
}

/* Pieces of 16 KiB and more move inside a node one message each: large
 * blocks, and int8 chunks of 16384 and 16383 bytes (the threshold inside one
 * build), on round-robin and block placements. */
static void test_big_pieces(void **state)
{
    static const int shapes[][3] = {{4, 2, 1}, {3, 3, 1}, {2, 4, 0}, {2, 2, 1}, {3, 1, 1}};
    (void)state;
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
        shape_t sh;
        size_t  p = (size_t)shapes[si][1];
        shape_make(&sh, shapes[si][0], shapes[si][1], shapes[si][2]);
        for (int v = 0; v < 12; v++) { /* 8..11: half the ranks in place, eager or not */
            tcase_t tc = {.sh = &sh, .eager = v >= 8 ? v & 1 : (v >> 1) & 1, .mixed = v >= 8};
            if (v < 4 || v >= 10) /* K = 2: pieces of 16384 and 16383 bytes */
                tc.chunk = p * p * 16384,
                tc.a     = (hc_coll_args_t){
                        HC_COLL_ALLTOALL, 32767, HCOMM_INT8, HCOMM_SUM, 0, v & 1, NULL};
            else
                tc.chunk = (v >> 1) & 1 ? 0 : 256 * 1024,
                tc.a     = (hc_coll_args_t){
                        HC_COLL_ALLTOALL, 20000, HCOMM_INT32, HCOMM_SUM, 0, v & 1, NULL};
            run_case(&tc);
        }
        shape_free(&sh);
    }
}

/* ---- messages across nodes ---- */

typedef struct xcount {
    size_t msgs, bytes, most, least; /* most/least: cross sends of one rank */
} xcount_t;

/* Sends whose peer is on another node, over every rank's schedule. */
static xcount_t count_cross(const shape_t *sh, const hc_coll_args_t *a, size_t chunk, int hier)
{
    xcount_t x = {0, 0, 0, SIZE_MAX};

    for (int r = 0; r < sh->n; r++) {
        hc_sched_t    *s    = NULL;
        size_t         mine = 0;
        hcomm_status_t st   = hier ? hc_algo_hier_alltoall(a, &sh->h, r, chunk, &s)
                                   : hc_algo_build(a, HC_ALGO_PAIRWISE, NULL, sh->n, r, chunk, &s);
        assert_int_equal(st, HCOMM_SUCCESS);
        for (uint32_t i = 0; i < s->nsteps; i++) {
            const hc_step_t *st2 = &s->steps[i];
            if (st2->kind == HC_STEP_SEND && sh->c->node_of[st2->peer] != sh->c->node_of[r])
                mine++, x.bytes += st2->len;
        }
        x.msgs += mine;
        x.most  = mine > x.most ? mine : x.most;
        x.least = mine < x.least ? mine : x.least;
        hc_sched_destroy(s);
    }
    return x;
}

static size_t ceil_div(size_t a, size_t b)
{
    return a / b + (a % b != 0);
}

/* N (N - 1) messages per chunk of the forwarded message, p^2 fewer than
 * pairwise when unchunked, the same bytes; the ranks of a node forward
 * floor or ceil of (N - 1) / p node pairs each when unchunked, and at most
 * min(K % p, (N - 1) % p) chunks more than one another. 5 x 4 is checked here
 * too. */
static void test_cross_messages(void **state)
{
    static const size_t counts[] = {1, 7, 1000}, chunks[] = {0, 64, 4096};
    (void)state;
    for (int nn = 2; nn <= 5; nn++)
        for (int ppn = 1; ppn <= 4; ppn++)
            for (int rr = 0; rr < 2; rr++) {
                shape_t sh;
                size_t  N = (size_t)nn, p = (size_t)ppn;
                shape_make(&sh, nn, ppn, rr);
                for (size_t ci = 0; ci < 3; ci++)
                    for (size_t hi = 0; hi < 3; hi++) {
                        hc_coll_args_t a = {HC_COLL_ALLTOALL, counts[ci], HCOMM_INT32, HCOMM_SUM, 0,
                                            (int)(hi % 2),    NULL};
                        size_t         ce = chunks[hi] ? chunks[hi] / 4 : SIZE_MAX;
                        size_t         m  = ce / (p * p) ? ce / (p * p) : 1;
                        size_t         K = ceil_div(a.count, m), Kp = ceil_div(a.count, ce);
                        xcount_t       h = count_cross(&sh, &a, chunks[hi], 1);
                        xcount_t       w = count_cross(&sh, &a, chunks[hi], 0);
                        assert_int_equal(h.msgs, N * (N - 1) * K);
                        assert_int_equal(w.msgs, p * p * N * (N - 1) * Kp);
                        assert_int_equal(h.bytes, w.bytes);
                        if (K == 1) { /* node pairs spread over the ranks */
                            assert_int_equal(h.most, ceil_div(N - 1, p));
                            assert_int_equal(h.least, (N - 1) / p);
                        } /* chunks of every pair too */
                        size_t kr = K % p, jr = (N - 1) % p;
                        assert_true(h.most - h.least <= (kr < jr ? kr : jr));
                        if (chunks[hi] == 0)
                            assert_int_equal(h.msgs * p * p, w.msgs);
                    }
                shape_free(&sh);
            }
}

/* ---- refused ---- */

static void test_refused(void **state)
{
    /* nodes {1, 2} and {0}: uneven */
    int            nf[3] = {0, 2, 3}, nr[3] = {1, 2, 0}, rf[3] = {0, 2, 3}, rk[3] = {1, 0, 2};
    hc_hier_t      h = {2, 2, nf, nr, rf, rk, 2};
    hc_coll_args_t a = {HC_COLL_ALLTOALL, 8, HCOMM_INT32, HCOMM_SUM, 0, 0, NULL};
    hc_sched_t    *s = NULL;
    shape_t        sh;
    (void)state;
    for (int r = 0; r < 3; r++)
        assert_int_equal(hc_algo_hier_alltoall(&a, &h, r, 64, &s), HCOMM_ERR_UNSUPPORTED);
    shape_make(&sh, 3, 2, 1);
    assert_int_equal(hc_algo_hier_alltoall(&a, &sh.h, 6, 64, &s), HCOMM_ERR_INVALID_ARG);
    sh.h.node_ranks[1] = sh.h.node_ranks[0]; /* a rank twice, one missing */
    assert_int_equal(hc_algo_hier_alltoall(&a, &sh.h, 0, 64, &s), HCOMM_ERR_INVALID_ARG);
    shape_free(&sh);
    shape_make(&sh, 3, 2, 1);
    a.coll = HC_COLL_ALLREDUCE;
    assert_int_equal(hc_algo_hier_alltoall(&a, &sh.h, 0, 64, &s), HCOMM_ERR_UNSUPPORTED);
    a.coll = HC_COLL_ALLTOALL, a.dtype = (hcomm_dtype_t)99;
    assert_int_equal(hc_algo_hier_alltoall(&a, &sh.h, 0, 64, &s), HCOMM_ERR_INVALID_DTYPE);
    a.dtype = HCOMM_INT32, a.count = SIZE_MAX / 8;
    assert_int_equal(hc_algo_hier_alltoall(&a, &sh.h, 0, 64, &s), HCOMM_ERR_OVERFLOW);
    a.count = SIZE_MAX / 4 / 6 / 2; /* fits SEND, not the scratch buffer */
    assert_int_equal(hc_algo_hier_alltoall(&a, &sh.h, 0, 64, &s), HCOMM_ERR_OVERFLOW);
    assert_null(s);
    shape_free(&sh);
}

/* ---- cost model ---- */

static void test_cost(void **state)
{
    hc_cluster_t *c;
    (void)state;
    assert_int_equal(hc_cluster_synthetic(4, 2, 1, 1, &c), HCOMM_SUCCESS);
    assert_true(c->link[HC_LINK_CROSS_NODE].alpha_us == 10.0);
    for (size_t b = 1024; b <= 16 * 1024; b *= 4) {
        double hier = hc_cost_alltoall_us(c, 1, b), pair = hc_cost_alltoall_us(c, 0, b);
        print_message("4 x 2, %6zu B per peer: pairwise %8.1f us, hier %8.1f us\n", b, pair, hier);
        assert_true(hier > 0 && hier < pair);
        assert_true(hc_cost_alltoall_us(c, 1, 2 * b) > hier);
        assert_true(hc_cost_alltoall_us(c, 0, 2 * b) > pair);
    }
    assert_true(hc_cost_alltoall_us(c, 0, 1024) > 1.5 * hc_cost_alltoall_us(c, 1, 1024));
    /* large: the same bytes on the link, hier's local copies on top */
    assert_true(hc_cost_alltoall_us(c, 1, 1 << 20) > hc_cost_alltoall_us(c, 0, 1 << 20));
    assert_true(hc_cost_alltoall_us(c, 1, 0) == 0 && hc_cost_alltoall_us(c, 0, 0) == 0);
    hc_cluster_destroy(c);
    /* one node, or one rank per node: the same exchange either way */
    assert_int_equal(hc_cluster_synthetic(1, 4, 1, 0, &c), HCOMM_SUCCESS);
    assert_true(hc_cost_alltoall_us(c, 1, 4096) == hc_cost_alltoall_us(c, 0, 4096));
    hc_cluster_destroy(c);
    assert_int_equal(hc_cluster_synthetic(4, 1, 1, 0, &c), HCOMM_SUCCESS);
    assert_true(hc_cost_alltoall_us(c, 1, 4096) == hc_cost_alltoall_us(c, 0, 4096));
    hc_cluster_destroy(c);
    /* nodes of 1 and 3 ranks: hier cannot be built, so it is never the cheaper */
    assert_int_equal(hc_cluster_synthetic(2, 2, 1, 0, &c), HCOMM_SUCCESS);
    assert_true(hc_cluster_nodes_equal(c));
    c->node_first[1] = 1;
    assert_false(hc_cluster_nodes_equal(c));
    assert_true(isinf(hc_cost_alltoall_us(c, 1, 64)) && isfinite(hc_cost_alltoall_us(c, 0, 64)));
    hc_cluster_destroy(c);
}

int main(void)
{
    const char *seed = getenv("HC_TEST_SEED");
    if (seed != NULL)
        g_seed ^= strtoull(seed, NULL, 0) * 0x2545f4914f6cdd1dull;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block),          cmocka_unit_test(test_round_robin),
        cmocka_unit_test(test_chunks),         cmocka_unit_test(test_big_pieces),
        cmocka_unit_test(test_cross_messages), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
