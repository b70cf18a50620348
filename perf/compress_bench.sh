#!/bin/sh
# compress_bench.sh - compressed against plain allreduce over a slow link
# (issue 4): NODES namespaces x PPN ranks joined by RATE links
# (tests/netns/netns_lib.sh). Runs hcomm-perf all_reduce plain (the ring) and
# with -C for each codec, then prints per size each codec's time, bytes sent
# and speed-up over the plain ring. As root, from the top of the built tree:
#   NODES=2 PPN=1 RATE=1gbit perf/compress_bench.sh [-b 1M -e 64M -f 4 -n 5 -w 1]
# CODECS (default "onebit topk:0.01 fp16") names the -C specs.
top=.
NODES=${NODES:-2} PPN=${PPN:-1} RATE=${RATE:-1gbit} CODECS=${CODECS:-onebit topk:0.01 fp16}
. "$(dirname "$0")/../tests/test_lib.sh"
. "$(dirname "$0")/../tests/netns/netns_lib.sh"
netns_setup
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=120
args=${*:--b 1M -e 64M -f 4 -n 5 -w 1}
perf="$top/perf/.libs/hcomm-perf"
[ -x "$perf" ] || perf="$top/perf/hcomm-perf"
# shellcheck disable=SC2086
HCOMM_ALGO=ring netns_launch $perf all_reduce $args || { cat "$netns_dir"/out.0; exit 1; }
cp "$netns_dir/out.0" "$netns_dir/plain"
echo "# $NODES namespaces x $PPN ranks, $RATE links: hcomm-perf all_reduce $args"
echo "## plain (HCOMM_ALGO=ring)"; grep -v '^#  Rank' "$netns_dir/plain"
for c in $CODECS; do
    # shellcheck disable=SC2086
    netns_launch $perf all_reduce -C "$c" $args || { cat "$netns_dir"/out.0; exit 1; }
    echo "## -C $c"; grep -v '^#  Rank' "$netns_dir/out.0"
    awk -v c="$c" 'FNR == NR && /^ *[0-9]/ { p[$1] = $6; next }
        /^ *[0-9]/ && ($1 in p) { printf "%-10s %10s  plain %10.1f us  %s %10.1f us  sent %10s B  ratio %6s  speed-up %6.2f\n",
            c, $1, p[$1], c, $6, $14, $15, ($6 > 0 ? p[$1] / $6 : 0) }' \
        "$netns_dir/plain" "$netns_dir/out.0" >> "$netns_dir/summary"
done
echo "# summary: out-of-place time, bytes rank 0 sent per call, plain bytes / sent, plain time / codec time"
cat "$netns_dir/summary"
