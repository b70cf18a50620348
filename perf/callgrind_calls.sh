#!/bin/sh
# callgrind_calls.sh - instructions per small allreduce, function by function,
# for hcomm and for Open MPI, 2 ranks on this host: each rank runs CALLS
# float32 sum allreduces of SIZE bytes under callgrind, collecting only inside
# the allreduce call (hcomm_allreduce, MPI_Allreduce). Prints per library the
# instructions per call of rank 0 and its functions' own (self) share per
# call, largest first. Waiting is included: a rank that polls for its peer
# counts the polling (progress loops, opal_progress), so read those lines as
# the wait, the rest as the call's path.
#   perf/callgrind_calls.sh [SIZE] [CALLS]          (defaults 8 and 2000)
# Needs valgrind, and mpicc.openmpi for the Open MPI side.
size=${1:-8} calls=${2:-2000}
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

report() { # report NAME FILE: Ir per call, then the 20 largest functions per call
    callgrind_annotate "$2" 2> /dev/null | awk -v name="$1" -v c="$calls" -v size="$size" '
        /PROGRAM TOTALS/ { t = $1; gsub(",", "", t)
            printf "# %s: %.0f instructions per call (rank 0, %d calls of %d bytes)\n", name, t / c, c, size }
        /file:function/ { on = 1; next }
        on && $1 ~ /^[0-9,]+$/ && n++ < 20 { v = $1; gsub(",", "", v)
            sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, ""); sub(/ \[.*\]$/, "")
            printf "%10.1f  %s\n", v / c, $0 }'
}

LD_LIBRARY_PATH="$top/.libs" valgrind -q --tool=callgrind --toggle-collect=hcomm_allreduce \
    --callgrind-out-file="$tmp/hcomm.%p" "$top/perf/.libs/first_calls" -N 2 -b "$size" -n "$calls" \
    > /dev/null || exit 1
# the parent (which makes no call) has the smallest pid, rank 0 the next
report hcomm "$(ls "$tmp"/hcomm.* | sort -t. -k2 -n | sed -n 2p)"

peer="$top/../shared/peers/mpi_coll_perf.c"
if ! command -v mpicc.openmpi > /dev/null || [ ! -f "$peer" ]; then
    echo "# Open MPI: skipped (needs mpicc.openmpi and $peer)"
else
    mpicc.openmpi -O2 -o "$tmp/ompi" "$peer" || exit 1
    mpirun.openmpi -np 2 valgrind -q --tool=callgrind --toggle-collect=MPI_Allreduce --toggle-collect=PMPI_Allreduce \
        --callgrind-out-file="$tmp/ompi.%q{OMPI_COMM_WORLD_RANK}" "$tmp/ompi" all_reduce \
        -b "$size" -e "$size" -n "$calls" -w 0 > /dev/null || exit 1
    report "Open MPI" "$tmp/ompi.0"
fi
