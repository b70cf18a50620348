#!/bin/sh
# a2a_bench.sh - hierarchical against pairwise alltoall across network
# namespaces (issue 6): NODES namespaces x PPN ranks, RATE links, PLACE (rr:
# rank r on node r % NODES; block: r / PPN). The sweep of
# `hcomm-perf alltoall -b 8K -e 2M -f 4` (SIZES, whole buffers) runs size by
# size, HCOMM_ALGO=alltoall:hier, alltoall:pairwise and no HCOMM_ALGO (the cost
# model's choice), ROUNDS times (default 3) interleaved so that the machine's
# swings hit all alike; the fastest time of each is kept. Prints per size the
# bytes per peer, both times (out of place, in place) and the speed-up
# pairwise / hier, then which schedules rank 0 built. As root, from the top of
# the built tree:
#   NODES=4 PPN=2 PLACE=rr RATE=1gbit perf/a2a_bench.sh [-n 20 -w 5]
# alltoall's size is the whole buffer, nranks x bytes per peer: with 8 ranks
# the default SIZES cover 1 KiB to 256 KiB per peer.
top=.
NODES=${NODES:-4} PPN=${PPN:-2} RATE=${RATE:-1gbit} PLACE=${PLACE:-rr} ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:-8192 32768 131072 524288 2097152}
iters=${*:--n 20 -w 5}
perf="$top/perf/.libs/hcomm-perf"
[ -x "$perf" ] || perf="$top/perf/hcomm-perf"
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../tests/test_lib.sh"
# shellcheck source=tests/netns/netns_lib.sh
. "$(dirname "$0")/../tests/netns/netns_lib.sh"
netns_setup
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=120
n=$((NODES * PPN))

# run_one ALGO SIZE CHECK: one hcomm-perf run (ALGO auto: the cost model
# chooses); "ALGO SIZE bytes oop-us ip-us" into rows (bytes: the size
# hcomm-perf used, a multiple of nranks x 4).
run_one() {
    rm -f "$netns_dir"/log.*
    force="alltoall:$1"; [ "$1" = auto ] && force=
    # shellcheck disable=SC2086
    HCOMM_ALGO="$force" HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=algo \
        netns_launch "$perf" alltoall -b "$2" -e "$2" $iters -c "$3" ||
        { echo "a2a_bench: alltoall:$1 at $2 B failed:" >&2; tail -5 "$netns_dir/out.0" >&2
          return 1; }
    awk -v a="$1" -v s="$2" '/^ *[0-9]/ { print a, s, $1, $6, $10 }' "$netns_dir/out.0" \
        >> "$netns_dir/rows"
    [ "$3" = 1 ] && grep -h 'alltoall of' "$netns_dir/log.0" |
        sed "s/.*\(alltoall of\)/$1: \1/" | sort -u >> "$netns_dir/chosen"
    return 0
}

: > "$netns_dir/rows"; : > "$netns_dir/chosen"
for round in $(seq 1 "$ROUNDS"); do
    check=0; [ "$round" = 1 ] && check=1
    for size in $SIZES; do
        run_one hier "$size" $check || exit 1
        run_one pairwise "$size" $check || exit 1
        run_one auto "$size" 1 || exit 1
    done
done
echo "# $NODES namespaces x $PPN ranks, PLACE=$PLACE, $RATE links:" \
    "hcomm-perf alltoall -b S -e S $iters for S in $SIZES;"
echo "# fastest of $ROUNDS rounds, hier, pairwise and the automatic choice interleaved;"
echo "# results checked in every automatic run and the first round of the others;"
echo "# auto/best: the automatic runs' time over the faster forced one (out of place)"
echo "#             out of place:                  | in place:                        |"
echo "#  size(B)  peer(B) |  hier(us) pairwise(us) speed-up |  hier(us) pairwise(us) speed-up | auto/best"
for size in $SIZES; do
    awk -v s="$size" -v n="$n" '$2 == s { k = $1; b = $3; if (!(k in o) || $4 < o[k]) o[k] = $4
                                          if (!(k in p) || $5 < p[k]) p[k] = $5 }
        END { if (b == "") exit
              h = o["hier"]; w = o["pairwise"]; hi = p["hier"]; wi = p["pairwise"]
              best = h < w ? h : w
              printf "%10d %8d | %9.1f %12.1f %8.2f | %9.1f %12.1f %8.2f | %6.2f\n", b, b / n,
                     h, w, (h > 0 ? w / h : 0), hi, wi, (hi > 0 ? wi / hi : 0),
                     (best > 0 ? o["auto"] / best : 0) }' "$netns_dir/rows"
done
echo "# schedules rank 0 built (HCOMM_LOG_LEVEL=debug): forced in the first round, auto in every"
sort -u "$netns_dir/chosen"
