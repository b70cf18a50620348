#!/bin/bash
# trace_bench.sh - what operation records and HCOMM_TRACE_FILE cost an 8-byte
# allreduce on 2 ranks: hcomm-perf all_reduce -b 8 -e 8 (nonblocking, -z 0,
# and blocking, -z 1) with the trace off and on, and, given a second build
# (BASE, a build tree of another commit, such as the one before records), that
# build's hcomm-perf; the variants alternate, ROUNDS times, each run starting
# only once the CPUs were at most 10% busy for a second (shared machines).
# Prints each variant's out-of-place and in-place times (us, from the algbw
# column, whose 3-4 digits resolve 1%: the time column's two decimals do
# not): the median and every run.
#   perf/trace_bench.sh [ROUNDS] [BASE]          (defaults 11, none)
# From the build tree; ITERS (100000) sets -n.
# shellcheck disable=SC2086 # $args is words on purpose
rounds=${1:-11} base=$2
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
args="all_reduce -b 8 -e 8 -n ${ITERS:-100000} -w 2000"

busy() { # whether the CPUs were more than 10% busy over the last second
    local a b
    a=$(head -1 /proc/stat); sleep 1; b=$(head -1 /proc/stat)
    echo "$a $b" | awk '{ for (i = 2; i <= 11; i++) t1 += $i; for (i = 13; i <= 22; i++) t2 += $i
        exit !(1 - (($16 + $17) - ($5 + $6)) / (t2 - t1) > 0.10) }'
}
perf() { # perf TREE [VAR=VALUE]... -- ARGS: its hcomm-perf, out-of-place and in-place us
    local tree=$1; shift
    local vars=()
    while [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    env LD_LIBRARY_PATH="$tree/.libs" "${vars[@]}" nice -n 19 "$tree/perf/.libs/hcomm-perf" "$@" 2>&1 |
        awk '!/^#/ && NF > 10 { printf "%.4f %.4f\n", $1 / $7 / 1e3, $1 / $11 / 1e3 }' | tail -1
}
for z in 0 1; do
    names="off on"
    [ -n "$base" ] && names="base $names"
    for ((i = 0; i < rounds; i++)); do
        for v in $names; do
            while busy; do sleep 5; done
            case $v in
            base) perf "$base" -- $args -z $z ;;
            off) perf "$top" -- $args -z $z ;;
            on) perf "$top" HCOMM_TRACE_FILE="$tmp/t.json" -- $args -z $z ;;
            esac >> "$tmp/$v.$z"
        done
    done
    for v in $names; do
        for c in 1 2; do
            sort -g -k$c,$c "$tmp/$v.$z" | awk -v c=$c -v v=$v -v z=$z '{ a[NR] = $c; s = s " " $c }
                END { printf "-z %d %-4s %s median %s  (%s )\n", z, v, c == 1 ? "out-of-place" : "in-place",
                      a[int((NR + 1) / 2)], s }'
        done
    done
done
