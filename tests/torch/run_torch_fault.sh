#!/bin/sh
# run_torch_fault.sh - a rank of an "hcomm" process group is killed (over
# shared memory, then over tcp) or stopped: the survivors' next all_reduce
# raises a RuntimeError naming the failure within the group's 5 s timeout
# (HCOMM_TIMEOUT is 300: the group's own timeout must bound the wait), and
# they exit (torch_kill.py); with 256 KiB allreduces (queued on the group's
# stream), then 8 B ones (run on the caller's thread). Then ranks that leave
# Python with work on the stream (torch_exit.py). SKIPs as torch_lib.sh says.
# shellcheck source=tests/torch/torch_lib.sh
. "$(dirname "$0")/torch_lib.sh"
export HCOMM_TIMEOUT=300
scratch torch_fault
for run in "kill auto 65536" "kill tcp 65536" "stop auto 65536" "kill auto 2" "stop auto 2"; do
    set -- $run
    try 150 env HCOMM_TRANSPORT="$2" "$py" -W ignore::UserWarning "$here/torch_kill.py" "$1" 3 5 "$3"
    result "hcomm_torch: rank 2 of 3 gets SIG$(echo "$1" | tr a-z A-Z) (transport $2, $3 floats): the others raise within the timeout" $?
done
# Python's exit while a stream runs a Future's callback (torch_exit.py): the
# callback ends and the process exits 0, where it used to abort
try 150 "$py" -W ignore::UserWarning "$here/torch_exit.py" 2
result "hcomm_torch: 2 ranks leave Python while their stream runs a callback: it ends, they exit 0" $?
finish
