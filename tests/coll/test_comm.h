/* test_comm.h - the communicator of a multi-process test program: from the
 * environment under hcomm-run, else a one-rank communicator of its own. */
#ifndef HC_TEST_COMM_H
#define HC_TEST_COMM_H

#include <stdlib.h>

#include "hcomm.h"

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
