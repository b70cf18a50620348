#!/bin/sh
# run_coll.sh - runs coll_check under hcomm-run for 1 to 8 ranks over the shm,
# tcp and auto transports, both allreduce algorithms and some transport and
# pipelining settings, sized to finish in a few minutes on a 2-core machine: the
# full matrix (1M+3 counts included) at 1, 2, 3, 4, 5 and 8 ranks on shm and
# tcp, without the 1M+3 counts for auto, --quick for the rest. Prints one
# line per run and finally "N passed, M failed" (runs); a failed run's log is
# kept. Exits 1 if any run failed, 77 if a binary is missing.
#
# Under `make check` the current directory is the top build directory. By hand:
#   tests/coll/run_coll.sh            (from the top build directory)
#   HCOMM_RUN=... COLL_CHECK=... tests/coll/run_coll.sh
# RUN_COLL_FILTER=REGEX runs only the runs whose label matches (e.g. "n=8").
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run=${HCOMM_RUN:-$top/tools/hcomm-run}
check=${COLL_CHECK:-$top/tests/coll/coll_check}
need "$run" "$check"

export HCOMM_TIMEOUT=60     # a stuck rank fails after a minute without progress
launcher_timeout=240        # hcomm-run's safety net, per run
logdir=$(mktemp -d "${TMPDIR:-/tmp}/run_coll.XXXXXX") || exit 99
start_all=$(date +%s)

now() { date +%s.%N; }

# one RANKS TRANSPORT "VAR=VALUE ..." [coll_check args...]
one() {
    n=$1 transport=$2 extra_env=$3
    shift 3
    args=$*
    label="n=$n transport=$transport${extra_env:+ $extra_env}${args:+ $args}"
    if [ -n "$RUN_COLL_FILTER" ] && ! echo "$label" | grep -Eq -- "$RUN_COLL_FILTER"; then
        return
    fi
    log=$logdir/run$((pass + fail)).log
    t0=$(now)
    # shellcheck disable=SC2086 # extra_env is a list of assignments
    env HCOMM_TRANSPORT="$transport" $extra_env \
        "$run" -n "$n" --timeout "$launcher_timeout" "$check" "$@" >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    case $rc in
    0) rm -f "$log"; how="$secs s" ;;
    124) how="$secs s, exit $rc: timed out" ;;
    *) how="$secs s, exit $rc" ;;
    esac
    result "$label ($how)" $rc "$log"
}

# a failed run: how to repeat it, its failures, and where its whole log is
on_fail() {
    echo "  reproduce: HCOMM_TRANSPORT=$transport $extra_env HCOMM_TIMEOUT=60" \
        "$run -n $n $check $args"
    grep -E '^(FAIL|coll_check: rank)|hcomm-run:' "$1" | head -n 20 | sed 's/^/  /'
    echo "  full log: $1"
}

small="--max-count 1023"  # everything but the 1M+3 counts

one 1 auto ""
for n in 2 3 4; do
    one $n shm ""
    one $n tcp ""
    one $n auto "" $small
done
for n in 5 8; do
    one $n shm ""
    one $n tcp ""
done
one 5 auto "" --quick
one 8 auto "" --quick
one 7 auto "" --quick
# both allreduce algorithms, whatever the selection would pick
for a in allreduce:ring allreduce:rd; do
    one 3 shm "HCOMM_ALGO=$a" --coll allreduce
    one 6 tcp "HCOMM_ALGO=$a" --coll allreduce $small
done
# transport and pipelining corners: many chunks, a small shm ring that wraps,
# no single-copy (CMA) path, TCP striping over several sockets
one 4 shm "HCOMM_CHUNK_BYTES=1K" $small
one 4 tcp "HCOMM_CHUNK_BYTES=1K" --quick
one 2 shm "HCOMM_SHM_RING_BYTES=64K HCOMM_SHM_CMA_MIN=0"
one 3 shm "HCOMM_SHM_CMA_MIN=1K"
one 3 tcp "HCOMM_TCP_NSOCKS=3 HCOMM_TCP_STRIPE_MIN=4K"
# an isend then an irecv whose peer answers 1.8 s late, twice, under a 3 s
# timeout: the irecv runs beside the isend, and its wait is timed from when
# it is the head (shm: a 4 MiB send ends only once the peer receives it; tcp
# may buffer it and end at once, and then the wait is rightly 3.6 s)
one 2 shm "HCOMM_TIMEOUT=3" --late-peer 1.8

echo "run_coll: $(( $(date +%s) - start_all )) s in all"
[ "$fail" -eq 0 ] && rmdir "$logdir" 2>/dev/null
finish
