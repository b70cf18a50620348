#!/bin/sh
# run_perf.sh - hcomm-perf's own result checks over every collective, dtype and
# op, with two operations fused per group (-m 2), blocking and nonblocking;
# then the tuning file: written by --tune, followed, ignored when bad.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
perf="$top/perf/hcomm-perf"
need "$perf"
export HCOMM_TIMEOUT=60
scratch perf
for coll in all_reduce reduce_scatter reduce broadcast all_gather alltoall sendrecv; do
    for z in 0 1; do
        args="$coll --ranks 3 -b 8 -e 128K -f 16 -n 2 -w 1 -m 2 -z $z -d all -o all -r 2"
        # shellcheck disable=SC2086 # args is a list of arguments
        try 120 "$perf" $args
        result "hcomm-perf $args" $?
    done
done
# --tune writes a tuning file; selection then follows it; a bad file is ignored
tf=$tmp/tune
"$perf" all_reduce --ranks 2 -b 8 -e 64K -f 64 -n 2 -w 1 --tune="$tf" > "$out" 2>&1 &&
    has '^allreduce 2 0 ' "$tf"
result "hcomm-perf --tune writes a tuning file" $?
# allgather's entries are one rank's block: the 1 KiB row (2 x 512 B) ends
# its first range at 512 or spans every size
"$perf" all_gather --ranks 2 -b 1K -e 16K -f 16 -n 2 -w 1 --tune="$tf" > "$out" 2>&1 &&
    grep '^allgather 2 0 ' "$tf" | awk '{ exit !($4 == 512 || $4 == 18446744073709551615) }'
result "hcomm-perf all_gather --tune writes per-rank block sizes" $?
printf 'allreduce 2 0 18446744073709551615 rabenseifner 65536\n' > "$tf"
HCOMM_TUNING_FILE="$tf" HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=algo "$perf" all_reduce --ranks 2 \
    -b 8 -e 8K -f 32 -n 2 -w 1 > "$out" 2>&1 &&
    has 'allreduce of 2048 elements (8192 bytes): rabenseifner'
result "HCOMM_TUNING_FILE followed" $?
printf 'allreduce two 0 9 warp 1\n' > "$tf"
HCOMM_TUNING_FILE="$tf" "$perf" all_reduce --ranks 2 -b 8 -e 8K -f 32 -n 2 -w 1 > "$out" 2>&1 &&
    has 'tuning file .*:1: expected'
result "a bad tuning file warns and is ignored" $?
finish
