#!/bin/sh
# overlap_bench.sh - compute/communication overlap over a slow link (issue 5):
# NODES namespaces x PPN ranks joined by RATE links (tests/netns/netns_lib.sh),
# running examples/overlap_train: a simulated backward pass whose layers hand
# their gradients to the buckets as they are produced (overlap), against the
# same work done compute first, communication after (serial). As root, from
# the top of the built tree:
#   NODES=2 PPN=1 RATE=1gbit perf/overlap_bench.sh [overlap_train options]
top=.
NODES=${NODES:-2} PPN=${PPN:-1} RATE=${RATE:-1gbit}
. "$(dirname "$0")/../tests/test_lib.sh"
. "$(dirname "$0")/../tests/netns/netns_lib.sh"
netns_setup
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=120
args=${*:---steps 6 --layer-bytes 2M --bucket-bytes 2M --compute-us 9000}
# shellcheck disable=SC2086
netns_launch ./examples/.libs/overlap_train $args || { cat "$netns_dir"/out.*; exit 1; }
echo "# $NODES namespaces x $PPN ranks, $RATE links: overlap_train $args"
cat "$netns_dir/out.0"
