#!/bin/sh
# run_late_peer.sh - a communicator's own timeout (hcomm_comm_set_timeout, as
# the PyTorch backend sets its process group's) bounds the connections its
# transports make on first use, not HCOMM_TIMEOUT: a peer later than
# HCOMM_TIMEOUT but within the set timeout is waited for, over shm and over
# tcp; and a set timeout shorter than HCOMM_TIMEOUT fails the wait on time. A
# peer whose communicator is gone while its process lives fails the pair's
# first use within seconds (its watch refuses), not at the timeout.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" prog="$top/tests/fault/late_peer"
need "$run" "$prog"
scratch late_peer
# no warm-up allreduce at init: the pair connects in the timed first call
export HCOMM_WARMUP=0
# each rank in turn is the late one: tcp's higher rank waits for a dial, shm's
# opener for its creator's segment
for tl in shm tcp; do
    for late in 0 1; do
        try 60 HCOMM_TRANSPORT=$tl HCOMM_TIMEOUT=1 "$run" -n 2 "$prog" 30 $late 3 ok
        result "$tl: rank $late 3 s late, HCOMM_TIMEOUT=1, set timeout 30 s: waited for" $?
        try 60 HCOMM_TRANSPORT=$tl HCOMM_TIMEOUT=120 "$run" -n 2 "$prog" 2 $late -1 timeout
        result "$tl: rank $late never comes, HCOMM_TIMEOUT=120, set timeout 2 s: fails on time" $?
        try 60 HCOMM_TRANSPORT=$tl "$run" -n 2 "$prog" 120 $late 8 gone
        result "$tl: rank $late aborts at once and lives on, set timeout 120 s: the other fails within 4.5 s" $?
    done
done
finish
