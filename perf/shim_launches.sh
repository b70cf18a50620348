#!/bin/sh
# shim_launches.sh - the NCCL drop-in's cost over many launches (issue 7).
# perf/shim_overhead times the shim against hcomm inside one process; a launch
# still lands where it lands, so this runs it LAUNCHES times (default 20),
# each launch followed by a control launch (-c: hcomm in both columns), and
# pools the per-size medians: per size their median over launches and their
# largest, and how many launches read above 1.03 at some size. TOPS lists
# built trees to interleave (default: this one), e.g. an older commit's.
#   make perf/shim_overhead
#   NP=1 perf/shim_launches.sh -b 8 -e 4096 -f 8 -n 2000 -r 21
#   NP=2 perf/shim_launches.sh -b 8 -e 4096 -f 8 -n 200 -r 31
NP=${NP:-1} LAUNCHES=${LAUNCHES:-20} TOPS=${TOPS:-.}
args=${*:--b 8 -e 4096 -f 8 -n 2000 -r 21}
mpirun=$(command -v mpirun.openmpi || command -v mpirun || true)
[ -n "$mpirun" ] || { echo "shim_launches: no mpirun" >&2; exit 2; }
for top in $TOPS; do
    [ -x "$top/perf/shim_overhead" ] ||
        { echo "shim_launches: make perf/shim_overhead in $top first" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
for launch in $(seq 1 "$LAUNCHES"); do
    for top in $TOPS; do
        for kind in shim control; do
            flag=; [ "$kind" = control ] && flag=-c
            # shellcheck disable=SC2086
            (cd "$top" && "$mpirun" --oversubscribe -np "$NP" ./perf/shim_overhead $flag $args) \
                > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
            awk -v k="$top:$kind" -v l="$launch" '!/^#/ { print k, l, $1, $5 }' "$tmp/out" \
                >> "$tmp/rows"
        done
    done
done
echo "# shim_overhead, $NP rank(s), $LAUNCHES launches each, $args"
echo "# tree:run  size(B)  median over launches  largest  launches above 1.03 at some size"
sort -k1,1 -k3,3n -k4,4g "$tmp/rows" |
    awk '{ k = $1 SUBSEP $3; v[k, ++n[k]] = $4; sz[$3] = 1; run[$1] = 1
           w = $1 SUBSEP $2; if ($4 > worst[w]) worst[w] = $4 }
         END {
             for (w in worst) { split(w, p, SUBSEP); if (worst[w] > 1.03) over[p[1]]++ }
             for (r in run) for (s in sz) {
                 k = r SUBSEP s; m = n[k] % 2 ? v[k, (n[k] + 1) / 2] : (v[k, n[k] / 2] + v[k, n[k] / 2 + 1]) / 2
                 printf "%-24s %10d %10.3f %10.3f %6d\n", r, s, m, v[k, n[k]], over[r] + 0 }
         }' | sort -k1,1 -k2,2n
