#!/bin/sh
# run_torch_shim.sh - the hcomm backend's Works under faults injected by a
# library preloaded in front of libhcomm (torch_shim.c, torch_shim.py): a
# Work whose communicator fails after its own operation ended still succeeds;
# a Completion that cannot be queued (out of memory) does not stall a
# Future's callback that issues. SKIPs as torch_lib.sh says.
# shellcheck source=tests/torch/torch_lib.sh
. "$(dirname "$0")/torch_lib.sh"
shim="$top/tests/torch/.libs/libtorch_shim.so"
[ -f "$shim" ] || skip "$shim not built"
export HCOMM_TIMEOUT=20 HC_TORCH_SHIM="$shim"
scratch torch_shim
try 120 LD_PRELOAD="$shim" "$py" -W ignore::UserWarning "$here/torch_shim.py" own
result "hcomm_torch: a Work reports its own operation's status, not its communicator's later error" $?
try 120 LD_PRELOAD="$shim" "$py" -W ignore::UserWarning "$here/torch_shim.py" queue
result "hcomm_torch: a Completion that cannot be queued does not hold the group's lock while it waits" $?
finish
