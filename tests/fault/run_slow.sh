#!/bin/sh
# run_slow.sh - which rank is slow: a rank slowed by a SIGSTOP/SIGCONT duty
# cycle (tests/fault/slow.c) is named by rank 0's Grubbs test, in its warn
# line and through hcomm_comm_get_health, within 60 collectives of 50 ms of
# compute, also when traced; clean runs, one of 10,000 back-to-back
# collectives judged every 100 ms (HCOMM_HEALTH_PERIOD's minimum), name no one.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" prog="$top/tests/fault/slow"
need "$run" "$prog"
scratch slow

# slowed N RANK FACTOR: rank RANK of N, FACTOR times slower, is named
slowed() {
    try 180 "$run" -n "$1" "$prog" 150 50 "$2" "$3"
    test $? = 0 && has "slow rank $2 (host [^)]*): it enters collectives .* ms after the median" &&
        first=$(sed -n 's/^slow: named .* first at step \([0-9]*\);.*/\1/p' "$out") &&
        [ "$first" -le 60 ]
}
slowed 4 2 1.5
result "4 ranks, rank 2 1.5x slower: named within 60 collectives ($(sed -n 's/^slow: //p' "$out"))" $?
slowed 8 5 1.3
result "8 ranks, rank 5 1.3x slower: named within 60 collectives ($(sed -n 's/^slow: //p' "$out"))" $?
# traced operations carry TSC ticks; their arrivals still count
try 180 HCOMM_TRACE_FILE="$tmp/trace-%r.json" "$run" -n 4 "$prog" 100 50 2 1.5
test $? = 0 && has "slow rank 2 (host [^)]*): it enters collectives"
result "4 ranks traced (HCOMM_TRACE_FILE), rank 2 1.5x slower: named ($(sed -n 's/^slow: //p' "$out"))" $?
try 180 "$run" -n 4 "$prog" 150 50 -1 1
test $? = 0 && ! has 'slow rank'
result "4 ranks, clean, 150 collectives 50 ms apart: no one named" $?
try 180 HCOMM_HEALTH_PERIOD=0.1 "$run" -n 4 "$prog" 10000 0 -1 1
test $? = 0 && ! has 'slow rank'
result "4 ranks, clean, 10000 collectives back to back, judged every 100 ms: no one named" $?
finish
