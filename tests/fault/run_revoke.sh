#!/bin/sh
# run_revoke.sh - hcomm_comm_revoke on one rank ends, on every other rank, the
# allreduce its own thread is blocked in and the one its stream's thread
# runs, within 2 s (the timeout is 60 s), with HCOMM_ERR_REVOKED; later calls
# and hcomm_comm_get_error say so too (tests/fault/revoke.c). Over shared
# memory and over tcp; and revoked by a thread of rank 0's own while its main
# thread is blocked, the last rank told over the watch channel. And with rank
# 1's host gone (stopped, its listeners drop new SYNs: silent_host.h), the
# others are revoked within 1.5 s all the same (the timeout is 10 s): asking
# the silent rank holds up no other.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" prog="$top/tests/fault/revoke"
need "$run" "$prog"
scratch revoke
for tl in shm tcp; do
    for n in 3 4; do
        try 60 HCOMM_TRANSPORT=$tl "$run" -n $n "$prog"
        test $? = 0 && [ "$(grep -c '^revoke: rank [0-9]*: OK after' "$out")" = $((n - 1)) ]
        result "$tl, $n ranks: every blocked and streamed call of the others ends revoked" $?
    done
    try 60 HCOMM_TRANSPORT=$tl "$run" -n 4 "$prog" thread
    test $? = 0 && [ "$(grep -c '^revoke: rank [0-2]: OK after' "$out")" = 3 ] &&
        has '^revoke: rank 3: told'
    result "$tl, 4 ranks: a thread of rank 0 revokes; its blocked main thread and the others end" $?
done

label="shm, 4 ranks, rank 1's host gone: the others end revoked at once"
mkdir "$tmp/silent"
try 60 HCOMM_TRANSPORT=shm "$run" -n 4 "$prog" silent "$tmp/silent"
rc=$?
if has '^silent_host: cannot'; then
    result "$label ($(sed -n 's/^silent_host: cannot: //p' "$out"))" 77
else
    test $rc = 0 && has 'its listeners drop new SYNs' &&
        [ "$(grep -c '^revoke: rank [02]: OK, ' "$out")" = 2 ] && ! has 'ERROR.*connect to rank'
    result "$label" $?
fi
finish
