#!/bin/sh
# kill_peer.sh - runs kill_peer (a rank killed or stopped mid-allreduce) over
# the shm and tcp transports with 2 and 4 ranks, HCOMM_TIMEOUT=3, and a rank
# killed at once in the first allreduce. Prints one line per run and finally
# "N passed, M failed"; exits 1 if a run failed, 77 if kill_peer is not built
# (or every run skipped). Under `make check` the current directory is the top
# build directory; by hand run it from there (or set KILL_PEER=path).
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
bin=${KILL_PEER:-$top/tests/fault/kill_peer}
need "$bin"
guard=
command -v timeout >/dev/null 2>&1 && guard="timeout -s KILL 150"

export HCOMM_TIMEOUT=3
unset HCOMM_RANK HCOMM_NRANKS HCOMM_ROOT

# one TRANSPORT ARGS...: kill_peer ARGS over TRANSPORT (exit 77: cannot run here)
one() {
    transport=$1
    shift
    HCOMM_TRANSPORT=$transport $guard "$bin" "$@"
    rc=$?
    how=
    [ $rc -eq 0 ] || how=" (exit $rc)"
    result "HCOMM_TRANSPORT=$transport HCOMM_TIMEOUT=3 $bin $*$how" $rc
}
for mode in kill stop; do
    for transport in shm tcp; do
        for n in 2 4; do
            one "$transport" -n "$n" -m "$mode"
        done
    done
done
# death during the very first collective (connection setup included), no delay
for transport in shm tcp; do
    one "$transport" -n 4 -m kill -k 0 -d 0
done
finish
