#!/bin/sh
# run_device.sh - collectives on buffers of another memory kind (device_check):
# the test kind, which faults unless reached through the memory kinds' copies,
# on 1 to 5 ranks over shm and tcp; every rank's buffers, even ranks' only
# (a mixed communicator), send or receive buffer only, nonblocking, on a
# stream, in place, and the calls that refuse such memory.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/device_check"
need "$run" "$check"
export HCOMM_TIMEOUT=60
scratch device
try 120 "$check"
result "device_check on 1 rank" $?
for t in shm tcp; do
    for n in 2 3 5; do
        try 300 HCOMM_TRANSPORT=$t "$run" -n "$n" "$check" &&
            [ "$(grep -c 'checks passed' "$out")" -eq "$n" ]
        result "device_check on $n ranks over $t" $?
    done
done
finish
