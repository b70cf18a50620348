#!/bin/sh
# run_stuck.sh - a rank that does not reach a collective is named: rank 2 of 4
# sleeps past the timeout before allreduce #7 (its watch thread still says
# where it is), or stops itself with SIGSTOP (nothing answers); each other
# rank's timeout comes with one warn line naming rank 2 and the operation,
# the flight recorder files merged by hcomm-trace give the same verdict, and
# hcomm_comm_dump_state and the dump signal report where every rank is. With
# rank 2's host gone (stopped, its listeners drop new SYNs: silent_host.h),
# the verdict names rank 2 alone: asking it holds up the asking of no other.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" prog="$top/tests/fault/stuck" merge="$top/tools/hcomm-trace"
need "$run" "$prog" "$merge"
scratch stuck
set=3 # seconds: the communicators' timeout

# count PATTERN: lines of $out matching it
count() { grep -c -e "$1" "$out"; }

# the sleeping rank, over shared memory, with the dump signal sent while the
# others wait (after every rank's hcomm_comm_dump_state: its handler is in)
mkdir "$tmp/sleep"
HCOMM_TRANSPORT=shm HCOMM_TRACE_DIR="$tmp/sleep" HCOMM_DUMP_SIGNAL=USR1 \
    timeout 60 "$run" -n 4 "$prog" sleep 2 $set dump > "$out" 2>&1 &
job=$!
i=0
while [ "$(count '^stuck: rank [0-3] is pid')" -lt 4 ] && [ $i -lt 200 ]; do
    sleep 0.1; i=$((i + 1))
done
sleep 1
kill -USR1 $(sed -n 's/^stuck: rank [0-3] is pid //p' "$out")
wait $job
rc=$?
test $rc = 0 && [ "$(count 'stuck: rank [013]: timed out')" = 3 ]
result "sleep: the other ranks time out (within $set + 5 s)" $?
# (a rank that gave up first and left may be named so, not as waiting)
line='stuck: allreduce #7 (4 KiB): rank 2 (host [^)]*) is at #6 broadcast (done.* waiting$'
[ "$(count "$line")" = 3 ]
result "sleep: each waiting rank's warn line names rank 2, at #6 broadcast" $?
[ "$(count 'state (dump signal): comm [0-9a-f]* rank [0-3] of 4: ')" -ge 4 ] &&
    has 'state (dump signal): comm [0-9a-f]* rank 2 of 4: 7 operations issued, 7 ended; collective #6 broadcast (64 B), idle' &&
    [ "$(count 'state (dump signal): comm .* host .*: the last 8 operations')" = 3 ]
result "sleep: the dump signal: every rank's line, the waiting ranks' last operations" $?
"$merge" "$tmp/sleep" > "$out.merge" 2>&1
cat "$out.merge" >> "$out"
has "verdict: allreduce #7 (4 KiB): rank 2 (host [^)]*) is at #6 broadcast .*ranks 0, 1, 3 waiting" "$out.merge" &&
    [ "$(grep -c 'rank [013] said: allreduce #7' "$out.merge")" = 3 ]
result "sleep: hcomm-trace merges the 4 flight recorder files to the same verdict" $?

# the stopped rank, over tcp: it cannot answer
mkdir "$tmp/stop"
try 60 HCOMM_TRANSPORT=tcp HCOMM_TRACE_DIR="$tmp/stop" "$run" -n 4 "$prog" stop 2 $set
rc=$?
test $rc = 0 && [ "$(count 'stuck: rank [013]: timed out')" = 3 ]
result "stop: the other ranks time out (within $set + 5 s)" $?
[ "$(count 'stuck: allreduce #7 (4 KiB): rank 2 (host [^)]*) does not answer (stopped or dead); ranks 0, 1, 3 waiting')" = 3 ]
result "stop: each waiting rank's warn line names rank 2 as silent" $?
"$merge" "$tmp/stop" > "$out.merge" 2>&1
cat "$out.merge" >> "$out"
has "verdict: allreduce #7 (4 KiB): rank 2 (host [^)]*) .*ranks 0, 1, 3 waiting" "$out.merge"
result "stop: hcomm-trace names rank 2 and allreduce #7" $?
# a corrupt file's rank count is refused, not trusted (it once sized a stack array)
mkdir "$tmp/corrupt"
sed 's/nranks=4 /nranks=50000000 /' "$(ls "$tmp"/stop/* | head -1)" > "$tmp/corrupt/f.txt"
"$merge" "$tmp/corrupt/f.txt" > "$out.merge" 2>&1
rc=$?
cat "$out.merge" >> "$out"
[ $rc = 2 ] && has "is not a flight recorder file" "$out.merge"
result "hcomm-trace refuses a flight file whose rank count is past any job's" $?

# the silent host, over shared memory (the watch's sockets alone to fill)
label="silent: each waiting rank's warn line names rank 2 alone, and no connect errors"
mkdir "$tmp/silent"
try 60 HCOMM_TRANSPORT=shm "$run" -n 4 "$prog" silent 2 $set "$tmp/silent"
rc=$?
if has '^silent_host: cannot'; then
    result "$label ($(sed -n 's/^silent_host: cannot: //p' "$out"))" 77
else
    test $rc = 0 && has 'its listeners drop new SYNs' &&
        [ "$(count 'stuck: rank [013]: timed out')" = 3 ] &&
        [ "$(count 'stuck: allreduce #7 (4 KiB): rank 2 (host [^)]*) does not answer (stopped or dead); ranks 0, 1, 3 waiting$')" = 3 ] &&
        ! has 'ERROR.*connect to rank'
    result "$label" $?
fi

# no watch: the timeout still comes, and says why it names no one
try 60 HCOMM_WATCH=0 "$run" -n 2 "$prog" sleep 1 2
test $? = 0 && has 'HCOMM_WATCH=0, so the other ranks were not asked'
result "HCOMM_WATCH=0: the timeout alone, said so" $?
finish
