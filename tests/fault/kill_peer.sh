#!/bin/sh
# kill_peer.sh - runs kill_peer (a rank killed or stopped mid-allreduce) over
# the shm and tcp transports with 2 and 4 ranks, HCOMM_TIMEOUT=3, and a rank
# killed at once in the first allreduce. Prints one
# line per run and finally "N passed, M failed"; exits 1 if a run failed, 77 if
# kill_peer is not built. Under `make check` the current directory is the top
# build directory; by hand run it from there (or set KILL_PEER=path).

builddir=${top_builddir:-.}
if [ ! -x "$builddir/tests/fault/kill_peer" ]; then
    builddir=$(cd "$(dirname "$0")/../.." && pwd)
fi
bin=${KILL_PEER:-$builddir/tests/fault/kill_peer}
if [ ! -x "$bin" ]; then
    echo "kill_peer.sh: SKIP: $bin not built (make check builds it)"
    exit 77
fi
guard=
command -v timeout >/dev/null 2>&1 && guard="timeout -s KILL 150"

export HCOMM_TIMEOUT=3
unset HCOMM_RANK HCOMM_NRANKS HCOMM_ROOT
passed=0
failed=0
skipped=0
for mode in kill stop; do
    for transport in shm tcp; do
        for n in 2 4; do
            HCOMM_TRANSPORT=$transport $guard "$bin" -n $n -m $mode
            rc=$?
            case $rc in
            0) passed=$((passed + 1)) ;;
            77) skipped=$((skipped + 1)) ;;
            *)
                failed=$((failed + 1))
                echo "FAIL: HCOMM_TRANSPORT=$transport HCOMM_TIMEOUT=3 $bin -n $n -m $mode" \
                    "(exit $rc)"
                ;;
            esac
        done
    done
done
# death during the very first collective (connection setup included), no delay
for transport in shm tcp; do
    HCOMM_TRANSPORT=$transport $guard "$bin" -n 4 -m kill -k 0 -d 0
    rc=$?
    case $rc in
    0) passed=$((passed + 1)) ;;
    77) skipped=$((skipped + 1)) ;;
    *)
        failed=$((failed + 1))
        echo "FAIL: HCOMM_TRANSPORT=$transport HCOMM_TIMEOUT=3 $bin -n 4 -m kill -k 0 -d 0" \
            "(exit $rc)"
        ;;
    esac
done
[ $skipped -gt 0 ] && echo "kill_peer.sh: $skipped runs skipped"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ] || exit 1
[ $passed -gt 0 ] || exit 77
exit 0
