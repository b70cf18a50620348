#!/bin/bash
# slow_link_campaign.sh - how often rank 0's slow-link test (core/health.h,
# health_link.c) is right: 4 network namespaces as nodes, one rank each, links
# at 300 Mbit/s (tc tbf, tests/netns/netns_lib.sh); TRIALS trials in which a
# random node's link is slowed by a random factor in [1.5, 3] and TRIALS clean
# ones, each STEPS allreduces of 1 MiB over tcp (tests/netns/slow_link),
# judged every 0.2 s. A slowed trial is right when some link named sends from
# that node's rank and every link named sends from it or to it (the links into
# it carry its acknowledgements' delay); a clean one when none is named. Then
# FACTORS (a list), SWEEP trials each: the smallest slowdown still caught.
# Needs root.
#   perf/slow_link_campaign.sh [TRIALS] [SEED]     (defaults 20, 1)
# From the build tree; STEPS (150), FACTORS ("1.3 1.5 2"), SWEEP (5), CHUNK
# (HCOMM_CHUNK_BYTES, 0: schedules not pipelined, as in run_slow_link.sh; 256K,
# the library's default, pipelines Rabenseifner's rounds, which halves links
# that no wire slows: docs/resilience.md, "What it cannot see").
trials=${1:-20}
RANDOM=${2:-1}
top=$(cd "$(dirname "$0")/.." && pwd)
prog="$top/tests/netns/.libs/slow_link"
# shellcheck source=tests/test_lib.sh
. "$top/tests/test_lib.sh"
NODES=4 PPN=1 RATE=300mbit BURST=64kb
# shellcheck source=tests/netns/netns_lib.sh
. "$top/tests/netns/netns_lib.sh"
netns_setup
export LD_LIBRARY_PATH="$top/.libs" HCOMM_TIMEOUT=60 HCOMM_TRANSPORT=tcp HCOMM_HEALTH_PERIOD=0.2 \
    HCOMM_CHUNK_BYTES=${CHUNK:-0}

rate() { # rate NODE RATE
    # shellcheck disable=SC2154 # tag: set by netns_lib.sh
    tc -n "${tag}n$1" qdisc change dev "${tag}b$1" root tbf rate "$2" burst "$BURST" latency 50ms
}
# trial NODE FACTOR (NODE -1: clean): "right" or "wrong", and rank 0's line
trial() {
    local mbit rc
    [ "$1" -ge 0 ] && mbit=$(awk -v f="$2" 'BEGIN { printf "%d", 300 / f }') && rate "$1" "${mbit}mbit"
    netns_launch timeout 300 "$prog" "${STEPS:-150}" 1048576 "$1"
    rc=$?
    [ "$1" -ge 0 ] && rate "$1" "$RATE"
    # shellcheck disable=SC2154 # netns_dir: set by netns_lib.sh
    echo "$([ $rc = 0 ] && echo right || echo wrong) $(sed -n 's/^slow_link: //p' "$netns_dir/out.0")"
}

right=0 clean_right=0
for ((i = 1; i <= trials; i++)); do
    r=$((RANDOM % NODES))
    x=$RANDOM # drawn here: a command substitution's shell draws from a new seed
    f=$(awk -v x="$x" 'BEGIN { printf "%.2f", 1.5 + 1.5 * x / 32767 }')
    v=$(trial $r "$f")
    echo "slowed $i: node $r ${f}x: $v"
    [ "${v%% *}" = right ] && right=$((right + 1))
    v=$(trial -1 1)
    echo "clean $i: $v"
    [ "${v%% *}" = right ] && clean_right=$((clean_right + 1))
done
echo "slowed trials right: $right of $trials; clean trials right: $clean_right of $trials"
for f in ${FACTORS:-1.3 1.5 2}; do
    ok=0
    for ((i = 1; i <= ${SWEEP:-5}; i++)); do
        v=$(trial $((RANDOM % NODES)) "$f")
        [ "${v%% *}" = right ] && ok=$((ok + 1))
    done
    echo "factor $f: caught $ok of ${SWEEP:-5}"
done
