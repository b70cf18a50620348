#!/bin/sh
# run_torch.sh - the PyTorch backend hcomm_torch: every ProcessGroup operation
# on every dtype against torch's own gloo in the same job (torch_ops.py), on 1
# to 4 ranks initialised through tcp://, then env:// and file:// once each.
# Runs Debian's /usr/bin/python3 (HC_TEST_TORCH_PYTHON to change it); SKIPs
# when it has no torch or this build has no hcomm_torch (configure's summary
# says why).
# shellcheck source=tests/torch/torch_lib.sh
. "$(dirname "$0")/torch_lib.sh"
export HCOMM_TIMEOUT=60
scratch torch
# torch_launch.py kills ranks still running after its limit; timeout(1) is
# the backstop
for run in "1 tcp" "2 tcp" "3 tcp" "4 tcp" "2 env" "3 file"; do
    set -- $run
    try 240 "$py" -W ignore::UserWarning "$here/torch_launch.py" "$1" "$2" 200 &&
        [ "$(grep -o ': [0-9]* checks passed, 0 failed' "$out" | wc -l)" -eq "$1" ]
    result "hcomm_torch against gloo: $1 ranks, $2:// init" $?
done
finish
