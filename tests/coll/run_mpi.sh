#!/bin/sh
# run_mpi.sh - hcomm-perf launched by mpirun: MPI only bootstraps (libhcomm-mpi),
# the collectives run over hcomm's transports and must be exact; then the NCCL
# API suite (nccl_check_mpi) on libnccl.so.2 under mpirun.
top=${top_builddir:-.}
perf="$top/perf/hcomm-perf"
mpirun=$(command -v mpirun.openmpi || command -v mpirun || true)
if [ -z "$mpirun" ]; then
    echo "SKIP: no mpirun on PATH"; exit 77
fi
if ! grep -q '"HAVE_MPI_TRUE"]=""' "$top/config.status" 2>/dev/null; then
    echo "SKIP: built without MPI (configure found no MPI)"; exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HCOMM_TIMEOUT=60
pass=0 fail=0
for coll in all_reduce all_gather broadcast alltoall; do
    if timeout 120 "$mpirun" --oversubscribe -np 3 "$perf" "$coll" -b 8 -e 256K -f 8 -n 2 -w 1 \
        -d all > /tmp/hcomm-run-mpi.$$ 2>&1 && grep -q 'Out of bounds values : 0 OK' /tmp/hcomm-run-mpi.$$; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL: mpirun -np 3 hcomm-perf $coll"; tail -20 /tmp/hcomm-run-mpi.$$
    fi
done
# the NCCL API suite under mpirun: the unique id goes out with MPI_Bcast
ncclmpi="$top/tests/shim/nccl_check_mpi"
for n in 1 2 3; do
    if [ ! -x "$ncclmpi" ]; then
        echo "SKIP: $ncclmpi not built"; break
    fi
    if timeout 300 "$mpirun" --oversubscribe -np "$n" "$ncclmpi" > /tmp/hcomm-run-mpi.$$ 2>&1 &&
        [ "$(grep -c ': PASS (0 failures)' /tmp/hcomm-run-mpi.$$)" -eq "$n" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL: mpirun -np $n nccl_check_mpi"; tail -20 /tmp/hcomm-run-mpi.$$
    fi
done
rm -f /tmp/hcomm-run-mpi.$$
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
