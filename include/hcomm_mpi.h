/*
 * hcomm_mpi.h - create an hcomm communicator from an MPI communicator. MPI is
 * used for bootstrap only (one MPI_Bcast of the unique id); every collective then
 * runs over hcomm's own transports. Link with -lhcomm-mpi -lhcomm.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef HCOMM_MPI_H
#define HCOMM_MPI_H

#include <mpi.h>

#include "hcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over mpi_comm: its rank 0 creates the unique id and broadcasts it;
 * every rank joins with its MPI rank and size. */
hcomm_status_t hcomm_comm_init_mpi(hcomm_comm_t *comm, MPI_Comm mpi_comm);

#ifdef __cplusplus
}
#endif
#endif
