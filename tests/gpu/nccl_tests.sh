#!/bin/sh
# nccl_tests.sh [TEST...] - NVIDIA's nccl-tests against hcomm's libnccl.so.2
# on a GPU machine, from a build of it in .devcarry/nccl-tests/bin (for the
# check only, never part of this tree), patched so that ranks share one GPU
# (device index modulo the device count) and so that processes started
# without MPI find each other (NCCL_TESTS_ID_FILE, _RANK, _NRANKS). Each test
# with its own checks (-c 1) on 1 rank, on 2 processes, and, with the NULL
# stream, on 2 threads of one process (-t 2 -p 1 -y 1) and on 2 ranks of one
# thread (-g 2 -y 1; the CUDA-stream forms of these wait on host functions,
# docs/devices.md).
top=$(cd "$(dirname "$0")/../.." && pwd)
bin="$top/.devcarry/nccl-tests/bin"
hang="$top/tests/gpu/hang_bt.sh" # a hang comes back with its backtraces
if [ ! -x "$bin/all_reduce_perf" ]; then
    echo "SKIP: no nccl-tests build in $bin"
    exit 77
fi
ldd "$bin/all_reduce_perf" | grep nccl
tests=${*:-"all_reduce broadcast reduce all_gather reduce_scatter alltoall sendrecv"}
args="-b 8 -e 64M -f 8 -c 1 -n 5 -w 2"
tmp=$(mktemp -d)
rc=0
# shellcheck disable=SC2086 # args: several words
for t in $tests; do
    echo "== ${t}_perf, 1 rank"
    sh "$hang" 60 "$bin/${t}_perf" $args || rc=1
    echo "== ${t}_perf, 2 processes"
    rm -f "$tmp/id"
    NCCL_TESTS_ID_FILE="$tmp/id" NCCL_TESTS_NRANKS=2 NCCL_TESTS_RANK=1 \
        timeout -k 5 60 "$bin/${t}_perf" $args > "$tmp/rank1" 2>&1 &
    NCCL_TESTS_ID_FILE="$tmp/id" NCCL_TESTS_NRANKS=2 NCCL_TESTS_RANK=0 \
        sh "$hang" 60 "$bin/${t}_perf" $args || rc=1
    wait $! || { rc=1; echo "rank 1 failed:"; tail -5 "$tmp/rank1"; }
done
for ranks in "-t 2 -p 1" "-g 2"; do
    echo "== all_reduce_perf $ranks, NULL stream"
    # shellcheck disable=SC2086 # args, ranks: words
    sh "$hang" 60 "$bin/all_reduce_perf" $args $ranks -y 1 || rc=1
done
rm -rf "$tmp"
exit $rc
