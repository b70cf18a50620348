#!/bin/sh
# netns_chunk.sh - what pipelining (HCOMM_CHUNK_BYTES) gains or loses where a
# wire paces the ranks: NODES network namespaces, one rank each, RATE links
# (tc tbf, burst 64 KB as in tests/netns/run_slow_link.sh), hcomm-perf
# all_reduce over tcp once per CHUNKS setting, the settings alternated ROUNDS
# times. Prints per size the median time (us) of each setting over the
# rounds, against the first setting, and the largest single round's ratio.
# As root, from the top of the built tree:
#   ROUNDS=5 perf/netns_chunk.sh [-b 256K -e 4M -f 2 -n 20 -w 5]
# NODES (4), RATE (300mbit), CHUNKS ("256K 0": the default, then none).
top=.
NODES=${NODES:-4} PPN=1 RATE=${RATE:-300mbit} BURST=64kb
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../tests/test_lib.sh"
# shellcheck source=tests/netns/netns_lib.sh
. "$(dirname "$0")/../tests/netns/netns_lib.sh"
netns_setup
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=120 \
    HCOMM_TRANSPORT=tcp
args=${*:--b 256K -e 4M -f 2 -n 20 -w 5}
chunks=${CHUNKS:-256K 0}
rows=$netns_dir/rows
: > "$rows"
for round in $(seq 1 "${ROUNDS:-3}"); do
    for c in $chunks; do
        # shellcheck disable=SC2086
        HCOMM_CHUNK_BYTES=$c netns_launch ./perf/.libs/hcomm-perf all_reduce $args ||
            { cat "$netns_dir/out.0"; exit 1; }
        # out-of-place time (us), column 6 of hcomm-perf's rows
        awk -v c="$c" -v r="$round" '/^ *[0-9]/ { print c, 4, $1, r, $6 }' "$netns_dir/out.0" >> "$rows"
    done
done
echo "# $NODES namespaces x 1 rank, $RATE links, tcp: hcomm-perf all_reduce $args, ${ROUNDS:-3} rounds"
echo "# ranks  size(B)  chunk  median(us)  ref median(us)  ratio  largest round ratio (ref: ${chunks%% *})"
awk -v ref="${chunks%% *}" -v extreme=max -v fmt="%10.1f" -f "$(dirname "$0")/rounds_median.awk" "$rows" |
    sort -k2,2n -k3,3
