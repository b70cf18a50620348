#!/bin/sh
# shim_bench.sh - the NCCL drop-in's cost (issue 7): allreduce through
# libnccl.so.2 (perf/nccl_perf) against the same loop on hcomm's API
# (perf/nccl_perf_direct) and against hcomm-perf, all under mpirun with
# blocking calls, ROUNDS (default 5) interleaved rounds, the median time per
# size kept; prints per size the three times, shim / direct and
# shim / hcomm-perf. Separate launches differ by more than 3% at small sizes
# here; perf/shim_overhead measures the shim inside one process.
# From the top of the built tree:
#   NP=2 perf/shim_bench.sh [-b 8 -e 64M -f 8 -n 50 -w 5]
top=.
NP=${NP:-2} ROUNDS=${ROUNDS:-5}
args=${*:--b 8 -e 64M -f 8 -n 50 -w 5}
mpirun=$(command -v mpirun.openmpi || command -v mpirun || true)
[ -n "$mpirun" ] || { echo "shim_bench: no mpirun" >&2; exit 2; }
[ -x "$top/perf/nccl_perf" ] && [ -x "$top/perf/nccl_perf_direct" ] ||
    { echo "shim_bench: make perf/nccl_perf perf/nccl_perf_direct first" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
# one launch of kind k (hcomm, shim or direct), its "kind size time" rows appended
run_one() {
    case $1 in
    hcomm) prog="$top/perf/hcomm-perf all_reduce"; extra="-z 1 -c 0"; col=6 ;;
    shim) prog="$top/perf/nccl_perf"; extra=""; col=2 ;;
    direct) prog="$top/perf/nccl_perf_direct"; extra=""; col=2 ;;
    esac
    # shellcheck disable=SC2086
    "$mpirun" --oversubscribe -np "$NP" $prog $args $extra > "$tmp/out" 2>&1 ||
        { cat "$tmp/out"; exit 1; }
    awk -v k="$1" -v c="$col" '/^ *[0-9]/ { print k, $1, $c }' "$tmp/out" >> "$tmp/rows"
}
# the order turns each round, so that no program always follows the same one
# (a launch's speed follows what ran just before it on these machines)
for round in $(seq 1 "$ROUNDS"); do
    case $((round % 3)) in
    1) order="hcomm shim direct" ;;
    2) order="shim direct hcomm" ;;
    0) order="direct hcomm shim" ;;
    esac
    for k in $order; do run_one "$k"; done
done
[ -z "$ROWS_OUT" ] || cp "$tmp/rows" "$ROWS_OUT" # every launch's rows, for a closer look
echo "# $NP ranks under mpirun, allreduce float32, blocking, $args; median of $ROUNDS rounds, order turning"
echo "#   size(B)  hcomm-perf(us)  same loop, hcomm API(us)  through libnccl.so.2(us)  shim/direct  shim/hcomm-perf"
sort -k1,1 -k2,2n -k3,3g "$tmp/rows" |
    awk '{ k = $1 SUBSEP $2; v[k, ++n[k]] = $3; sz[$2] = 1 }
         function med(k) { return n[k] % 2 ? v[k, (n[k] + 1) / 2] : (v[k, n[k] / 2] + v[k, n[k] / 2 + 1]) / 2 }
         END { for (s in sz) { h = med("hcomm" SUBSEP s); d = med("direct" SUBSEP s); m = med("shim" SUBSEP s)
                               printf "%12d %14.2f %25.2f %25.2f %12.3f %16.3f\n", s, h, d, m, m / d, m / h } }' |
    sort -n
