#!/bin/sh
# run_torch_fault.sh - a rank of an "hcomm" process group is killed (over
# shared memory, then over tcp) or stopped: the survivors' next all_reduce
# raises a RuntimeError naming the failure within the group's 5 s timeout
# (HCOMM_TIMEOUT is 300: the group's own timeout must bound the wait), and
# they exit (torch_kill.py). SKIPs as run_torch.sh does.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
py=${HC_TEST_TORCH_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || skip "no $py"
"$py" -c 'import torch' > /dev/null 2>&1 || skip "$py cannot import torch (apt-get install python3-torch)"
[ -f "$top/python/hcomm_torch/_C.so" ] ||
    skip "hcomm_torch is not built: configure found no torch, or ran --without-torch"
export PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}"
export HCOMM_TIMEOUT=300
scratch torch_fault
for run in "kill auto" "kill tcp" "stop auto"; do
    set -- $run
    try 150 env HCOMM_TRANSPORT="$2" "$py" -W ignore::UserWarning "$here/torch_kill.py" "$1" 3 5
    result "hcomm_torch: rank 2 of 3 gets SIG$(echo "$1" | tr a-z A-Z) (transport $2): the others raise within the timeout" $?
done
finish
