#!/bin/bash
# slow_campaign.sh - how often rank 0's slow-rank test (core/health.h) is
# right: TRIALS trials in which a random rank of 4-8 is slowed by a random
# factor in [1.3, 3] (tests/fault/slow: a SIGSTOP/SIGCONT duty cycle over 50
# ms), and TRIALS clean ones; each runs STEPS collectives after 50 ms of
# compute. A slowed trial is right when rank 0 names that rank alone; a clean
# one when it names no one. Then FACTORS (a list) on 4 ranks, SWEEP trials
# each: the smallest slowdown still caught. Prints one line per trial and the
# totals.
#   perf/slow_campaign.sh [TRIALS] [SEED]        (defaults 100, 1)
# From the build tree; STEPS (100), FACTORS ("1.05 1.1 1.15 1.2 1.25"), SWEEP (5).
trials=${1:-100}
RANDOM=${2:-1}
steps=${STEPS:-100}
top=$(cd "$(dirname "$0")/.." && pwd)
run="$top/tools/hcomm-run" prog="$top/tests/fault/slow"

# trial N RANK FACTOR: "right" or "wrong", and rank 0's line
trial() {
    local line
    line=$(timeout 300 "$run" -n "$1" "$prog" "$steps" 50 "$2" "$3" 2>/dev/null | sed -n 's/^slow: //p')
    if [ "$2" -lt 0 ]; then
        case $line in "named none"*) echo "right $line" ;; *) echo "wrong $line" ;; esac
    else
        case $line in "named $2 ("*) echo "right $line" ;; *) echo "wrong $line" ;; esac
    fi
}

right=0 clean_right=0
for ((i = 1; i <= trials; i++)); do
    n=$((4 + RANDOM % 5)) r=$((RANDOM % n))
    x=$RANDOM # drawn here: a command substitution's shell draws from a new seed
    f=$(awk -v x="$x" 'BEGIN { printf "%.2f", 1.3 + 1.7 * x / 32767 }')
    v=$(trial $n $r "$f")
    echo "slowed $i: $n ranks, rank $r ${f}x: $v"
    [ "${v%% *}" = right ] && right=$((right + 1))
    n=$((4 + RANDOM % 5))
    v=$(trial $n -1 1)
    echo "clean $i: $n ranks: $v"
    [ "${v%% *}" = right ] && clean_right=$((clean_right + 1))
done
echo "slowed trials right: $right of $trials; clean trials right: $clean_right of $trials"
echo "verdicts right: $(awk -v a=$right -v b=$clean_right -v n=$trials 'BEGIN { printf "%.1f%%", 100 * (a + b) / (2 * n) }')"
for f in ${FACTORS:-1.05 1.1 1.15 1.2 1.25}; do
    ok=0
    for ((i = 1; i <= ${SWEEP:-5}; i++)); do
        r=$((RANDOM % 4))
        v=$(trial 4 $r "$f")
        [ "${v%% *}" = right ] && ok=$((ok + 1))
    done
    echo "factor $f on 4 ranks: caught $ok of ${SWEEP:-5}"
done
