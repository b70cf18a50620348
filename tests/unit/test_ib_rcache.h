/* test_ib_rcache.h - the registration cache's cases (test_ib_rcache.c), run by
 * test_ib.c's main. */
#ifndef HC_TEST_IB_RCACHE_H
#define HC_TEST_IB_RCACHE_H

void test_rcache_hit_miss(void **state);
void test_rcache_overlap(void **state);
void test_rcache_lru(void **state);
void test_rcache_in_use(void **state);
void test_rcache_bytes(void **state);
void test_rcache_invalidate(void **state);
void test_rcache_reg_fails(void **state);
void test_rcache_keep_none(void **state);
void test_rcache_fini_in_use(void **state);

#endif
