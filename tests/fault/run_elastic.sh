#!/bin/sh
# run_elastic.sh - examples/elastic_train: data-parallel SGD on 4 ranks that
# loses rank 3 to SIGKILL at step 20 of 60, shrinks and finishes on 3; the
# same grown back to 4 at step 30 by a new process that rank 0 starts; a
# clean run for reference. Over shm, and the grow case over tcp too. Each run
# must end converged (|w - w*| under the example's threshold) with the same
# weights on every rank, and its lines must show the sizes at the right steps.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" prog="$top/examples/elastic_train"
need "$run" "$prog"
export HCOMM_TIMEOUT=30
scratch elastic

# done_ok N: rank 0's summary says N ranks, converged, same weights, and N
# ranks printed their final line; no rank failed a call or lost a newcomer.
done_ok() {
    has "^elastic: done: 60 steps, final size $1, .* weights identical, converged" &&
        [ "$(grep -c '^elastic: rank [0-9]* (.*shard [0-9]*): loss' "$out")" = "$1" ] &&
        ! has '^elastic: rank [0-9]*: .* failed' && ! has '^elastic: newcomer'
}
# at S N: rank 0's progress line for step S says N ranks
at() { has "^elastic: step $1: $2 ranks, loss"; }
summary() { sed -n 's/^elastic: done: //p' "$out"; }

try 60 "$run" -k -n 4 "$prog" 60
st=$?
[ $st = 0 ] && done_ok 4 && at 59 4 && ! has '^elastic: .* lost '
result "shm, 4 ranks, clean: $(summary)" $?

try 60 "$run" -k -n 4 "$prog" 60 --kill-at 20
st=$?
# hcomm-run passes on the victim's death: 128 + SIGKILL
[ $st = 137 ] && has '^hcomm-run: rank 3 killed by signal SIGKILL' &&
    [ "$(grep -c '^elastic: .* lost ' "$out")" = 1 ] &&
    has '^elastic: step 20: rank 3 lost (HCOMM_ERR_[A-Z]*); 3 ranks go on' &&
    at 10 4 && at 20 3 && at 59 3 && done_ok 3
result "shm, 4 ranks, rank 3 killed at step 20: 3 go on: $(summary)" $?

# grow TL: killed at 20, grown back to 4 at 30 by one newcomer, which must
# be gone (reaped by rank 0) when the job is.
grow() {
    try 60 HCOMM_TRANSPORT="$1" "$run" -k -n 4 "$prog" 60 --kill-at 20 --grow-at 30
    st=$?
    pid=$(sed -n 's/^elastic: rank 0 starts pid \([0-9]*\) as rank 3 for shard 3$/\1/p' "$out")
    [ $st = 137 ] && [ -n "$pid" ] && ! kill -0 "$pid" 2> /dev/null &&
        has '^elastic: step 20: rank 3 lost (HCOMM_ERR_[A-Z]*); 3 ranks go on' &&
        has '^elastic: step 30: grown to 4 ranks' &&
        has '^elastic: rank 3 (new, shard 3) joins at step 30$' &&
        at 20 3 && at 30 4 && at 59 4 && done_ok 4
}
grow shm
result "shm, 4 ranks, rank 3 killed at 20, a newcomer at 30: $(summary)" $?
grow tcp
result "tcp, 4 ranks, rank 3 killed at 20, a newcomer at 30: $(summary)" $?
finish
