#!/bin/sh
# run_mpi.sh - hcomm-perf launched by mpirun: MPI only bootstraps (libhcomm-mpi),
# the collectives run over hcomm's transports and must be exact; then the NCCL
# API suite (nccl_check_mpi) on libnccl.so.2 under mpirun. SKIPs when this
# build has no MPI: make check passes configure's mpirun (need_mpi in
# tests/test_lib.sh); by hand set HC_TEST_MPIRUN=mpirun.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
perf="$top/perf/hcomm-perf" ncclmpi="$top/tests/shim/nccl_check_mpi"
need_mpi
need "$perf"
export HCOMM_TIMEOUT=60
scratch mpi
for coll in all_reduce all_gather broadcast alltoall; do
    try 120 "$mpirun" --oversubscribe -np 3 "$perf" "$coll" -b 8 -e 256K -f 8 -n 2 -w 1 -d all &&
        perf_ok
    result "mpirun -np 3 hcomm-perf $coll" $?
done
# the NCCL API suite under mpirun: the unique id goes out with MPI_Bcast
if [ -x "$ncclmpi" ]; then
    for n in 1 2 3; do
        try 300 "$mpirun" --oversubscribe -np "$n" "$ncclmpi" &&
            [ "$(grep -c ': PASS (0 failures)' "$out")" -eq "$n" ]
        result "mpirun -np $n nccl_check_mpi" $?
    done
else
    result "nccl_check_mpi: $ncclmpi not built" 77
fi
finish
