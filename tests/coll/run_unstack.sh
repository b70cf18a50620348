#!/bin/sh
# run_unstack.sh - two ranks started on one CPU: the higher one moves to the
# other CPU of its mask, and keeps its mask (shm_cpu.c); with
# HCOMM_SHM_UNSTACK=0 neither moves; under a one-CPU mask hcomm moves no one.
# The scheduler may part the pair before hcomm does: up to 3 launches.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/unstack_check"
need "$run" "$check"
export HCOMM_TIMEOUT=60 HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=shm HCOMM_TRANSPORT=shm
scratch unstack
kept() { [ "$(grep -c 'mask kept' "$out")" -eq 2 ]; }

try 120 "$run" -n 2 "$check" pin 2000
rc=$?
if has '^SKIP' "$out"; then # one CPU: each rank said so before init
    result "unstack: $(sed -n 's/^SKIP: *//p' "$out" | head -n 1)" 77
    finish
fi
for attempt in 1 2; do
    [ $rc = 0 ] && kept && has 'shared CPU .* moved to CPU' && break
    try 120 "$run" -n 2 "$check" pin 2000
    rc=$?
done
[ $rc = 0 ] && kept && has 'rank 1 shared CPU [0-9]* with rank 0: moved to CPU'
result "two ranks started on one CPU: rank 1 moved off it, both masks kept" $?

try 120 HCOMM_SHM_UNSTACK=0 "$run" -n 2 "$check" pin 2000 && kept && ! has 'moved to CPU'
result "HCOMM_SHM_UNSTACK=0: no rank moved" $?

if ! command -v taskset > /dev/null; then
    result "a one-CPU mask: taskset is missing" 77
else
    cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')
    try 120 taskset -c "$cpu" "$run" -n 2 "$check" as-is 2000 && kept && ! has 'moved to CPU'
    result "both ranks under a one-CPU mask (taskset -c $cpu): no rank moved" $?
fi
finish
