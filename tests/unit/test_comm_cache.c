/* test_comm_cache.c - a communicator's schedule cache and the fused group
 * schedules kept beside it (core/comm_cache.c), on a communicator of no
 * transport: a repeat finds its schedule; a kept group is found by all its
 * calls' schedules in order; any eviction from the schedule cache drops every
 * kept group (their keys are schedule addresses, which a freed schedule may
 * give to another shape); the group cache evicts its least recently used one,
 * and refuses while a request is queued or when its key cannot be kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/comm.h"

static struct hcomm_comm comm;

static void comm_setup(void)
{
    memset(&comm, 0, sizeof(comm));
    comm.rank = 0, comm.nranks = 2, comm.timing = HC_ALGO_AUTO;
}

/* The cached schedule of a call (send/recv to rank 1, or an allreduce). */
static hc_sched_t *sched_of(hc_coll_t coll, size_t count)
{
    hc_coll_args_t a = {.coll = coll, .count = count, .dtype = HCOMM_FLOAT32, .op = HCOMM_SUM,
                        .root = coll == HC_COLL_ALLREDUCE ? 0 : 1};
    hc_sched_t    *s = NULL;
    int            owned = 1;
    assert_int_equal(hc_comm_get_sched(&comm, &a, &s, &owned), HCOMM_SUCCESS);
    assert_non_null(s);
    assert_int_equal(owned, 0);
    return s;
}

/* A schedule the group cache may own (any will do: it is only kept and freed). */
static hc_sched_t *fused(size_t count)
{
    hc_coll_args_t a = {.coll = HC_COLL_SEND, .count = count, .dtype = HCOMM_UINT8, .root = 1};
    hc_plans_t     plans;
    hc_sched_t    *s = NULL;
    memset(&plans, 0, sizeof(plans));
    assert_int_equal(hc_algo_build(&a, HC_ALGO_DIRECT, &plans, 2, 0, 0, &s), HCOMM_SUCCESS);
    return s;
}

static void test_repeat_finds_its_schedule(void **st)
{
    (void)st;
    comm_setup();
    hc_sched_t *send = sched_of(HC_COLL_SEND, 4), *recv = sched_of(HC_COLL_RECV, 4);
    assert_ptr_not_equal(send, recv);
    /* alternating calls (a group's) find theirs, not the last call's */
    for (int i = 0; i < 3; i++) {
        assert_ptr_equal(sched_of(HC_COLL_SEND, 4), send);
        assert_ptr_equal(sched_of(HC_COLL_RECV, 4), recv);
    }
    assert_ptr_not_equal(sched_of(HC_COLL_SEND, 5), send);
    assert_int_equal(comm.ncache, 3);
    hc_comm_cache_clear(&comm);
    assert_int_equal(comm.ncache, 0);
}

static void test_group_key_is_every_call(void **st)
{
    (void)st;
    comm_setup();
    hc_sched_t *a = sched_of(HC_COLL_SEND, 4), *b = sched_of(HC_COLL_RECV, 4);
    hc_sched_t *c = sched_of(HC_COLL_RECV, 8), *m = fused(1);
    hc_sched_t *ab[] = {a, b}, *ac[] = {a, c}, *ba[] = {b, a}, *abc[] = {a, b, c};
    assert_int_equal(hc_comm_group_sched_keep(&comm, ab, 2, m), 1);
    assert_ptr_equal(hc_comm_group_sched_find(&comm, ab, 2), m);
    assert_null(hc_comm_group_sched_find(&comm, ac, 2));  /* same first call */
    assert_null(hc_comm_group_sched_find(&comm, ba, 2));  /* same calls, other order */
    assert_null(hc_comm_group_sched_find(&comm, abc, 3)); /* one more call */
    assert_null(hc_comm_group_sched_find(&comm, ab, 1));
    hc_comm_cache_clear(&comm);
    assert_int_equal(comm.ngroup_cache, 0);
}

/* The drop that keeps a freed member's address from matching a new shape. */
static void test_eviction_drops_groups(void **st)
{
    (void)st;
    comm_setup();
    hc_sched_t *a = sched_of(HC_COLL_SEND, 4), *b = sched_of(HC_COLL_RECV, 4);
    hc_sched_t *ab[] = {a, b};
    assert_int_equal(hc_comm_group_sched_keep(&comm, ab, 2, fused(1)), 1);
    /* fill the cache without touching a or b; the first eviction takes one */
    for (size_t k = 1; comm.ncache < HC_SCHED_CACHE_MAX; k++) {
        (void)sched_of(HC_COLL_ALLREDUCE, k);
        assert_non_null(hc_comm_group_sched_find(&comm, ab, 2));
    }
    (void)sched_of(HC_COLL_SEND, 100000);
    assert_int_equal(comm.ncache, HC_SCHED_CACHE_MAX);
    assert_int_equal(comm.ngroup_cache, 0);
    assert_null(hc_comm_group_sched_find(&comm, ab, 2));
    hc_comm_cache_clear(&comm);
}

static void test_group_cache_bounds(void **st)
{
    struct hcomm_request queued;
    hc_sched_t          *s[HC_GROUP_KEY_MAX + 1], *m[HC_GROUP_CACHE_MAX + 1];
    (void)st;
    comm_setup();
    for (int i = 0; i <= HC_GROUP_KEY_MAX; i++)
        s[i] = sched_of(HC_COLL_SEND, (size_t)i + 1);
    for (int i = 0; i <= HC_GROUP_CACHE_MAX; i++)
        m[i] = fused((size_t)i + 1);
    /* keys it cannot keep: too many calls, a call of an uncached schedule */
    assert_int_equal(hc_comm_group_sched_keep(&comm, s, HC_GROUP_KEY_MAX + 1, m[0]), 0);
    hc_sched_t *with_null[] = {s[0], NULL};
    assert_int_equal(hc_comm_group_sched_keep(&comm, with_null, 2, m[0]), 0);
    assert_int_equal(comm.ngroup_cache, 0);
    /* groups {s[i], s[i+1]}: the cache fills, then evicts the least recently
     * used (group 0 is found again, so group 1 goes) */
    for (int i = 0; i < HC_GROUP_CACHE_MAX; i++)
        assert_int_equal(hc_comm_group_sched_keep(&comm, &s[i], 2, m[i]), 1);
    assert_ptr_equal(hc_comm_group_sched_find(&comm, &s[0], 2), m[0]);
    comm.req_head = &queued; /* a queued request may hold a kept one */
    assert_int_equal(hc_comm_group_sched_keep(&comm, &s[HC_GROUP_CACHE_MAX], 2,
                                              m[HC_GROUP_CACHE_MAX]),
                     0);
    comm.req_head = NULL;
    assert_int_equal(hc_comm_group_sched_keep(&comm, &s[HC_GROUP_CACHE_MAX], 2,
                                              m[HC_GROUP_CACHE_MAX]),
                     1);
    assert_ptr_equal(hc_comm_group_sched_find(&comm, &s[0], 2), m[0]);
    assert_null(hc_comm_group_sched_find(&comm, &s[1], 2));
    assert_ptr_equal(hc_comm_group_sched_find(&comm, &s[HC_GROUP_CACHE_MAX], 2),
                     m[HC_GROUP_CACHE_MAX]);
    hc_comm_cache_clear(&comm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeat_finds_its_schedule),
        cmocka_unit_test(test_group_key_is_every_call),
        cmocka_unit_test(test_eviction_drops_groups),
        cmocka_unit_test(test_group_cache_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
