#!/bin/sh
# builds_bench.sh - one build of hcomm against another, back to back: the
# hcomm-perf of every tree in TOPS (the first is the reference) for each rank
# count in RANKS, LAUNCHES rounds (default 7) interleaved, the trees' order
# turning each round, so that a noisy minute hits every build alike. Per rank
# count and size: each tree's median out-of-place time over the rounds, its
# ratio to the reference's median (above 1: slower), and the largest ratio of
# any one round. Arguments go to hcomm-perf. For example, a change against
# the commit before it (a worktree built beside this one):
#   git worktree add /tmp/base HEAD~1 && (cd /tmp/base && ./autogen.sh &&
#       ./configure -q && make -j2)
#   TOPS="/tmp/base ." RANKS="2 4" perf/builds_bench.sh all_reduce -b 8 -e 64M -f 2 -n 40 -w 5
TOPS=${TOPS:?set TOPS to the built trees to compare, the reference first}
RANKS=${RANKS:-2} LAUNCHES=${LAUNCHES:-7}
[ $# -gt 0 ] || { echo "usage: TOPS=\"ref new\" [RANKS=..] $0 COLL [hcomm-perf args]" >&2; exit 2; }
for top in $TOPS; do
    [ -x "$top/perf/hcomm-perf" ] || { echo "builds_bench: build $top first" >&2; exit 2; }
done
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
ntops=$(echo $TOPS | wc -w)
for round in $(seq 1 "$LAUNCHES"); do
    for n in $RANKS; do
        # the order turns: round r starts with tree (r mod ntops)
        order=$(echo $TOPS | tr ' ' '\n' | awk -v r="$round" -v n="$ntops" \
                '{ t[NR] = $0 } END { for (i = 0; i < n; i++) print t[(r + i) % n + 1] }')
        for top in $order; do
            "$top/perf/hcomm-perf" "$@" --ranks "$n" > "$tmp/out" 2>&1 ||
                { cat "$tmp/out"; exit 1; }
            awk -v t="$top" -v n="$n" -v r="$round" -f "$(dirname "$0")/time_digits.awk" \
                "$tmp/out" >> "$tmp/rows"
        done
    done
done
ref=$(echo $TOPS | awk '{ print $1 }')
echo "# hcomm-perf $*, $LAUNCHES interleaved rounds; reference $ref"
echo "# ranks  size(B)  tree  median(us)  ref median(us)  ratio  largest round ratio"
awk -v ref="$ref" -v extreme=max -v fmt="%12.4f" -f "$(dirname "$0")/rounds_median.awk" \
    "$tmp/rows" | sort -k1,1n -k2,2n
