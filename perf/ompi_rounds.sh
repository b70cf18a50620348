#!/bin/sh
# ompi_rounds.sh - hcomm against Open MPI's shared-memory collectives, in
# interleaved rounds: per round and rank count, ../shared/peers/mpi_coll_perf
# under mpirun.openmpi and perf/hcomm-perf with the same arguments, the order
# turning each round. Per rank count and size: hcomm's median out-of-place
# time over the rounds, Open MPI's, their ratio (below 1: hcomm faster) and
# the largest ratio of any one round. Each time comes from the time column
# or the algbw column, whichever was printed with more digits
# (perf/time_digits.awk). For example, issue 18's steady state:
#   RANKS="2 4" ROUNDS=9 perf/ompi_rounds.sh all_reduce -b 8 -e 8K -f 4 -n 3000 -w 3000
# Needs mpicc.openmpi and mpirun.openmpi.
RANKS=${RANKS:-2} ROUNDS=${ROUNDS:-7}
[ $# -gt 0 ] || { echo "usage: [RANKS=..] [ROUNDS=..] $0 COLL [perf args]" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
peer="$top/../shared/peers/mpi_coll_perf.c"
[ -x "$top/perf/hcomm-perf" ] || { echo "ompi_rounds: build hcomm first" >&2; exit 2; }
command -v mpicc.openmpi > /dev/null && [ -f "$peer" ] ||
    { echo "ompi_rounds: skipped: needs mpicc.openmpi and $peer" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc.openmpi -O2 -o "$tmp/ompi" "$peer" || exit 1
coll=$1
shift
for round in $(seq 1 "$ROUNDS"); do
    for n in $RANKS; do
        order="ompi hcomm"; [ $((round % 2)) -eq 0 ] && order="hcomm ompi"
        for name in $order; do
            if [ "$name" = ompi ]; then
                over=; [ "$n" -gt "$(nproc)" ] && over=--oversubscribe
                mpirun.openmpi $over -np "$n" "$tmp/ompi" "$coll" "$@" > "$tmp/out" 2>&1
            else
                "$top/perf/hcomm-perf" "$coll" "$@" --ranks "$n" > "$tmp/out" 2>&1
            fi || { cat "$tmp/out"; exit 1; }
            awk -v t="$name" -v n="$n" -v r="$round" -f "$top/perf/time_digits.awk" \
                "$tmp/out" >> "$tmp/rows"
        done
    done
done
echo "# $coll $*, $ROUNDS interleaved rounds; reference: Open MPI (mpi_coll_perf)"
echo "# ranks  size(B)  lib  median(us)  ompi median(us)  ratio  largest round ratio"
awk -v ref=ompi -v extreme=max -v fmt="%12.4f" -f "$top/perf/rounds_median.awk" \
    "$tmp/rows" | sort -k1,1n -k2,2n
