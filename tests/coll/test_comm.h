/* test_comm.h - the communicator of a multi-process test program: from the
 * environment under hcomm-run, else a one-rank communicator of its own. */
#ifndef HC_TEST_COMM_H
#define HC_TEST_COMM_H

#include <stdio.h>
#include <stdlib.h>

#include "hcomm.h"

/* Counts a check and prints the failed ones with the rank and line; the
 * program defines int g_rank, g_failed, g_checks. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        g_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            g_failed++;                                                                            \
            printf("FAIL rank %d line %d: ", g_rank, __LINE__);                                    \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static inline hcomm_status_t test_comm_init(hcomm_comm_t *comm, int *rank, int *nranks)
{
    hcomm_status_t st;

    if (getenv("HCOMM_NRANKS") != NULL) {
        st = hcomm_comm_init_env(comm);
    } else {
        hcomm_unique_id_t id;
        st = hcomm_get_unique_id(&id);
        if (st == HCOMM_SUCCESS)
            st = hcomm_comm_init(comm, 1, &id, 0);
    }
    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_rank(*comm, rank);
    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_size(*comm, nranks);
    return st;
}

#endif
