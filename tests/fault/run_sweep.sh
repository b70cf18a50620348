#!/bin/sh
# run_sweep.sh - what killed ranks leave of a job in /dev/shm, hcomm-run
# removes once the job is over; another job's objects stay. leave_shm's ranks
# each create one object named from the job's secret; rank 1 kills itself.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run=$top/tools/hcomm-run
bin=$top/tests/fault/leave_shm
need "$run" "$bin"
scratch sweep
[ -d /dev/shm ] || skip "no /dev/shm"

other=/dev/shm/hcomm-0123456789abcdef-left-other.$$
: > "$other" || skip "cannot write /dev/shm"
at_exit "rm -f '$other'"
try 60 "$run" -n 3 "$bin"
rc=$?
ok=0
[ $rc -ne 0 ] || { echo "hcomm-run exited 0 though rank 1 was killed"; ok=1; }
has 'removed 3 object(s) the job left in /dev/shm' || ok=1
[ -f "$other" ] || { echo "another job's object was removed"; ok=1; }
left=$(find /dev/shm -maxdepth 1 -newer "$other" -name 'hcomm-*-left-[0-9]' | wc -l)
[ "$left" -eq 0 ] || { echo "$left objects left"; ok=1; }
result "hcomm-run -n 3 leave_shm: the job's objects removed, another job's kept" $ok
finish
