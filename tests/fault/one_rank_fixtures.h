/* one_rank_fixtures.h - cmocka fixtures of the bad-input tests: a one-rank
 * communicator per test (setup_comm / teardown_comm) or none (setup_plain /
 * teardown_plain), each test under an alarm of TEST_ALARM_S seconds, which
 * the program defines. cmocka.h comes first. */
#ifndef HCT_ONE_RANK_FIXTURES_H
#define HCT_ONE_RANK_FIXTURES_H

#include <unistd.h>

#include "hcomm.h"

static inline hcomm_comm_t new_comm1(void)
{
    hcomm_unique_id_t id;
    hcomm_comm_t      c = NULL;

    assert_int_equal(hcomm_get_unique_id(&id), HCOMM_SUCCESS);
    assert_int_equal(hcomm_comm_init(&c, 1, &id, 0), HCOMM_SUCCESS);
    assert_non_null(c);
    return c;
}

static inline int setup_comm(void **state)
{
    alarm(TEST_ALARM_S);
    *state = new_comm1();
    return 0;
}

static inline int teardown_comm(void **state)
{
    hcomm_status_t st = hcomm_comm_destroy((hcomm_comm_t)*state);
    alarm(0);
    return st == HCOMM_SUCCESS ? 0 : -1;
}

static inline int setup_plain(void **state)
{
    (void)state;
    alarm(TEST_ALARM_S);
    return 0;
}

static inline int teardown_plain(void **state)
{
    (void)state;
    alarm(0);
    return 0;
}

#endif
