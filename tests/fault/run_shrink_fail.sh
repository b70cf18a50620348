#!/bin/sh
# run_shrink_fail.sh - hcomm_comm_shrink on a communicator that failed: a rank
# is killed (SIGKILL) during blocking allreduces or during one on a stream,
# and the survivors get a working communicator without it; in "agree" the
# first rank the survivors ask to coordinate dies too while they wait in the
# agreement, and they find both dead with nobody listed; in "late" a rank
# stays alive without joining while the coordinator starts late (tests/fault/
# shrink_fail.c); in "tardy" a rank asks after the others decided and
# aborted the failed communicator, and must be left out. Prints each case's time from the kill to the last survivor
# ready.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" prog="$top/tests/fault/shrink_fail"
need "$run" "$prog"
scratch shrink_fail

# case TL N MODE VICTIM SURVIVORS
case_() {
    try 120 HCOMM_TRANSPORT=$1 "$run" -k -n $2 "$prog" $3 $4
    [ "$(grep -c '^shrink_fail: rank [0-9]*: now rank .* sum right' "$out")" = $5 ]
}
# the seconds from the kill to the last survivor's first allreduce
took() {
    awk '/^shrink_fail: killed at/ { k = $4 } / ready at / { r = $NF > r ? $NF : r }
         END { printf "%.2f s", r - k }' "$out"
}
case_ shm 4 coll 3 3
result "shm, 4 ranks, rank 3 killed in an allreduce: 3 survivors shrink, sum right ($(took))" $?
case_ tcp 4 stream 2 3
result "tcp, 4 ranks, rank 2 killed during a stream's allreduce: 3 survivors ($(took))" $?
case_ shm 5 agree 3 3
result "shm, 5 ranks, rank 3 killed, rank 0 dies in the agreement: 3 survivors ($(took))" $?
case_ shm 4 late 3 3
result "shm, 4 ranks, rank 3 alive but never in the agreement, the coordinator 0.5 s late: 3 survivors" $?
case_ shm 4 tardy 3 2 && has '^shrink_fail: rank 1: left out'
result "shm, 4 ranks, rank 3 killed, rank 1 asks 6 s late, after the others decided and left the failed communicator: it is left out" $?
case_ shm 8 coll 5 7
result "shm, 8 ranks, rank 5 killed: 7 survivors ($(took))" $?
finish
