#!/bin/sh
# fabric_bench.sh - one transport against another in the same run: hcomm-perf
# all_reduce with each transport variant forced, LAUNCHES rounds (default 5)
# interleaved, the variants' order turning each round, so that a noisy minute
# hits every variant alike. Per size: each variant's median busbw over the
# rounds and its ratio to the reference's (the first variant's) median. From
# the top of the built tree:
#   MODE=netns perf/fabric_bench.sh [hcomm-perf args]   (as root)
#     two network namespaces joined by a veth pair, no rate limit, one rank
#     each; variants tcp (reference), ofi-tcp, ucx-tcp; default args
#     -b 1M -e 64M -f 2 -n 10 -w 3
#   MODE=local RANKS="2 4" perf/fabric_bench.sh [hcomm-perf args]
#     this host; variants shm (reference), ucx-shm; default args
#     -b 64K -e 64M -f 4 -n 20 -w 3
# VARIANTS overrides the list; the variants are variant_env's in
# tests/test_lib.sh (tcp, shm, ofi-tcp, ofi-shm, ucx-tcp, ucx-shm).
MODE=${MODE:-local} LAUNCHES=${LAUNCHES:-5}
case $MODE in
netns) VARIANTS=${VARIANTS:-"tcp ofi-tcp ucx-tcp"} RANKS=2 NODES=2 PPN=1 RATE=none
    def="-b 1M -e 64M -f 2 -n 10 -w 3" ;;
local) VARIANTS=${VARIANTS:-"shm ucx-shm"} RANKS=${RANKS:-"2 4"}
    def="-b 64K -e 64M -f 4 -n 20 -w 3" ;;
*) echo "fabric_bench: MODE is netns or local" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || set -- $def
top=.
. "$(dirname "$0")/../tests/test_lib.sh"
[ -x ./perf/.libs/hcomm-perf ] || { echo "fabric_bench: build first (make)" >&2; exit 2; }
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=120
if [ "$MODE" = netns ]; then
    . "$(dirname "$0")/../tests/netns/netns_lib.sh"
    netns_setup
else
    scratch fabric
fi

# the variants that open here; the others are named and left out
kept=
for v in $VARIANTS; do
    why=$(tl_unusable "$v")
    if [ -z "$why" ]; then kept="$kept $v"; else echo "# $v left out: $why"; fi
done
VARIANTS=$kept

# run_one VARIANT N ARGS...: hcomm-perf output in $tmp/out
run_one() {
    v=$1 n=$2; shift 2
    # shellcheck disable=SC2046 # the variant's words are separate assignments
    if [ "$MODE" = netns ]; then
        netns_launch env $(variant_env "$v") ./perf/.libs/hcomm-perf all_reduce "$@" &&
            cp "$netns_dir/out.0" "$tmp/out"
    else
        env $(variant_env "$v") ./perf/.libs/hcomm-perf all_reduce --ranks "$n" "$@" > "$tmp/out" 2>&1
    fi
}

nv=$(echo $VARIANTS | wc -w)
for round in $(seq 1 "$LAUNCHES"); do
    for n in $RANKS; do
        order=$(echo $VARIANTS | tr ' ' '\n' | awk -v r="$round" -v n="$nv" \
                '{ t[NR] = $0 } END { for (i = 0; i < n; i++) print t[(r + i) % n + 1] }')
        for v in $order; do
            run_one "$v" "$n" "$@" || { cat "$tmp/out" "$netns_dir"/log.* 2>/dev/null | tail -20; exit 1; }
            awk -v v="$v" -v n="$n" -v r="$round" '!/^#/ && NF > 6 { print v, n, $1, r, $8 }' \
                "$tmp/out" >> "$tmp/rows"
        done
    done
done
ref=$(echo $VARIANTS | awk '{ print $1 }')
echo "# MODE=$MODE hcomm-perf all_reduce $*, $LAUNCHES interleaved rounds; busbw GB/s"
echo "# ranks  size(B)  variant  median busbw  $ref median busbw  ratio  lowest round ratio"
awk -v ref="$ref" -v extreme=min -v fmt="%8.3f" -f "$(dirname "$0")/rounds_median.awk" \
    "$tmp/rows" | sort -k1,1n -k3,3 -k2,2n
