#!/bin/sh
# run_device.sh - collectives on buffers of another memory kind (device_check):
# the test kind, which faults unless reached through the memory kinds' copies,
# on 1 to 5 ranks over shm and tcp and on 3 over ofi and ucx (tcp); every
# rank's buffers, even ranks' only (a mixed communicator), send or receive
# buffer only, nonblocking, on a stream, in place, several staging chunks, and
# the calls that refuse such memory. Where a GPU answers, the same on CUDA
# device memory (device_check_cuda) and the device reductions.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/device_check"
need "$run" "$check"
export HCOMM_TIMEOUT=60
scratch device
try 120 "$check"
result "device_check on 1 rank" $?
for v in shm tcp ofi-tcp ucx-tcp; do
    why=$(tl_unusable "$v")
    if [ -n "$why" ]; then
        result "device_check over $v: $why" 77
        continue
    fi
    case $v in shm | tcp) counts="2 3 5" ;; *) counts=3 ;; esac
    for n in $counts; do
        # shellcheck disable=SC2046 # the variant's assignments, one word each
        try 300 $(variant_env "$v") "$run" -n "$n" "$check" &&
            [ "$(grep -c 'checks passed' "$out")" -eq "$n" ]
        result "device_check on $n ranks over $v" $?
    done
done
# CUDA: built where configure found CUDA, run where a GPU is
cuda="$top/tests/coll/cuda_reduce_check"
if [ ! -x "$cuda" ]; then
    result "CUDA device memory: this build has no CUDA (configure did not find it)" 77
    finish
fi
try 300 "$cuda"
rc=$?
if has '^SKIP'; then
    result "CUDA device memory: $(grep -m1 '^SKIP' "$out" | sed 's/^SKIP: *//')" 77
    finish
fi
result "device reductions against the host kernels, every dtype and op" $rc
# the collectives on CUDA device memory, the ranks sharing the GPUs there are
check="$top/tests/coll/device_check_cuda"
try 300 "$check"
result "device_check on CUDA memory, 1 rank" $?
for v in shm tcp; do
    for n in 2 4; do
        # shellcheck disable=SC2046 # the variant's assignments, one word each
        try 300 $(variant_env "$v") "$run" -n "$n" "$check" &&
            [ "$(grep -c 'checks passed' "$out")" -eq "$n" ]
        result "device_check on CUDA memory, $n ranks over $v" $?
    done
done
finish
