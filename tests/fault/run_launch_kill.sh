#!/bin/sh
# run_launch_kill.sh - a rank killed while a job starts leaves nothing in
# /dev/shm once hcomm-run is done (issue 19 item 7: 2 of 25 such runs left 3
# files). Each run gets a /dev/shm of its own (a tmpfs in a private mount
# namespace), so every object found there afterwards is the job's, whatever
# its name (hcomm's, or a fabric library's), and no test running beside this
# one can be mistaken for it. A run: hcomm-run -n 4 hcomm-perf, a random rank
# killed with SIGKILL 0 to 1.2 s after the launch (in the bootstrap, the
# topology discovery, the transports' set-up or the first collectives), over
# the default transports and over ofi's shm provider, whose regions are named
# by pid (hcomm-run removes those of its ranks).
#   HC_LAUNCH_KILLS=25 tests/fault/run_launch_kill.sh   (runs per variant; 6)
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run=$top/tools/hcomm-run
perf=$top/perf/hcomm-perf
need "$run" "$perf" "$top/tools/hcomm-topo"
need_root "a private /dev/shm (mount namespace)"
command -v unshare >/dev/null || skip "no unshare(1)"
unshare -m true 2>/dev/null || skip "cannot make a mount namespace here"
unset HCOMM_TRANSPORT HCOMM_NET
scratch launch_kill
runs=${HC_LAUNCH_KILLS:-6}

# one_run LOG DELAY PICK ENV: in a private /dev/shm, launches the job with
# ENV, kills rank PICK mod 4 after DELAY seconds, waits for hcomm-run; prints
# "rc R" (hcomm-run's exit status), "swept K" (what it said it removed) and
# "left L" (what /dev/shm still holds), then the names left.
one_run() {
    # shellcheck disable=SC2016 # expanded by the inner shell
    timeout 90 unshare -m sh -c '
        mount -t tmpfs -o size=512m hcomm-test /dev/shm || exit 99
        log=$1 pick=$4
        env $5 "$6" -n 4 "$7" all_reduce -b 8 -e 8M -w 5 -n 20 > "$log" 2>&1 &
        launcher=$!
        sleep "$3"
        set -- $(pgrep -P "$launcher")
        [ $# -gt 0 ] && shift $((pick % $#)) && kill -9 "$1" 2>/dev/null
        wait "$launcher"
        echo "rc $?"
        echo "swept $(sed -n "s/.*removed \([0-9]*\) object.*/\1/p" "$log" | head -1)"
        echo "left $(ls -A /dev/shm | wc -l)"
        ls -A /dev/shm | sed "s/^/  left: /"
    ' sh "$1" "$1" "$2" "$3" "$4" "$run" "$perf"
}

# variant NAME ENV: $runs runs; one result line
variant() {
    left_all=0 swept_runs=0 killed_runs=0 i=0
    while [ $i -lt "$runs" ]; do
        r=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
        delay=$(awk -v r="$r" 'BEGIN { printf "%.3f", (r % 12000) / 10000 }')
        one_run "$out.$1.$i" "$delay" $((r / 12000)) "$2" > "$out.$1.r$i" 2>&1
        left=$(sed -n 's/^left //p' "$out.$1.r$i")
        [ -n "$left" ] || left=1 # the run itself broke: show it
        [ "$(sed -n 's/^swept //p' "$out.$1.r$i")" ] && swept_runs=$((swept_runs + 1))
        [ "$(sed -n 's/^rc //p' "$out.$1.r$i")" = 0 ] || killed_runs=$((killed_runs + 1))
        [ "$left" -eq 0 ] || { echo "$1 run $i (kill at ${delay}s):"; cat "$out.$1.r$i"; }
        left_all=$((left_all + left))
        i=$((i + 1))
    done
    echo "$1: $runs runs, $killed_runs ended by the kill; hcomm-run removed leftovers in" \
        "$swept_runs; $left_all object(s) remained"
    [ "$left_all" -eq 0 ]
    result "$1: a rank killed at start-up under hcomm-run leaves nothing in /dev/shm" $?
}

variant default ""
why=$(tl_unusable ofi-shm)
if [ -n "$why" ]; then
    result "ofi-shm: $why" 77
else
    variant ofi-shm "$(variant_env ofi-shm)"
fi
finish
