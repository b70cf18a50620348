/* bootstrap_mpi.c - libhcomm-mpi: an hcomm communicator from an MPI one. */
#include "hcomm_mpi.h"

#include "base/log.h"

hcomm_status_t hcomm_comm_init_mpi(hcomm_comm_t *comm, MPI_Comm mpi_comm)
{
    int rank, size, rc;
    if (comm == NULL) {
        hc_error(INIT, "hcomm_comm_init_mpi: NULL comm pointer");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (MPI_Comm_rank(mpi_comm, &rank) != MPI_SUCCESS ||
        MPI_Comm_size(mpi_comm, &size) != MPI_SUCCESS) {
        hc_error(INIT, "hcomm_comm_init_mpi: not a valid MPI communicator");
        return HCOMM_ERR_INVALID_ARG;
    }
    hcomm_unique_id_t id = {{0}};
    hcomm_status_t    st = HCOMM_SUCCESS;
    if (rank == 0)
        st = hcomm_get_unique_id(&id);
    /* rank 0 broadcasts its status with the id, so a failure there fails everyone */
    struct {
        int               status;
        hcomm_unique_id_t id;
    } msg = {st, id};
    rc = MPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, mpi_comm);
    if (rc != MPI_SUCCESS) {
        hc_error(INIT, "hcomm_comm_init_mpi: MPI_Bcast of the unique id failed (%d)", rc);
        return HCOMM_ERR_SYSTEM;
    }
    if (msg.status != HCOMM_SUCCESS) {
        hc_error(INIT, "hcomm_comm_init_mpi: rank 0 could not create a unique id: %s",
                 hcomm_status_str((hcomm_status_t)msg.status));
        return (hcomm_status_t)msg.status;
    }
    return hcomm_comm_init(comm, size, &msg.id, rank);
}
