#!/bin/sh
# run_perf.sh - hcomm-perf's own result checks over every collective, dtype and
# op, with two operations fused per group (-m 2), blocking and nonblocking;
# then the tuning file: written by --tune, followed, ignored when bad; flags
# refused before any rank starts; nccl-tests' -t and -g.
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
# refused with status 2 and a line saying why, before any rank starts
refused() { # WHY ARGS...: exits 2, and its stderr matches WHY
    why=$1
    shift
    "$perf" "$@" > "$out" 2>&1
    rc=$?
    echo "exit status $rc" >> "$out"
    [ $rc = 2 ] && has "$why"
}
refused "disagrees with --ranks" all_reduce -g 2 --ranks 3
result "hcomm-perf refuses -g that disagrees with --ranks" $?
refused "one datatype, one op and -N 1" all_reduce --ranks 2 -d all --tune="$tmp/t2" &&
    refused "one datatype, one op and -N 1" all_reduce --ranks 2 -N 0 --tune="$tmp/t2" &&
    [ ! -e "$tmp/t2" ]
result "hcomm-perf --tune refuses sweeps a tuning line cannot hold" $?
refused "too large" moe_dispatch --ranks 2 --tokens 1073741824G --hidden 4 --topk 4 \
    --experts 4 -d float
result "hcomm-perf moe_dispatch refuses sizes that overflow" $?
refused "bad value ' -1' for -e" all_reduce -e " -1"
result "hcomm-perf refuses a size with a leading blank and sign" $?
# nccl-tests' -t and -g: ranks of one process, here that many processes
"$perf" all_reduce -t 1 -g 3 -p 1 -b 8 -e 8 -n 1 -w 0 > "$out" 2>&1 &&
    has '^#  Rank  2 ' && ! has '^#  Rank  3 '
result "hcomm-perf -t 1 -g 3 forks 3 ranks" $?
finish
