#!/bin/sh
# unstack_bench.sh - how often forked ranks stay stacked on one CPU, with and
# without hcomm moving one off it (HCOMM_SHM_UNSTACK, transport/shm/shm_cpu.c):
# LAUNCHES launches per setting, interleaved, of `perf/first_calls -N 2 -b 8
# -n 3000`; a launch counts as stacked when more than 50 of its calls took
# over 5 us (a call takes ~0.3 us unstacked). Then the same on 4 ranks
# (more ranks than CPUs here, where hcomm moves no one): the mean us per
# call of calls 10001-20000 of 20000, averaged over the launches.
#   perf/unstack_bench.sh [LAUNCHES]          (default 20)
launches=${1:-20}
prog="$(dirname "$0")/first_calls"
[ -x "$prog" ] || { echo "unstack_bench: make perf/first_calls first" >&2; exit 2; }
{
    # 2-rank launches back to back, then 4-rank ones: a 4-rank launch before
    # each 2-rank one leaves the CPUs otherwise placed (none stacked in 20)
    for i in $(seq 1 "$launches"); do
        for v in 0 1; do
            HCOMM_SHM_UNSTACK=$v "$prog" -N 2 -b 8 -n 3000 -p | awk -v v="$v" '
                $1 ~ /^[0-9]+$/ && NF == 2 && $2 > 5 { slow++ } END { print "n2", v, (slow > 50) }'
        done
    done
    for i in $(seq 1 "$launches"); do
        for v in 0 1; do
            HCOMM_SHM_UNSTACK=$v "$prog" -N 4 -b 8 -n 20000 -p | awk -v v="$v" '
                $1 ~ /^[0-9]+$/ && NF == 2 && ++n > 10000 { s += $2; k++ } END { print "n4", v, s / k }'
        done
    done
} | awk -v l="$launches" '
    $1 == "n2" { st[$2] += $3 } $1 == "n4" { us[$2] += $3 }
    END { print "# HCOMM_SHM_UNSTACK  2 ranks: launches stacked  4 ranks: mean us per call"
          for (v = 0; v <= 1; v++) printf "%18d  %14d of %-3d  %18.2f\n", v, st[v], l, us[v] / l }'
