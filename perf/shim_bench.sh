#!/bin/sh
# shim_bench.sh - the NCCL drop-in's cost (issue 7): allreduce through
# libnccl.so.2 (perf/nccl_perf) against the same loop on hcomm's API
# (perf/nccl_perf_direct) and against hcomm-perf, all under mpirun with
# blocking calls, ROUNDS (default 5) interleaved rounds, fastest time per size
# kept; prints per size the three times, shim / direct and shim / hcomm-perf.
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
for round in $(seq 1 "$ROUNDS"); do
    # shellcheck disable=SC2086
    "$mpirun" --oversubscribe -np "$NP" "$top/perf/hcomm-perf" all_reduce $args -z 1 -c 0 \
        > "$tmp/h" 2>&1 || { cat "$tmp/h"; exit 1; }
    awk '/^ *[0-9]/ { print "hcomm", $1, $6 }' "$tmp/h" >> "$tmp/rows"
    # shellcheck disable=SC2086
    "$mpirun" --oversubscribe -np "$NP" "$top/perf/nccl_perf" $args > "$tmp/n" 2>&1 ||
        { cat "$tmp/n"; exit 1; }
    awk '/^ *[0-9]/ { print "shim", $1, $2 }' "$tmp/n" >> "$tmp/rows"
    # shellcheck disable=SC2086
    "$mpirun" --oversubscribe -np "$NP" "$top/perf/nccl_perf_direct" $args > "$tmp/d" 2>&1 ||
        { cat "$tmp/d"; exit 1; }
    awk '/^ *[0-9]/ { print "direct", $1, $2 }' "$tmp/d" >> "$tmp/rows"
done
echo "# $NP ranks under mpirun, allreduce float32, blocking, $args; fastest of $ROUNDS rounds"
echo "#   size(B)  hcomm-perf(us)  same loop, hcomm API(us)  through libnccl.so.2(us)  shim/direct  shim/hcomm-perf"
awk '{ k = $1 SUBSEP $2; if (!(k in t) || $3 < t[k]) t[k] = $3; sz[$2] = 1 }
     END { for (s in sz) printf "%12d %14.2f %25.2f %25.2f %12.3f %16.3f\n", s, t["hcomm", s],
                                t["direct", s], t["shim", s], t["shim", s] / t["direct", s],
                                t["shim", s] / t["hcomm", s] }' "$tmp/rows" | sort -n
