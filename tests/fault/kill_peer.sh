#!/bin/sh
# kill_peer.sh - runs kill_peer (a rank killed or stopped mid-allreduce) over
# the shm and tcp transports and the ofi (tcp;ofi_rxm) and ucx (UCX_TLS=tcp)
# ones where they open, with 2 and 4 ranks, HCOMM_TIMEOUT=3, and a rank
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

# one VARIANT ARGS...: kill_peer ARGS over the transport variant VARIANT
# (tests/test_lib.sh; exit 77: cannot run here)
one() {
    vars=$(variant_env "$1")
    shift
    # shellcheck disable=SC2086 # the variant's assignments, one word each
    env $vars $guard "$bin" "$@"
    rc=$?
    how=
    [ $rc -eq 0 ] || how=" (exit $rc)"
    result "$vars HCOMM_TIMEOUT=3 $bin $*$how" $rc
}
variants="shm tcp"
for v in ofi-tcp ucx-tcp; do
    why=$(tl_unusable "$v")
    if [ -z "$why" ]; then variants="$variants $v"; else result "$v: $why" 77; fi
done
for mode in kill stop; do
    for transport in $variants; do
        for n in 2 4; do
            one "$transport" -n "$n" -m "$mode"
        done
    done
done
# death during the very first collective (connection setup included), no delay
for transport in $variants; do
    one "$transport" -n 4 -m kill -k 0 -d 0
done
finish
