#!/bin/sh
# netns_bench.sh - topology-aware routing across network namespaces (issue 3):
# NODES namespaces x PPN ranks, RATE links, ranks placed round-robin (rank r on
# node r % NODES). Runs hcomm-perf all_reduce with the algorithm hcomm selects,
# then forced to a ring in plain rank order, and prints both tables and the
# busbw ratio per size. As root, from the top of the built tree:
#   NODES=4 PPN=2 RATE=1gbit perf/netns_bench.sh [-b 16M -e 64M -n 5 -w 1]
top=.
NODES=${NODES:-4} PPN=${PPN:-2} RATE=${RATE:-1gbit} PLACE=rr
. "$(dirname "$0")/../tests/test_lib.sh"
. "$(dirname "$0")/../tests/netns/netns_lib.sh"
netns_setup
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=120
args=${*:--b 16M -e 64M -n 5 -w 1}
# shellcheck disable=SC2086
netns_launch ./perf/.libs/hcomm-perf all_reduce $args || { cat "$netns_dir"/out.0; exit 1; }
cp "$netns_dir/out.0" "$netns_dir/selected"
# shellcheck disable=SC2086
HCOMM_ALGO=ring HCOMM_RING_ORDER=rank netns_launch ./perf/.libs/hcomm-perf all_reduce $args ||
    { cat "$netns_dir"/out.0; exit 1; }
cp "$netns_dir/out.0" "$netns_dir/rankring"
echo "# $NODES namespaces x $PPN ranks, round-robin placement, $RATE links: hcomm-perf all_reduce $args"
echo "## selected algorithm"; grep -v '^#  Rank' "$netns_dir/selected"
echo "## HCOMM_ALGO=ring HCOMM_RING_ORDER=rank"; grep -v '^#  Rank' "$netns_dir/rankring"
echo "# size  selected-busbw  rank-ring-busbw  ratio"
awk 'FNR == NR && /^ *[0-9]/ { s[$1] = $8; next }
     /^ *[0-9]/ && ($1 in s) { printf "%10s %10s %10s %6.2f\n", $1, s[$1], $8, ($8 > 0 ? s[$1] / $8 : 0) }' \
    "$netns_dir/selected" "$netns_dir/rankring"
